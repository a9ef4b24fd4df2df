//! Fixed reports for the renderers' tests.

use std::collections::BTreeMap;

use wirebench_core::latency::{Percentile, Summary, histogram, record};
use wirebench_core::report::{
    Host, IntervalRow, KernelResult, LatencyView, Meta, NetInterface, Outcome, Pacing, PingResults, ProbeForm,
    ReceiverResult, RelayCount, RelayDrops, RelayGroup, RelayResults, RelayRetired, Report, ResponderResult, Results,
    SearchEnding, SearchResult, StreamDirection, StreamResults, SweepRow, ThreadInfo, Transport, TrialRow,
    encode_histogram,
};
use wirebench_core::stream::StreamCounts;

pub(crate) fn meta() -> Meta {
    let mut sysctls = BTreeMap::new();
    sysctls.insert("net.core.rmem_max".to_owned(), "4194304".to_owned());
    Meta {
        tool: "wirebench".into(),
        version: "0.1.0".into(),
        command_line: vec!["wirebench".into(), "ping".into(), "127.0.0.1:7878".into()],
        started_at: "2026-01-01T00:00:00Z".into(),
        duration_ns: 1_500_000_000,
        host: Host {
            hostname: "a".into(),
            kernel: "6.18".into(),
            cpu_model: "AMD EPYC".into(),
            cpus: 2,
            clocksource: "tsc".into(),
            sysctls,
            interfaces: vec![NetInterface { name: "lo".into(), mtu: Some(65536), role: "route to x".into() }],
        },
        git_commit: Some("a071b60d5d4e57".into()),
    }
}

/// A ping's kernel split with software stamps on both sides for 100 of 100 replies.
pub(crate) fn kernel(stack: Option<LatencyView>, hosts: Option<LatencyView>) -> KernelResult {
    KernelResult {
        tx: "software".into(),
        rx: "software".into(),
        replies: 100,
        tx_stamps: 100,
        rx_stamps: 100,
        out_of_order: 0,
        stack,
        hosts,
    }
}

/// A view of `n` samples at `base_ns`, `base_ns + 1000`, ... (so p50 is about
/// `base_ns + 500 * n`).
pub(crate) fn view(base_ns: u64, n: u64) -> LatencyView {
    let mut h = histogram();
    for i in 0..n {
        record(&mut h, base_ns + i * 1000);
    }
    LatencyView {
        measures: wirebench_core::report::Measure::RttFromSend,
        summary: Summary {
            count: n,
            min_ns: base_ns,
            max_ns: base_ns + (n - 1) * 1000,
            mean_ns: 0.0,
            stddev_ns: 0.0,
            percentiles: vec![Percentile { p: 50.0, ns: base_ns + n / 2 * 1000 }],
        },
        histogram: encode_histogram(&h),
    }
}

fn responder(addr: &str, base_ns: u64) -> ResponderResult {
    ResponderResult {
        addr: addr.into(),
        received: 100,
        lost: 1,
        late: 0,
        duplicates: 0,
        latency: view(base_ns, 100),
        uncorrected: None,
        warmup: view(base_ns, 10),
        network: None,
        dwell: None,
        one_way: None,
        clamped: 0,
        max_lost_in_a_row: 1,
        stopped: None,
        kernel: None,
    }
}

/// A closed-loop UDP ping with one responder per entry of `bases` (first sample, ns).
pub(crate) fn ping(bases: &[u64]) -> Report {
    let responders: Vec<ResponderResult> =
        bases.iter().enumerate().map(|(i, b)| responder(&format!("10.0.0.{}:7878", i + 1), *b)).collect();
    Report {
        schema_version: 1,
        meta: meta(),
        config: serde_json::json!({}),
        outcome: Outcome::Completed,
        results: Results::Ping(PingResults {
            proto: "udp".into(),
            target: "10.0.0.1:7878".into(),
            pacing: Pacing::Closed,
            probe_size: 32,
            probe_form: ProbeForm::Compact,
            sent: 101,
            warmup_sent: 10,
            timeout_ns: 1_000_000_000,
            rate: None,
            thread: ThreadInfo { spin: false, pinned_cpu: None, seen_cpus: vec![0] },
            combined: None,
            responders,
            ignored: 0,
            gave_up: None,
        }),
        attribution: None,
    }
}

fn counts(received: u64, missing: u64, span_ns: u64) -> StreamCounts {
    StreamCounts {
        received,
        bytes: received * 1000,
        expected: received + missing,
        first_ns: 1,
        last_ns: 1 + span_ns,
        ..StreamCounts::default()
    }
}

