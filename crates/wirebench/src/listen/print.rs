//! The listener's text: DatagramTest's "Now" and "Lifetime" blocks per publisher (with its
//! gap lines), a summary block when several publishers send, the TSV log rows, and the
//! closing totals.

use std::io::{self, Write};
use std::net::SocketAddr;

use wirebench_core::stream::StreamCounts;
use wirebench_core::stream::table::Entry;
use wirebench_core::units::Span;

use wirebench_report::screen::Detail;
use wirebench_report::words::{bits_words, rate_words, secs_words};

use super::Key;

/// Where reports go.
pub(super) struct Printer<'a> {
    /// The terminal text.
    pub out: &'a mut dyn Write,
    /// The TSV log, if asked for.
    pub log: Option<&'a mut dyn Write>,
    /// The listener's start, ns.
    pub start_ns: u64,
    /// The address it listens on.
    pub local: SocketAddr,
    /// How much the terminal gets: `-v` DatagramTest's blocks, the default a line per
    /// publisher per interval and its lifetime at the end, `-q` only the lifetimes.
    pub detail: Detail,
    /// The closing round is under way (the default view's lifetime lines).
    pub closing: bool,
}

/// The TSV columns.
pub(super) fn tsv_header(w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "time_s\tpublisher\tblock\telapsed_ms\tsize\tmb_per_s\tpackets_per_s\treceived\texpected\tmissing\tsuccess_rate\tout_of_order\tavg_offset\tgaps\tavg_gap_size\tavg_gap_time_ms"
    )
}

fn name(k: &Key) -> String {
    format!("{} (session {:016x}, publisher {})", k.0, k.1, k.2)
}

/// `127.0.0.1:34577/936a045e/0`: a publisher in a default view's lines (address, the
/// session's first 8 hex digits, publisher index).
fn short_name(k: &Key) -> String {
    format!("{}/{:08x}/{}", k.0, k.1 >> 32, k.2)
}

/// `  ooo 3  dup 1  gaps 2`: what went wrong in `c`, nothing when nothing did.
fn problems(c: &StreamCounts) -> String {
    let mut s = String::new();
    for (what, n) in [("ooo", c.out_of_order), ("dup", c.duplicates), ("gaps", c.gaps)] {
        if n > 0 {
            let _ = std::fmt::Write::write_fmt(&mut s, format_args!("  {what} {n}"));
        }
    }
    s
}

/// One block's figures over `span_ns`.
struct Block<'c> {
    title: &'c str,
    who: &'c str,
    /// The publisher in a default view's line.
    short: &'c str,
    c: &'c StreamCounts,
    span_ns: u64,
    size: usize,
}

/// DatagramTest's figures of one block, worked out once for the `-v` text and the TSV log.
struct Figures {
    elapsed_ms: u64,
    mb_per_s: f64,
    packets_per_s: f64,
    received: u64,
    expected: u64,
    missing: u64,
    success_rate: f64,
    out_of_order: u64,
    avg_offset: f64,
    gaps: u64,
    avg_gap_size: f64,
    avg_gap_ms: f64,
}

impl Figures {
    fn of(b: &Block<'_>) -> Self {
        let c = b.c;
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let mb_per_s = c.bytes as f64 / 1e6 / (b.span_ns as f64 / 1e9).max(1e-9);
        Self {
            elapsed_ms: b.span_ns / 1_000_000,
            mb_per_s,
            packets_per_s: c.per_sec(b.span_ns),
            received: c.received,
            expected: c.expected,
            missing: c.missing(),
            success_rate: c.success_rate(),
            out_of_order: c.out_of_order,
            avg_offset: c.avg_offset(),
            gaps: c.gaps,
            avg_gap_size: c.mean_gap(),
            avg_gap_ms: c.mean_gap_ns() / 1e6,
        }
    }
}

