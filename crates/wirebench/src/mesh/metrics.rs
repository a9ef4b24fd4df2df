//! `/metrics`: the agent's state, encoded by the `prometheus-client` crate from a snapshot
//! at each scrape (a peer that is dropped is gone from the next scrape; nothing is kept per
//! label set that ever existed), in the format the scraper asks for
//! ([`wirebench_core::mesh::exposition`]): Prometheus text 0.0.4 by default, OpenMetrics
//! text, or protobuf. The two text formats carry the same series; protobuf carries them and
//! the per-peer native histograms.
//!
//! Per agent (61 series with UDP, TCP, one discovery source and the stall meter; the
//! multicast histogram adds 19): `wirebench_mesh_agent_info{node,addr,zone}`, `wirebench_mesh_peers{state}`,
//! `wirebench_mesh_probe_budget_per_second`, `wirebench_mesh_probe_rate_per_second`,
//! `wirebench_mesh_window_seconds`, `wirebench_mesh_rtt_seconds` (histogram by `proto`),
//! `wirebench_mesh_unauthenticated_total{direction}`, `wirebench_mesh_probes_answered_total
//! {proto}`, `wirebench_mesh_replies_unmatched_total`, `wirebench_mesh_http_unauthorized_total`, `wirebench_mesh_http_closed_total{reason}`,
//! `wirebench_mesh_udp_socket_failures_total`, `wirebench_mesh_tcp_not_probes_total`,
//! `wirebench_mesh_discovery_errors_total{source}`, `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`; with the stall samples (unless `--no-hiccup`, 3 series:
//! the prober's own send-slot wake-ups, or with `--hiccup-interval` a meter thread's),
//! `wirebench_mesh_hiccup_seconds{quantile="0.99|1"}` and
//! `wirebench_mesh_hiccup_window_wakeups` of their last window.
//!
//! Per probed peer (`peer` is its probe address; 1 series, plus 8 per transport):
//! `wirebench_mesh_peer_info{peer,node,zone}` (and `kind="stamp"` for a STAMP reflector), and by `peer,proto`:
//! `wirebench_mesh_peer_rtt_seconds{quantile="0|0.5|0.99|1"}` (min, p50, p99, max of the
//! last window, from its HdrHistogram), `wirebench_mesh_peer_window_sent`,
//! `wirebench_mesh_peer_window_lost` (the last window), `wirebench_mesh_peer_probes_sent_total`,
//! `wirebench_mesh_peer_probes_lost_total` (since the agent started). In protobuf only, and
//! for each cell with a round trip, [`WINDOW_RTT`]: the last window's HdrHistogram as a gauge
//! histogram with native buckets (schema [`native::SCHEMA`]) and the classic
//! [`RTT_BUCKETS`] beside them, so that a sum over peers and agents is the distribution of
//! all their round trips.
//!
//! Protobuf is the `prometheus-client` crate's own encoder (its `prometheus_protobuf`
//! feature, which writes native histograms): the same collector feeds all three formats, so
//! they cannot drift apart. Its `.proto` is compiled at build time by `protox` (pure Rust:
//! no `protoc` to install).

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_protobuf::{self, prometheus_data_model};
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeMetric as _, NativeHistogram, NativeHistogramBuckets, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::registry::Registry;
use prost::Message as _;
use wirebench_core::mesh::api::{CellReport, MatrixReport, Proto};
use wirebench_core::mesh::exposition::{self, Format};
use wirebench_core::mesh::native;

use super::state::{RTT_BUCKETS, Shared};

/// The per-peer native histogram of the last window's round trips (protobuf only).
pub const WINDOW_RTT: &str = "wirebench_mesh_peer_window_rtt_seconds";

/// The collector behind `/metrics`.
#[derive(Debug)]
pub struct MeshCollector {
    shared: Arc<Shared>,
    /// With the per-peer native histograms (for protobuf; the text formats keep their series).
    native: bool,
}

type Labels = Vec<(&'static str, String)>;

fn gauge(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: &[(Labels, f64)]) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        if labels.is_empty() {
            m.encode_gauge(v)?;
        } else {
            m.encode_family(labels)?.encode_gauge(v)?;
        }
    }
    Ok(())
}

