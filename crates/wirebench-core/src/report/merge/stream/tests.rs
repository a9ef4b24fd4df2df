#![expect(
    clippy::float_cmp,
    clippy::many_single_char_names,
    clippy::cast_precision_loss,
    reason = "the rates here are exact in f64 (small integers over whole seconds); short names for parts a and b"
)]

use super::super::{Input, merge};
use crate::counters::LossSplit;
use crate::generator::GeneratorVerdict;
use crate::report::{
    GeneratorHealth, IntervalRow, ListenTotals, ReceiverResult, Report, Results, SearchEnding, SearchResult,
    SenderResult, StreamDirection, StreamResults, SweepRow, Transport,
};
use crate::snmp::Snmp;
use crate::stream::StreamCounts;
use crate::stream::wake::WakeDelay;

fn seed() -> Report {
    let path = format!("{}/../../fuzz/seeds/report_load/report-stream-search.json", env!("CARGO_MANIFEST_DIR"));
    crate::report::read_report(|| std::fs::File::open(&path)).unwrap()
}

/// Counts with every additive field distinct, scaled by `k`.
fn counts(k: u64, first_ns: u64, last_ns: u64, jitter_ns: f64) -> StreamCounts {
    StreamCounts {
        received: 1_000 * k,
        bytes: 1_000 * k * 100,
        expected: 1_010 * k,
        duplicates: 2 * k,
        out_of_order: 3 * k,
        offset_sum: 7 * k,
        gaps: 4 * k,
        gap_datagrams: 10 * k,
        gap_ns: 50_000 * k,
        too_old: k,
        first_ns,
        last_ns,
        jitter_ns,
        delay: None,
    }
}

fn receiver(addr: &str, k: u64, send_ns: u64, jitter_ns: f64) -> ReceiverResult {
    let half = |at: u64| IntervalRow {
        at_ns: at,
        counts: counts(k, 0, 0, jitter_ns),
        loss_split: Some(LossSplit { missing: 10 * k, ..LossSplit::default() }),
    };
    ReceiverResult {
        addr: addr.into(),
        direction: StreamDirection::Forward,
        sent: 2_020 * k,
        // its two publishers' rows added
        total: counts(2 * k, 100 * k, 200 * k, jitter_ns),
        publishers: vec![counts(k, 100 * k, 200 * k, jitter_ns); 2],
        intervals: vec![half(1_000_000_000 + k), half(2_000_000_000 + k)],
        send_ns,
        recv_ns: 0,
        foreign: k,
        kernel: Some(Snmp::default()),
        loss_split: Some(LossSplit { missing: 20 * k, ..LossSplit::default() }),
        wake: None,
    }
}

/// One generator: `k` scales its counts, `send_ns` its sending time.
fn generator(k: u64, send_ns: u64) -> Report {
    let mut r = seed();
    r.config["find_max_rate"] = false.into();
    r.config["size"] = 100.into();
    r.config["json"] = format!("g{k}.json").into();
    r.config["log"] = format!("g{k}.tsv").into();
    let messages = 2_020 * k;
    let per_s = messages as f64 * 1e9 / send_ns as f64;
    r.results = Results::Stream(StreamResults {
        proto: Transport::Udp,
        direction: StreamDirection::Forward,
        size: 100,
        publishers: 2,
        rate_per_s: Some(1_000.0),
        sender: Some(SenderResult {
            messages,
            bytes: messages * 100,
            per_s,
            bits_per_s: per_s * 800.0,
            send_ns,
            slip_mean_ns: 10 * k,
            slip_max_ns: 1_000 / k,
            gso: k == 1,
            retransmits: None,
            sndbuf_errors: Some(k),
            qdisc_drops: None,
        }),
        receivers: vec![receiver("10.0.0.1:7878", k, send_ns, 5.0 * k as f64)],
        search: None,
        sweep: Vec::new(),
        warnings: vec!["buffers capped".into(), format!("only in {k}")],
        listen: None,
        generator: Some(GeneratorHealth {
            threads: 2,
            asked_per_s: Some(2_000.0),
            achieved_per_s: per_s,
            cpu_ns: 1_000 * k,
            cpu_share: 0.1,
            verdict: GeneratorVerdict::Kept,
            slip_seconds: Vec::new(),
            cpu_seconds: Vec::new(),
            wait_ns: None,
            behind: Vec::new(),
            schedule: None,
        }),
    });
    r
}