impl Printer<'_> {
    /// A block in a default or `-q` view: a `Now` block as one interval line, a lifetime as
    /// one line at the end (or when its publisher is forgotten); the rest only in the log.
    fn line(&mut self, b: &Block<'_>, now: u64) {
        let c = b.c;
        let lifetime = b.title.starts_with("Lifetime");
        let ended = self.closing || b.title.contains("forgotten");
        let shown = match self.detail {
            Detail::Quiet => lifetime && ended && b.title != "Lifetime summary",
            _ if lifetime => ended,
            // a Now line when something arrived: a publisher that stopped or pauses has none
            _ => c.received > 0 || c.duplicates > 0,
        };
        if !shown {
            return;
        }
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let loss = if c.expected == 0 { 0.0 } else { 100.0 * c.missing() as f64 / c.expected as f64 };
        let rates = format!("{} {}", rate_words(c.per_sec(b.span_ns)), bits_words(c.bits_per_sec(b.span_ns)));
        let line = if lifetime {
            let forgotten = if b.title.contains("forgotten") { " (forgotten after its silence)" } else { "" };
            format!(
                "{}: received {} of {} ({} missing, loss {loss:.4}%), {rates} over {}{}{forgotten}",
                b.short,
                c.received,
                c.expected,
                c.missing(),
                secs_words(b.span_ns, 3),
                problems(c)
            )
        } else {
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let t = now.saturating_sub(self.start_ns) as f64 / 1e9;
            format!("[{t:6.1}s] {}  {rates}  lost {}/{} ({loss:.3}%){}", b.short, c.missing(), c.expected, problems(c))
        };
        // `-q`: one line per publisher, however wide
        let line = if self.detail == Detail::Quiet { line } else { wirebench_report::screen::wrap(&line) };
        let _ = writeln!(self.out, "{line}");
    }

    fn block(&mut self, b: &Block<'_>, now: u64) {
        let f = Figures::of(b);
        if self.detail.verbose() {
            self.text(b, &f);
        } else {
            self.line(b, now);
        }
        self.log(b, &f, now);
    }

    fn text(&mut self, b: &Block<'_>, f: &Figures) {
        let _ = writeln!(
            self.out,
            "{}:\nRx from publisher: {}\n         to listener: {}\n             elapsed: {}ms\n         packet size: {} bytes\n          throughput: {:.1} MB/sec\n                      {:.0} packets/sec\n            received: {} of {}\n             missing: {}\n        success rate: {:.6}\n        out of order: {}\n          avg offset: {:.1}\n                gaps: {}\n        avg gap size: {:.1}\n        avg gap time: {:.3}ms",
            b.title,
            b.who,
            self.local,
            f.elapsed_ms,
            b.size,
            f.mb_per_s,
            f.packets_per_s,
            f.received,
            f.expected,
            f.missing,
            f.success_rate,
            f.out_of_order,
            f.avg_offset,
            f.gaps,
            f.avg_gap_size,
            f.avg_gap_ms,
        );
    }

    fn log(&mut self, b: &Block<'_>, f: &Figures, now: u64) {
        if let Some(w) = self.log.as_mut() {
            #[expect(clippy::cast_precision_loss, reason = "display values")]
            let t = now.saturating_sub(self.start_ns) as f64 / 1e9;
            let _ = writeln!(
                w,
                "{t:.3}\t{}\t{}\t{}\t{}\t{:.3}\t{:.0}\t{}\t{}\t{}\t{:.6}\t{}\t{:.2}\t{}\t{:.2}\t{:.3}",
                b.who,
                b.title,
                f.elapsed_ms,
                b.size,
                f.mb_per_s,
                f.packets_per_s,
                f.received,
                f.expected,
                f.missing,
                f.success_rate,
                f.out_of_order,
                f.avg_offset,
                f.gaps,
                f.avg_gap_size,
                f.avg_gap_ms,
            );
        }
    }

    /// Prints the Now and Lifetime blocks of one publisher (`expired`: its last, before it
    /// is forgotten after that much silence) and moves its report mark.
    pub(super) fn report(&mut self, e: &mut Entry<Key>, now: u64, expired: Option<Span>) {
        let life = *e.rx.counts();
        let since = life.since(&e.at_last_report);
        let who = name(&e.key);
        let short = short_name(&e.key);
        let span_ns = now.saturating_sub(e.last_report_ns);
        // The closing report right after a regular one: an empty Now block says nothing.
        if since.received > 0 || since.duplicates > 0 || span_ns >= 1_000_000 {
            self.block(&Block { title: "Now", who: &who, short: &short, c: &since, span_ns, size: e.size }, now);
        }
        let title = expired.map_or_else(|| "Lifetime".to_owned(), |s| format!("Lifetime (silent for {s}: forgotten)"));
        let span_ns = life.span_ns();
        self.block(&Block { title: &title, who: &who, short: &short, c: &life, span_ns, size: e.size }, now);
        e.at_last_report = life;
        e.last_report_ns = now;
    }

    /// Reports every publisher, then, when there are several, their sum (DatagramTest's
    /// "Rx Summary"): elapsed from the earliest first to the latest last arrival.
    pub(super) fn round(&mut self, live: &mut [Entry<Key>], now: u64) {
        for e in live.iter_mut() {
            self.report(e, now, None);
        }
        if live.len() > 1 {
            let mut sum = StreamCounts::default();
            for e in live.iter() {
                sum.add(e.rx.counts());
            }
            let who = format!("{} publishers", live.len());
            let size = live.first().map_or(0, |e| e.size);
            let span_ns = sum.span_ns();
            self.block(&Block { title: "Lifetime summary", who: &who, short: &who, c: &sum, span_ns, size }, now);
        }
    }
}