fn counter(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: &[(Labels, u64)]) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        if labels.is_empty() {
            m.encode_counter::<NoLabelSet, _, u64>(v, None)?;
        } else {
            m.encode_family(labels)?.encode_counter::<NoLabelSet, _, u64>(v, None)?;
        }
    }
    Ok(())
}

fn info(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: &[Labels]) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Info)?;
    for labels in rows {
        m.encode_info(labels)?;
    }
    Ok(())
}

/// CPU seconds (user + system) and resident bytes of this process.
pub fn process_use() -> (f64, u64) {
    #[expect(clippy::cast_precision_loss, reason = "seconds as a display value")]
    let cpu = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    });
    // statm: size resident shared ... in pages.
    let rss_pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .unwrap_or(0);
    (cpu, rss_pages * 4096)
}

impl Collector for MeshCollector {
    #[expect(clippy::cast_precision_loss, reason = "metric values are floats")]
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> fmt::Result {
        let s = &self.shared;
        let plan = s.peers();
        let me = &plan.agent;
        info(
            &mut e,
            "wirebench_mesh_agent",
            "This agent: node name, probe address, zone",
            &[vec![
                ("node", me.name.clone().unwrap_or_default()),
                ("addr", me.addr.clone()),
                ("zone", me.zone.clone().unwrap_or_default()),
            ]],
        )?;
        let probed = plan.peers.iter().filter(|p| p.probed).count();
        gauge(
            &mut e,
            "wirebench_mesh_peers",
            "Peers discovered, and of those probed",
            &[
                (vec![("state", "discovered".into())], plan.peers.len() as f64),
                (vec![("state", "probed".into())], probed as f64),
            ],
        )?;
        gauge(
            &mut e,
            "wirebench_mesh_probe_budget_per_second",
            "Most unicast probes per second",
            &[(vec![], plan.budget_per_s)],
        )?;
        gauge(
            &mut e,
            "wirebench_mesh_probe_rate_per_second",
            "Unicast probes per second planned",
            &[(vec![], plan.probes_per_s)],
        )?;
        gauge(&mut e, "wirebench_mesh_window_seconds", "Length of a window", &[(vec![], s.window_ns as f64 / 1e9)])?;
        {
            let mut m = e.encode_descriptor(
                "wirebench_mesh_rtt_seconds",
                "Round trips of every probe this agent sent",
                None,
                MetricType::Histogram,
            )?;
            for p in Proto::ALL {
                let h = s.rtt_of(p);
                if p == Proto::Multicast && !s.multicast {
                    continue;
                }
                h.encode(m.encode_family(&vec![("proto", p.name().to_owned())])?)?;
            }
        }
        let serve = s.serve.snapshot();
        counter(
            &mut e,
            "wirebench_mesh_unauthenticated",
            "Probes and replies dropped for a missing or wrong tag",
            &[
                (vec![("direction", "probe".into())], serve.unauthenticated),
                (vec![("direction", "reply".into())], s.replies_unauthenticated.load(Ordering::Relaxed)),
            ],
        )?;
        counter(
            &mut e,
            "wirebench_mesh_probes_answered",
            "Probes this agent answered",
            &[(vec![("proto", "udp".into())], serve.udp_probes), (vec![("proto", "tcp".into())], serve.tcp_probes)],
        )?;
        counter(
            &mut e,
            "wirebench_mesh_replies_unmatched",
            "Replies that were late, duplicate or to nothing sent",
            &[(vec![], s.replies_unmatched.load(Ordering::Relaxed))],
        )?;
        counter(
            &mut e,
            "wirebench_mesh_udp_socket_failures",
            "UDP targets whose own connected socket could not be opened (probed from the shared socket)",
            &[(vec![], s.udp_socket_failures.load(Ordering::Relaxed))],
        )?;
        counter(
            &mut e,
            "wirebench_mesh_tcp_not_probes",
            "Probe connections closed for carrying what is not probe replies (a bad header, a frame past 4 KiB, more frames than probes sent)",
            &[(vec![], s.tcp_not_probes.load(Ordering::Relaxed))],
        )?;
        counter(
            &mut e,
            "wirebench_mesh_http_unauthorized",
            "HTTP requests refused for a missing or wrong token",
            &[(vec![], s.http_unauthorized.load(Ordering::Relaxed))],
        )?;
        counter(
            &mut e,
            "wirebench_mesh_http_closed",
            "HTTP connections the agent closed: refused (past the caps), evicted (for a newcomer), timed_out (a head, idle or answer deadline)",
            &[
                (vec![("reason", "refused".into())], s.http_refused.load(Ordering::Relaxed)),
                (vec![("reason", "evicted".into())], s.http_evicted.load(Ordering::Relaxed)),
                (vec![("reason", "timed_out".into())], s.http_timed_out.load(Ordering::Relaxed)),
            ],
        )?;
        let errors: Vec<(Labels, u64)> =
            s.board.errors().into_iter().map(|(src, n)| (vec![("source", src)], n)).collect();
        counter(&mut e, "wirebench_mesh_discovery_errors", "Failed discovery rounds by source", &errors)?;
        let (cpu, rss) = process_use();
        {
            let mut m =
                e.encode_descriptor("process_cpu_seconds", "User and system CPU time", None, MetricType::Counter)?;
            m.encode_counter::<NoLabelSet, _, f64>(&cpu, None)?;
        }
        gauge(&mut e, "process_resident_memory_bytes", "Resident memory", &[(vec![], rss as f64)])?;
        let hiccup = *s.hiccup.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(h) = hiccup {
            gauge(
                &mut e,
                "wirebench_mesh_hiccup_seconds",
                "This host's own stalls in the last window: how late the agent's timed wake-ups came (its prober's send slots, or with --hiccup-interval a meter thread's; p99, max)",
                &[
                    (vec![("quantile", "0.99".into())], h.p99_ns as f64 / 1e9),
                    (vec![("quantile", "1".into())], h.max_ns as f64 / 1e9),
                ],
            )?;
            gauge(
                &mut e,
                "wirebench_mesh_hiccup_window_wakeups",
                "Timed wake-ups sampled for stalls in the last window (with those a stall made it miss)",
                &[(vec![], (h.wakeups + h.corrected) as f64)],
            )?;
        }
        // One window for the quantiles and the native histograms alike.
        let window = s.matrix();
        per_peer(s, &window, &mut e)?;
        if self.native {
            window_rtt(&window.cells, &mut e)?;
        }
        Ok(())
    }
}