fn stream(r: &Report) -> &StreamResults {
    match &r.results {
        Results::Stream(s) => s,
        _ => panic!("a stream report"),
    }
}

fn merged(reports: &[(&str, &Report)]) -> Result<Report, String> {
    let inputs: Vec<Input<'_>> = reports.iter().map(|(name, report)| Input { name, report }).collect();
    merge(&inputs).map_err(|e| e.to_string())
}

/// Two generators (2,020 and 4,040 messages over 1 s and 4 s) against one serve: every
/// additive count is the sum, the rates are the sum of each one's rate over its own time.
#[test]
fn stream_generators_against_one_serve_add_up_field_by_field() {
    let (a, b) = (generator(1, 1_000_000_000), generator(2, 4_000_000_000));
    let m = merged(&[("a", &a), ("b", &b)]).unwrap();
    let (s, sa, sb) = (stream(&m), stream(&a), stream(&b));
    let (t, ta, tb) = (s.sender.unwrap(), sa.sender.unwrap(), sb.sender.unwrap());
    assert_eq!((t.messages, t.bytes), (2_020 + 4_040, (2_020 + 4_040) * 100));
    assert_eq!((t.per_s, t.bits_per_s), (ta.per_s + tb.per_s, ta.bits_per_s + tb.bits_per_s));
    // 2,020/s + 1,010/s = 3,030/s; 6,060 messages at 3,030/s: 2 s
    assert_eq!(t.per_s, 3_030.0);
    assert_eq!(t.send_ns, 2_000_000_000);
    // slip: the mean weighted by messages ((10 x 2020 + 20 x 4040) / 6060), the largest max
    assert_eq!((t.slip_mean_ns, t.slip_max_ns), (16, 1_000));
    assert!(t.gso);
    assert_eq!(s.receivers.len(), 1);
    let (r, ra, rb) = (&s.receivers[0], &sa.receivers[0], &sb.receivers[0]);
    let (c, ca, cb) = (r.total, ra.total, rb.total);
    assert_eq!(r.sent, ra.sent + rb.sent);
    assert_eq!(c.received, ca.received + cb.received);
    assert_eq!(c.bytes, ca.bytes + cb.bytes);
    assert_eq!(c.expected, ca.expected + cb.expected);
    assert_eq!(c.duplicates, ca.duplicates + cb.duplicates);
    assert_eq!(c.out_of_order, ca.out_of_order + cb.out_of_order);
    assert_eq!(c.offset_sum, ca.offset_sum + cb.offset_sum);
    assert_eq!((c.gaps, c.gap_datagrams, c.gap_ns), (ca.gaps + cb.gaps, 60, 300_000));
    assert_eq!(c.too_old, ca.too_old + cb.too_old);
    assert_eq!((c.first_ns, c.last_ns, c.jitter_ns), (100, 400, 10.0));
    // derived figures from the sums
    assert_eq!(c.missing(), (ca.expected + cb.expected) - (ca.received + cb.received));
    assert_eq!(r.loss(), (6_060.0 - 6_000.0) / 6_060.0);
    assert_eq!(c.avg_offset(), 42.0 / 18.0);
    // receiver rates: 2,000/s + 1,000/s over the time that gives 3,000/s
    assert_eq!(r.send_ns, 2_000_000_000);
    assert_eq!((r.per_s(), ra.per_s() + rb.per_s()), (3_000.0, 3_000.0));
    assert_eq!(r.bits_per_s(), ra.bits_per_s() + rb.bits_per_s());
    assert_eq!(r.foreign, 3);
    assert_eq!(r.kernel, None, "host-wide counters of a host both parts fed are left out");
    assert_eq!(r.loss_split, None, "and the split made from them");
    assert_eq!((t.sndbuf_errors, s.generator.as_ref()), (None, None), "host-wide, and one process's own");
    assert_eq!(r.publishers, [ra.publishers.clone(), rb.publishers.clone()].concat());
    assert_eq!(r.intervals.len(), 2);
    for (k, row) in r.intervals.iter().enumerate() {
        let mut want = ra.intervals[k].counts;
        want.add(&rb.intervals[k].counts);
        assert_eq!((row.at_ns, row.counts), (rb.intervals[k].at_ns, want));
        assert_eq!(row.counts.received, 3_000);
        assert_eq!(row.loss_split, None, "a row's split is made from the same host-wide counters");
    }
    assert_eq!(s.warnings, ["buffers capped", "only in 1", "only in 2"]);
    assert_eq!((s.proto.as_str(), s.size, s.publishers, s.rate_per_s), ("udp", 100, 2, Some(1_000.0)));
    assert!(m.config.get("json").is_none() && m.config.get("log").is_none());
    assert_eq!(m.config["merged_from"], serde_json::json!(["a", "b"]));
}