/// A UDP stream of 1000-byte messages: `received` of `sent` over one second, two intervals,
/// a two-trial search and a two-size sweep.
pub(crate) fn stream(sent: u64, received: u64) -> Report {
    let half = counts(received / 2, (sent - received) / 2, 500_000_000);
    let receiver = ReceiverResult {
        addr: "127.0.0.1:7878".into(),
        direction: StreamDirection::Forward,
        sent,
        total: counts(received, sent - received, 1_000_000_000),
        publishers: vec![],
        intervals: vec![
            IntervalRow { at_ns: 500_000_000, counts: half, loss_split: None },
            IntervalRow { at_ns: 1_000_000_000, counts: half, loss_split: None },
        ],
        send_ns: 1_000_000_000,
        recv_ns: 0,
        foreign: 0,
        kernel: None,
        loss_split: None,
        wake: None,
    };
    let trial = |rate: f64, loss: f64| TrialRow {
        rate_per_s: Some(rate),
        sent_per_s: rate,
        sent: 100,
        received: 100,
        loss,
        passed: loss == 0.0,
        delay_rise_ns: None,
        queue: false,
    };
    Report {
        schema_version: 1,
        meta: meta(),
        config: serde_json::json!({}),
        outcome: Outcome::Completed,
        results: Results::Stream(StreamResults {
            proto: Transport::Udp,
            direction: StreamDirection::Forward,
            size: 1000,
            publishers: 1,
            rate_per_s: None,
            sender: None,
            receivers: vec![receiver],
            search: Some(SearchResult {
                loss_target: 0.0,
                trials: vec![trial(2000.0, 0.1), trial(1000.0, 0.0)],
                best_per_s: 1000.0,
                best_bits_per_s: 8e6,
                ending: SearchEnding::Found,
                floor_per_s: 2.0,
            }),
            sweep: vec![
                SweepRow { size: 64, per_s: 1e6, bits_per_s: 5.12e8, loss: 0.0, sent_per_s: None },
                SweepRow { size: 1024, per_s: 5e5, bits_per_s: 4.096e9, loss: 0.01, sent_per_s: None },
            ],
            warnings: vec![],
            listen: None,
            generator: None,
        }),
        attribution: None,
    }
}

/// The receiving relay of a stream of 3,000: it re-emitted all of them and heard each
/// back on its group socket.
pub(crate) fn relay() -> RelayResults {
    let count = |datagrams: u64| RelayCount { datagrams, bytes: datagrams * 200 };
    RelayResults {
        relay_id: "6a440ce4eee9b564".into(),
        listen: "10.77.94.2:7880".into(),
        authenticated: false,
        groups: vec![RelayGroup {
            group: "239.255.93.1:18201".into(),
            carried: true,
            native_peers: Vec::new(),
            local_in: count(0),
            forwarded: count(0),
            reemitted: count(3_000),
            drops: RelayDrops { looped: 3_000, ..RelayDrops::default() },
            kernel_drops: 0,
        }],
        peers: Vec::new(),
        senders: Vec::new(),
        senders_untracked: 0,
        not_a_peer: 0,
        malformed: 0,
        kernel_drops: 0,
        retired: RelayRetired::default(),
        peer_totals: None,
        max_peers: 1024,
        peers_refused: 0,
        peers_waiting: 0,
    }
}

/// A load run of 5 clients for 10 s: 100 cursor moves relayed to 4 clients each (100 of
/// 400 arrived) and 100 saves answered.
pub(crate) fn load() -> Report {
    use wirebench_core::load::Mix;
    use wirebench_core::load::delivery::Account;
    use wirebench_core::load::record::{Arrival, Recording};
    use wirebench_core::load::results::{Counts, Shape, build};

    let mix = Mix::parse("cursor=3,save=1", &["save"]).unwrap();
    let mut rec = Recording::new(2);
    for i in 0..100 {
        rec.on_send(0, 0, 4);
        rec.on_delivery(0, 1_000_000 + i, None, Arrival::Expected);
        rec.on_send(1, 0, 1);
        rec.on_reply(1, 2_000_000 + i, Arrival::Expected);
    }
    let shape = Shape {
        url: "ws://h:1/r-0".into(),
        clients: 5,
        room_size: 5,
        rate_per_client: 2.0,
        arrivals: "fixed",
        mix: &mix,
        percentiles: &[50.0, 99.0],
        thresholds: &[],
        link_up: None,
        link_down: None,
        end_ns: 10_000_000_000,
        ramp_ns: 0,
    };
    let d = Account { expected: 400, arrived: 100, missing: 300, late: 300, ..Account::default() };
    let counts = Counts { connected: 5, ..Counts::default() };
    let l = build(&shape, &rec, (&d, &Account::default()), counts, Vec::new(), 10_000_000_000, (1, 1), 1, false);
    Report { results: Results::Load(l), ..ping(&[1_000]) }
}

/// Stalls of `base_ns`, `base_ns + 1000`, ... (100 values), over two seconds.
pub(crate) fn stalls(base_ns: u64) -> wirebench_core::report::HiccupResult {
    use wirebench_core::hiccup::HiccupSecond;
    let mut lateness = view(base_ns, 100);
    lateness.measures = wirebench_core::report::Measure::WakeupLateness;
    let max = lateness.summary.max_ns;
    wirebench_core::report::HiccupResult {
        interval_ns: 1_000_000,
        wakeups: 100,
        corrected: 0,
        lateness,
        seconds: vec![
            HiccupSecond { at_s: 0, count: 50, max_ns: base_ns + 49_000, p99_ns: base_ns + 49_000 },
            HiccupSecond { at_s: 1, count: 50, max_ns: max, p99_ns: max },
        ],
        cpu_ns: None,
    }
}