fn quantile_label(q: f64) -> String {
    let mut s = String::new();
    let _ = write!(s, "{q}");
    s
}

/// The per-peer series, from the latest closed window and the running totals.
#[expect(clippy::cast_precision_loss, reason = "metric values are floats")]
fn per_peer(s: &Shared, m: &MatrixReport, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let totals = s.totals();
    let plan = s.peers();
    let infos: Vec<Labels> = plan
        .peers
        .iter()
        .filter(|p| p.probed)
        .map(|p| {
            let mut l = vec![
                ("peer", p.peer.addr.clone()),
                ("node", p.peer.name.clone().unwrap_or_default()),
                ("zone", p.peer.zone.clone().unwrap_or_default()),
            ];
            if p.peer.stamp {
                l.push(("kind", "stamp".to_owned()));
            }
            l
        })
        .collect();
    if !infos.is_empty() {
        info(e, "wirebench_mesh_peer", "A probed peer: node name and zone", &infos)?;
    }
    let key = |addr: &str, p: Proto| vec![("peer", addr.to_owned()), ("proto", p.name().to_owned())];
    let mut rtt = Vec::new();
    let (mut wsent, mut wlost) = (Vec::new(), Vec::new());
    for c in &m.cells {
        if let Some(r) = c.rtt {
            for (q, ns) in [(0.0, r.min_ns), (0.5, r.p50_ns), (0.99, r.p99_ns), (1.0, r.max_ns)] {
                let mut l = key(&c.peer.addr, c.proto);
                l.push(("quantile", quantile_label(q)));
                rtt.push((l, ns as f64 / 1e9));
            }
        }
        wsent.push((key(&c.peer.addr, c.proto), c.sent as f64));
        wlost.push((key(&c.peer.addr, c.proto), c.lost as f64));
    }
    gauge(e, "wirebench_mesh_peer_rtt_seconds", "Round trip in the last window: min, p50, p99, max", &rtt)?;
    gauge(e, "wirebench_mesh_peer_window_sent", "Probes sent in the last window", &wsent)?;
    gauge(e, "wirebench_mesh_peer_window_lost", "Probes lost in the last window", &wlost)?;
    let sent: Vec<(Labels, u64)> = totals.iter().map(|((a, p), t)| (key(a, *p), t.sent)).collect();
    let lost: Vec<(Labels, u64)> = totals.iter().map(|((a, p), t)| (key(a, *p), t.lost)).collect();
    counter(e, "wirebench_mesh_peer_probes_sent", "Probes sent since the agent started (closed windows)", &sent)?;
    counter(e, "wirebench_mesh_peer_probes_lost", "Probes lost since the agent started (closed windows)", &lost)
}