/// Receivers are matched by address: a serve only one part streamed to keeps its own rows
/// (and its kernel counters); a merge of one report is that report's results.
#[test]
fn receivers_match_by_address_and_a_merge_of_one_is_the_input() {
    let a = generator(1, 1_000_000_000);
    let alone = merged(&[("a", &a)]).unwrap();
    assert_eq!(stream(&alone), stream(&a));
    let mut b = generator(2, 4_000_000_000);
    if let Results::Stream(s) = &mut b.results {
        s.receivers.push(receiver("10.0.0.2:7878", 3, 4_000_000_000, 1.0));
    }
    let m = merged(&[("a", &a), ("b", &b)]).unwrap();
    let s = stream(&m);
    assert_eq!(s.receivers.iter().map(|r| r.addr.as_str()).collect::<Vec<_>>(), ["10.0.0.1:7878", "10.0.0.2:7878"]);
    assert_eq!(s.receivers[1], stream(&b).receivers[1]);
    // a part with fewer interval rows: the rows past its end are the others' alone
    let mut short = generator(2, 4_000_000_000);
    if let Results::Stream(s) = &mut short.results {
        s.receivers[0].intervals.truncate(1);
    }
    let m = merged(&[("a", &a), ("short", &short)]).unwrap();
    let rows = &stream(&m).receivers[0].intervals;
    let alone = stream(&a).receivers[0].intervals[1];
    assert_eq!((rows[1].at_ns, rows[1].counts), (alone.at_ns, alone.counts));
    // but its split came from counters the other part's traffic rose too
    assert_eq!(rows[1].loss_split, None);
    assert!(alone.loss_split.is_some());
}

#[test]
fn what_does_not_add_is_refused_in_one_line() {
    let a = generator(1, 1_000_000_000);
    let b = generator(2, 4_000_000_000);
    let e = |rs: &[(&str, &Report)]| merged(rs).unwrap_err();
    let with = |f: &dyn Fn(&mut StreamResults)| {
        let mut r = b.clone();
        if let Results::Stream(s) = &mut r.results {
            f(s);
        }
        r
    };
    let search = with(&|s| {
        s.search = Some(SearchResult {
            loss_target: 0.0,
            trials: Vec::new(),
            best_per_s: 0.0,
            best_bits_per_s: 0.0,
            ending: SearchEnding::Unrecorded,
            floor_per_s: 0.0,
        });
    });
    assert_eq!(
        e(&[("a", &a), ("s", &search)]),
        "s: a rate search (--find-max-rate) does not add (each generator searched alone): merge plain stream runs"
    );
    let sweep =
        with(&|s| s.sweep = vec![SweepRow { size: 64, per_s: 1.0, bits_per_s: 1.0, loss: 0.0, sent_per_s: None }]);
    assert!(e(&[("a", &a), ("w", &sweep)]).starts_with("w: a size sweep (--sizes) does not add"));
    let listen = with(&|s| s.listen = Some(ListenTotals::default()));
    assert!(e(&[("l", &listen)]).starts_with("l: listen reports do not add"));
    assert_eq!(e(&[("a", &a), ("t", &with(&|s| s.proto = Transport::Tcp))]), "t: proto tcp where a has udp");
    assert_eq!(
        e(&[("a", &a), ("r", &with(&|s| s.direction = StreamDirection::Reverse))]),
        "r: direction reverse where a has forward"
    );
    assert_eq!(e(&[("a", &a), ("z", &with(&|s| s.size = 64))]), "z: size 64 where a has 100");
    assert_eq!(e(&[("a", &a), ("a2", &a)]), "a and a2 are the same run: give each generator's report once");
    let old = with(&|s| s.receivers[0].send_ns = 0);
    assert_eq!(
        e(&[("a", &a), ("old", &old)]),
        "old: receiver 10.0.0.1:7878 has no sending time (written before it was recorded): run it again"
    );
    let mut other = b.clone();
    other.config["size"] = 64.into();
    assert_eq!(
        e(&[("a", &a), ("o", &other)]),
        "a and o are not parts of one scenario: config.size differs (100 vs 64)"
    );
    for m in [e(&[("a", &a), ("s", &search)]), e(&[("l", &listen)])] {
        assert!(!m.contains('\n'));
    }
}

