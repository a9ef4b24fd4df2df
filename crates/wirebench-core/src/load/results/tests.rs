use proptest::prelude::*;

use super::*;
use crate::load::delivery::Account;
use crate::load::record::Arrival;

fn mix() -> Mix {
    Mix::parse("cursor=3,save=1,quiet=1", &["save"]).unwrap()
}

fn shape<'a>(mix: &'a Mix, thresholds: &'a [Threshold]) -> Shape<'a> {
    Shape {
        url: "ws://h:1/r-0".into(),
        clients: 10,
        room_size: 5,
        rate_per_client: 2.0,
        arrivals: "fixed",
        mix,
        percentiles: &[50.0, 99.0],
        thresholds,
        link_up: None,
        link_down: None,
        end_ns: 10_000_000_000,
        ramp_ns: 2_000_000_000,
    }
}

fn built(rec: &Recording, thresholds: &[Threshold], d: &Account, r: &Account) -> LoadResults {
    let m = mix();
    build(&shape(&m, thresholds), rec, (d, r), Counts::default(), Vec::new(), 12_000_000_000, (1, 2), 3, false)
}

#[test]
fn a_type_with_nothing_delivered_has_no_values_and_fails_its_threshold() {
    let mut rec = Recording::new(3);
    for i in 0..100u64 {
        rec.on_send(0, 0, 4);
        rec.on_delivery(0, 1_000_000 + i * 1_000, None, Arrival::Expected);
    }
    rec.on_send(2, 0, 4);
    rec.on_send(1, 0, 1);
    rec.on_reply(1, 2_000_000, Arrival::Expected);
    let ts: Vec<Threshold> =
        ["quiet:p50<1s", "cursor:p50<1s", "save:max<3ms", "save:max<1ms"].iter().map(|t| t.parse().unwrap()).collect();
    let l = built(&rec, &ts, &Account::default(), &Account::default());
    let quiet = &l.types[2];
    assert_eq!((quiet.sent, quiet.expected, quiet.received, quiet.missing), (1, 4, 0, 4));
    assert_eq!(quiet.delay.summary.count, 0);
    let cursor = &l.types[0];
    assert_eq!((cursor.sent, cursor.expected, cursor.arrived, cursor.missing), (100, 400, 100, 300));
    let verdicts: Vec<bool> = l.thresholds.iter().map(|t| t.passed).collect();
    assert_eq!(verdicts, [false, true, true, false], "an empty type fails; a request type is judged on replies");
    assert_eq!(l.thresholds[0].value_ns, None);
    assert_eq!(l.overall.sent, 102);
    assert_eq!(l.received, 101, "100 deliveries and one reply");
    // (12 s elapsed, sends ended at 10 s, half the 2 s ramp): 9 s
    assert!((l.achieved_send_per_s - 102.0 / 9.0).abs() < 1e-9);
    assert!((l.process.per_event_ns - 3.0 / 203.0).abs() < 1e-12);
}

#[test]
fn an_echo_server_is_nothing_delivered() {
    let mut rec = Recording::new(3);
    for _ in 0..10 {
        rec.on_send(0, 0, 4);
        rec.on_reply(0, 50_000, Arrival::Unexpected);
    }
    let d = Account { expected: 40, missing: 40, late: 40, ..Account::default() };
    let l = built(&rec, &[], &d, &Account::default());
    let why = nothing_arrived(&l).unwrap();
    assert!(why.starts_with("nothing was delivered to other members (40 deliveries expected)"), "{why}");
    assert!(why.contains("10 messages came back to their own senders: an echo server?"), "{why}");
    // a server that relays but never answers requests
    let mut rec = Recording::new(3);
    rec.on_send(0, 0, 1);
    rec.on_delivery(0, 1_000, None, Arrival::Expected);
    let r = Account { expected: 3, missing: 3, late: 3, ..Account::default() };
    let d = Account { expected: 1, arrived: 1, ..Account::default() };
    let why = nothing_arrived(&built(&rec, &[], &d, &r)).unwrap();
    assert!(why.starts_with("no request was answered (3 requests sent)"), "{why}");
    let r = Account { expected: 3, arrived: 1, missing: 2, late: 2, ..Account::default() };
    assert_eq!(nothing_arrived(&built(&rec, &[], &d, &r)), None);
}

/// A run that expected no delivery and sent no request has nothing it failed to measure;
/// one whose deliveries all went missing with nothing echoed names no echo server.
#[test]
fn nothing_expected_is_not_nothing_arrived_and_no_echo_is_not_an_echo_server() {
    assert_eq!(nothing_arrived(&quiet_room()), None);
    let mut rec = Recording::new(3);
    rec.on_send(0, 0, 4);
    let d = Account { expected: 4, missing: 4, ..Account::default() };
    let why = nothing_arrived(&built(&rec, &[], &d, &Account::default())).unwrap();
    assert!(why.starts_with("nothing was delivered to other members (4 deliveries expected)"), "{why}");
    assert!(!why.contains("echo") && !why.contains("; "), "one reason, no echo: {why}");
}

#[test]
fn accounts_name_how_connections_ended() {
    let mut a = Account { expected: 10, arrived: 5, missing: 5, dropped: 1, late: 1, ..Account::default() };
    a.closed.insert(End::ServerClosed(1009), 2);
    a.closed.insert(End::Lost, 1);
    let l = account(&a);
    let names: Vec<&str> = l.closed.keys().map(String::as_str).collect();
    assert_eq!(names, ["connection lost (no close frame)", "server close 1009 (message too big)"]);
}