/// [`WINDOW_RTT`]: one histogram per cell that has round trips, from its HdrHistogram.
fn window_rtt(cells: &[CellReport], e: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let hists: Vec<_> = cells
        .iter()
        .filter_map(|c| {
            let h = wirebench_core::report::decode_histogram(c.histogram.as_deref()?).ok()?;
            Some((vec![("peer", c.peer.addr.clone()), ("proto", c.proto.name().to_owned())], h))
        })
        .collect();
    if hists.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(
        WINDOW_RTT,
        "Round trips in the last window (native buckets, and the classic ones for servers without them)",
        None,
        MetricType::Histogram,
    )?;
    for (labels, h) in &hists {
        let n = native::native_seconds(h, native::SCHEMA);
        let (spans, deltas) = n.spans_and_deltas();
        let classic = native::classic_seconds(h, &RTT_BUCKETS);
        m.encode_family(labels)?.encode_histogram_with_native(
            n.sum,
            n.count,
            &classic,
            None::<&std::collections::HashMap<usize, Exemplar<NoLabelSet, f64>>>,
            NativeHistogram {
                schema: i32::from(n.schema),
                zero_threshold: native::ZERO_THRESHOLD,
                zero_count: n.zero_count,
                negative: NativeHistogramBuckets { spans: &[], deltas: &[] },
                positive: NativeHistogramBuckets { spans: &spans, deltas: &deltas },
                created: None,
            },
        )?;
    }
    Ok(())
}

/// `/metrics` in each format: a registry for the text formats and one for protobuf.
#[derive(Debug)]
pub struct Metrics {
    text: Registry,
    protobuf: Registry,
}

impl Metrics {
    /// Both registries, each holding only the mesh collector.
    pub fn new(shared: &Arc<Shared>) -> Self {
        let registry = |native| {
            let mut r = Registry::default();
            r.register_collector(Box::new(MeshCollector { shared: shared.clone(), native }));
            r
        };
        Self { text: registry(false), protobuf: registry(true) }
    }

    /// One scrape in `format`; `None` if the protobuf encoder failed.
    pub fn scrape(&self, format: Format) -> Option<Vec<u8>> {
        match format {
            Format::OpenMetrics => Some(self.openmetrics().into_bytes()),
            Format::Text => Some(exposition::text_from_openmetrics(&self.openmetrics()).into_bytes()),
            Format::Protobuf => {
                let mut families = prometheus_protobuf::encode(&self.protobuf).ok()?;
                let mut out = Vec::new();
                for f in &mut families {
                    // A window's histogram is not a running total: a gauge histogram (the
                    // encoder has no such type, the exposition has).
                    if f.name == WINDOW_RTT {
                        f.r#type = prometheus_data_model::MetricType::GaugeHistogram as i32;
                    }
                    f.encode_length_delimited(&mut out).ok()?;
                }
                Some(out)
            }
        }
    }

    /// The OpenMetrics text of one scrape.
    pub fn openmetrics(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.text);
        out
    }
}
