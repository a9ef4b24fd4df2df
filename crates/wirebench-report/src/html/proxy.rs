//! The HTML of a proxy run: requested against achieved per direction, the delay the proxy
//! added (its distribution, one line per direction) and the per-interval rate.

use std::io::{self, Write};

use wirebench_core::report::{ProxyResults, Results, decode_histogram};

use super::{captured, figure};
use crate::Run;
use crate::charts::{self, Line};
use crate::text::proxy::{bps, summary};
use crate::words::us;

/// `udp 127.0.0.1:9000 -> 127.0.0.1:7878: added p50 up 501 us / down 500 us`.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub(super) fn headline(p: &ProxyResults) -> String {
    let p50 = |d: &wirebench_core::report::ProxyDirection| {
        d.achieved.added_delay.summary.at(50.0).map_or_else(|| "-".into(), |v| us(v as f64))
    };
    format!(
        "{} {} -> {}: added delay p50 up {} / down {} us, loss up {:.3}% / down {:.3}%",
        p.proto,
        p.listen,
        p.upstream,
        p50(&p.up),
        p50(&p.down),
        p.up.achieved.loss_pct,
        p.down.achieved.loss_pct
    )
}

pub(super) fn section(out: &mut dyn Write, r: &Run<'_>) -> io::Result<()> {
    let Results::Proxy(p) = &r.report.results else { return Ok(()) };
    let text = captured(|w| summary(w, r.report))?;
    writeln!(out, "<pre>{}</pre>", super::escape(&text))?;
    let mut delay = Vec::new();
    for (name, d) in [("up (client -> upstream)", &p.up), ("down (upstream -> client)", &p.down)] {
        if let Ok(h) = decode_histogram(&d.achieved.added_delay.histogram) {
            let pts = charts::percentile_points(&h, 1000.0);
            if !pts.is_empty() {
                delay.push(Line::new(name, pts));
            }
        }
    }
    if !delay.is_empty() {
        let svg =
            charts::percentile_chart(&format!("{}: added delay by percentile", r.name), "added delay (us)", &delay)?;
        figure(
            out,
            &svg,
            "The delay the proxy added to each delivered packet (release minus arrival), per direction.",
        )?;
    }
    if !p.intervals.is_empty() {
        #[expect(clippy::cast_precision_loss, reason = "plot coordinates")]
        let end = |i: &wirebench_core::report::ProxyInterval| (i.start_ns + i.duration_ns) as f64 / 1e9;
        let up = Line::new("up", p.intervals.iter().map(|i| (end(i), i.up.rate_bps / 1e6)).collect());
        let down = Line::new("down", p.intervals.iter().map(|i| (end(i), i.down.rate_bps / 1e6)).collect());
        let svg = charts::series_chart(&format!("{}: rate", r.name), "seconds", "Mbit/s", &[up, down])?;
        let last = p.intervals.last().map_or(0.0, |i| i.up.rate_bps.max(i.down.rate_bps));
        figure(out, &svg, &format!("Bits sent per interval and direction (last interval {}).", bps(last)))?;
    }
    Ok(())
}