/// Every additive field of `c` set to `v`.
fn fill(c: &mut StreamCounts, v: u64) {
    (c.received, c.bytes, c.expected, c.duplicates, c.out_of_order) = (v, v, v, v, v);
    (c.offset_sum, c.gaps, c.gap_datagrams, c.gap_ns, c.too_old) = (v, v, v, v, v);
}

/// Two generators' counts near `u64::MAX` (a file is not trusted): added saturating (the
/// plain sums panicked with "attempt to add with overflow" in debug builds and wrapped in
/// release); rates that add up to infinity are refused in one line.
#[test]
fn counts_near_the_top_saturate_and_rates_too_large_are_refused() {
    const BIG: u64 = u64::MAX - 1;
    let huge = |k: u64| {
        let mut r = generator(k, 1_000_000_000);
        if let Results::Stream(s) = &mut r.results {
            let t = s.sender.as_mut().unwrap();
            (t.messages, t.bytes, t.slip_mean_ns, t.retransmits) = (BIG, BIG, BIG, Some(BIG));
            let rx = &mut s.receivers[0];
            (rx.sent, rx.foreign) = (BIG, BIG);
            fill(&mut rx.total, BIG);
            for row in &mut rx.intervals {
                fill(&mut row.counts, BIG);
            }
        }
        r
    };
    let (mut a, mut b) = (huge(1), huge(2));
    let m = merged(&[("a", &a), ("b", &b)]).unwrap();
    let s = stream(&m);
    let max = u64::MAX;
    let t = s.sender.unwrap();
    assert_eq!((t.messages, t.bytes, t.slip_mean_ns, t.retransmits), (max, max, BIG, Some(max)));
    let r = &s.receivers[0];
    assert_eq!((r.sent, r.foreign), (max, max));
    let mut want = StreamCounts::default();
    fill(&mut want, max);
    for c in std::iter::once(&r.total).chain(r.intervals.iter().map(|row| &row.counts)) {
        let mut got = *c;
        (got.first_ns, got.last_ns, got.jitter_ns) = (0, 0, 0.0);
        assert_eq!(got, want);
    }
    for g in [&mut a, &mut b] {
        if let Results::Stream(s) = &mut g.results {
            s.sender.as_mut().unwrap().bits_per_s = f64::MAX;
        }
    }
    assert_eq!(
        merged(&[("a", &a), ("b", &b)]).unwrap_err(),
        "sender.bits_per_s: the parts add up to a number that is not finite (a report holds one too large)"
    );
}

/// A sender that sent without a sending time (a report written before it was recorded)
/// gives no rate to merge: refused. One that sent nothing needs none.
#[test]
fn a_sender_without_its_sending_time_is_refused_unless_it_sent_nothing() {
    let a = generator(1, 1_000_000_000);
    let with_sender = |messages: u64| {
        let mut r = generator(2, 4_000_000_000);
        if let Results::Stream(s) = &mut r.results {
            let t = s.sender.as_mut().unwrap();
            (t.messages, t.bytes, t.send_ns, t.per_s, t.bits_per_s) = (messages, messages * 100, 0, 0.0, 0.0);
        }
        r
    };
    assert_eq!(
        merged(&[("a", &a), ("old", &with_sender(4_040))]).unwrap_err(),
        "old: no sending time (written before it was recorded): run it again"
    );
    let m = merged(&[("a", &a), ("idle", &with_sender(0))]).unwrap();
    let t = stream(&m).sender.unwrap();
    assert_eq!((t.messages, t.per_s, t.send_ns), (2_020, 2_020.0, 1_000_000_000), "the one that sent");
}