proptest! {
    /// Whatever was recorded: the overall row is the sum of the type rows (every count and
    /// the histogram), every row's expected is arrived plus missing, received counts the
    /// timed deliveries, and the run's received is deliveries plus replies.
    #[test]
    fn the_overall_row_is_the_sum_of_the_types(
        events in prop::collection::vec((0usize..3, 0u64..6, 0u8..4, 1_000u64..10_000_000), 0..300)
    ) {
        let mut rec = Recording::new(3);
        for &(t, fan, what, ns) in &events {
            match what {
                0 => rec.on_send(t, ns % 7, fan),
                1 => rec.on_delivery(t, ns, Some(ns + 5), Arrival::Expected),
                2 => rec.on_delivery(t, ns, None, Arrival::Unexpected),
                _ => rec.on_reply(t, ns, if fan % 2 == 0 { Arrival::Expected } else { Arrival::Unexpected }),
            }
        }
        let l = built(&rec, &[], &Account::default(), &Account::default());
        let sum = |f: fn(&LoadTypeResult) -> u64| l.types.iter().map(f).sum::<u64>();
        prop_assert_eq!(l.overall.sent, sum(|t| t.sent));
        prop_assert_eq!(l.overall.expected, sum(|t| t.expected));
        prop_assert_eq!(l.overall.received, sum(|t| t.received));
        prop_assert_eq!(l.overall.unexpected, sum(|t| t.unexpected));
        prop_assert_eq!(l.overall.arrived, sum(|t| t.arrived));
        prop_assert_eq!(l.overall.missing, sum(|t| t.missing));
        prop_assert_eq!(l.overall.delay.summary.count, sum(|t| t.delay.summary.count));
        for t in l.types.iter().chain([&l.overall]) {
            prop_assert_eq!(t.received, t.delay.summary.count);
            prop_assert_eq!(t.expected, t.arrived + t.missing);
        }
        let replies: u64 = l.types.iter().filter_map(|t| t.reply.as_ref()).map(|v| v.summary.count).sum();
        prop_assert_eq!(l.received, l.overall.received + replies);
        let series_sent: u64 = l.series.iter().map(|s| s.sent).sum();
        prop_assert_eq!(series_sent, l.sent, "the partial last second holds every send");
    }
}

#[test]
fn type_rows_show_their_share_in_percent() {
    let l = built(&Recording::new(3), &[], &Account::default(), &Account::default());
    let m = mix();
    for (i, t) in l.types.iter().enumerate() {
        assert!((t.share_pct - m.share(i) * 100.0).abs() < 1e-9, "{}: {}", t.name, t.share_pct);
    }
    assert!((l.types[0].share_pct - 60.0).abs() < 1e-9, "cursor is 3 of 5");
}

#[test]
fn the_partial_last_second_follows_the_series_only_when_something_happened() {
    let m = mix();
    let second =
        |at_s| LoadSecond { at_s, sent: 1, received: 0, delay_p50_ns: 0, delay_p99_ns: 0, delay_histogram: None };
    let run = |rec: &Recording| {
        let (d, r) = (Account::default(), Account::default());
        build(&shape(&m, &[]), rec, (&d, &r), Counts::default(), vec![second(3)], 12_000_000_000, (1, 2), 3, false)
    };
    let mut rec = Recording::new(3);
    assert_eq!(run(&rec).series.len(), 1, "nothing sent or received in it: no row");
    rec.on_send(0, 0, 4);
    let l = run(&rec);
    let last = l.series.last().unwrap();
    assert_eq!((l.series.len(), last.at_s, last.sent, last.received), (2, 4, 1, 0));
}

#[test]
fn the_requested_rate_and_the_mean_slip_are_worked_out_from_the_run() {
    let mut rec = Recording::new(3);
    rec.on_send(0, 100, 4);
    rec.on_send(1, 300, 1);
    let l = built(&rec, &[], &Account::default(), &Account::default());
    // 10 clients at 2 events/s each; slips 100 and 300 ns over 2 sends
    assert!((l.requested_send_per_s - 20.0).abs() < 1e-9, "{}", l.requested_send_per_s);
    assert_eq!((l.slip_mean_ns, l.slip_max_ns), (200, 300));
}

#[test]
fn the_overall_row_is_a_request_row_when_the_mix_has_requests_or_replies_came() {
    let run = |m: &Mix, rec: &Recording| {
        let (d, r) = (Account::default(), Account::default());
        build(&shape(m, &[]), rec, (&d, &r), Counts::default(), Vec::new(), 12_000_000_000, (1, 2), 3, false)
    };
    assert!(run(&mix(), &Recording::new(3)).overall.request, "save is a request type");
    let relayed = Mix::parse("a=1,b=1", &[]).unwrap();
    let mut rec = Recording::new(2);
    assert!(!run(&relayed, &rec).overall.request);
    rec.on_reply(0, 50_000, Arrival::Unexpected);
    assert!(run(&relayed, &rec).overall.request, "an echo came back");
}

#[test]
fn errors_list_only_the_kinds_that_happened() {
    let mut rec = Recording::new(3);
    rec.error(ErrorKind::Refused);
    rec.error(ErrorKind::Refused);
    let l = built(&rec, &[], &Account::default(), &Account::default());
    assert_eq!(l.errors, BTreeMap::from([(ErrorKind::Refused.name().to_owned(), 2)]));
}