/// Senders that counted messages but say they sent at no rate (a file is not trusted) give
/// no time that makes the summed rate: the merged sending time is the longest part's, not
/// a division by zero.
#[test]
fn senders_at_no_rate_keep_the_longest_sending_time() {
    let at_no_rate = |k: u64, send_ns: u64| {
        let mut r = generator(k, send_ns);
        if let Results::Stream(s) = &mut r.results {
            let t = s.sender.as_mut().unwrap();
            (t.per_s, t.bits_per_s) = (0.0, 0.0);
        }
        r
    };
    let m = merged(&[("a", &at_no_rate(1, 1_000_000_000)), ("b", &at_no_rate(2, 4_000_000_000))]).unwrap();
    let t = stream(&m).sender.unwrap();
    assert_eq!((t.messages, t.per_s, t.send_ns), (6_060, 0.0, 4_000_000_000));
}

/// A receiver that heard nothing needs no sending time (it has no rate): its parts merge,
/// into a row with nothing received.
#[test]
fn a_receiver_that_heard_nothing_merges_without_a_sending_time() {
    let a = generator(1, 1_000_000_000);
    let mut b = generator(2, 4_000_000_000);
    if let Results::Stream(s) = &mut b.results {
        s.receivers.push(receiver("10.0.0.2:7878", 0, 0, 0.0));
    }
    let m = merged(&[("a", &a), ("b", &b)]).unwrap();
    let silent = &stream(&m).receivers[1];
    assert_eq!((silent.addr.as_str(), silent.total.received, silent.send_ns), ("10.0.0.2:7878", 0, 0));
}

/// The sending host's drop counters are host-wide, like its SndbufErrors: a merge of one
/// keeps them, a merge of several (generators on one host count each other's) does not.
#[test]
fn the_sending_hosts_qdisc_drops_are_kept_only_from_a_merge_of_one() {
    let with_qdisc = |k: u64, send_ns: u64| {
        let mut r = generator(k, send_ns);
        if let Results::Stream(s) = &mut r.results {
            s.sender.as_mut().unwrap().qdisc_drops = Some(10 * k);
        }
        r
    };
    let (a, b) = (with_qdisc(1, 1_000_000_000), with_qdisc(2, 4_000_000_000));
    let t = stream(&merged(&[("a", &a)]).unwrap()).sender.unwrap();
    assert_eq!((t.sndbuf_errors, t.qdisc_drops), (Some(1), Some(10)));
    let t = stream(&merged(&[("a", &a), ("b", &b)]).unwrap()).sender.unwrap();
    assert_eq!((t.sndbuf_errors, t.qdisc_drops), (None, None));
}

/// A receiver's wake-up delay is one receiving thread's: kept from a merge of one, left
/// out when parts fed by different threads are merged.
#[test]
fn a_receivers_wake_delay_is_kept_only_from_a_merge_of_one() {
    let with_wake = |k: u64, send_ns: u64| {
        let mut r = generator(k, send_ns);
        if let Results::Stream(s) = &mut r.results {
            s.receivers[0].wake = Some(WakeDelay { stamped: 100 * k, p50_ns: 5_000, ..WakeDelay::default() });
        }
        r
    };
    let (a, b) = (with_wake(1, 1_000_000_000), with_wake(2, 4_000_000_000));
    let m = merged(&[("a", &a)]).unwrap();
    assert_eq!(stream(&m).receivers[0].wake, stream(&a).receivers[0].wake);
    assert!(stream(&m).receivers[0].wake.is_some());
    let m = merged(&[("a", &a), ("b", &b)]).unwrap();
    assert_eq!(stream(&m).receivers[0].wake, None);
}
