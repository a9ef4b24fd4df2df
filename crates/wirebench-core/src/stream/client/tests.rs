use std::cell::Cell;

use super::*;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn counts(received: u64) -> StreamCounts {
    StreamCounts { received, expected: received, bytes: received * 200, ..StreamCounts::default() }
}

fn interval(received: u64) -> Control {
    Control::Interval { publishers: vec![PublisherCounts { publisher: 0, counts: counts(received) }], kernel: None }
}

fn result(received: u64) -> Control {
    Control::Result {
        received: vec![PublisherCounts { publisher: 0, counts: counts(received) }],
        sent: Vec::new(),
        send_ns: 0,
        foreign: 0,
        kernel: None,
        wake: None,
    }
}

fn two(sends: bool) -> ClientSession {
    ClientSession::new(vec!["a:7878".into(), "b:7878".into()], sends, 2 * S, S)
}

/// A serve that sends a row every millisecond of a 2 s run: the rows the run can have are
/// kept (its two and 64 of slack), the rest ignored and said, and the host's counters are
/// read only for the rows kept.
#[test]
fn a_serve_cannot_grow_its_rows_past_the_run() {
    let mut s = two(true);
    let reads = Cell::new(0);
    let mut kept = 0;
    for k in 1..=1_000 {
        let drops = || {
            reads.set(reads.get() + 1);
            Some(0)
        };
        if s.handle(0, k * MS, interval(k), drops) == Heard::Row(0) {
            kept += 1;
        }
    }
    assert_eq!((kept, s.snaps[0].len(), reads.get(), s.reads[0].len()), (66, 66, 66, 66));
    assert_eq!(s.ignored_rows, 934);
    assert_eq!(s.snaps[0][65], (66 * MS, counts(66)), "the first ones, at their times");
    assert_eq!(
        s.ignored_warning().as_deref(),
        Some("serve sent 934 interval rows beyond the 66 a run of this length can have: ignored")
    );
    assert!(s.snaps[1].is_empty() && two(true).ignored_warning().is_none());
}

/// A result while this side still sends: serve ended the session (it is shutting down),
/// and the run stops for every serve. With nothing sent from here a result is the end.
#[test]
fn a_result_while_this_side_sends_ends_the_run() {
    let mut s = two(true);
    assert_eq!(s.handle(1, 700 * MS, result(10), || None), Heard::Stop);
    assert_eq!(s.peer_lost.as_deref(), Some("b:7878 ended the session early"));
    assert_eq!(s.results[1].as_ref().map(|r| (r.at_ns, r.received.clone())), Some((Some(700 * MS), vec![counts(10)])));
    let mut s = two(false);
    assert_eq!(s.handle(1, 2_100 * MS, result(10), || None), Heard::Nothing);
    assert_eq!((s.peer_lost.as_ref(), s.owed()), (None, vec![0]));
    assert!(!s.flow_done(2_200 * MS, false, false), "one result owed");
    s.handle(0, 2_300 * MS, result(12), || None);
    assert!(s.flow_done(2_300 * MS, false, false) && s.owed().is_empty());
}

#[test]
fn an_error_from_a_serve_ends_the_run() {
    let mut s = two(false);
    let m = Control::Error { message: "control connection lost: reset".into() };
    assert_eq!(s.handle(0, S, m, || None), Heard::Stop);
    assert_eq!(s.peer_lost.as_deref(), Some("a:7878: control connection lost: reset"));
    assert_eq!(s.handle(0, S, Control::Error { message: "x".into() }, || None), Heard::Stop, "a second says so too");
    assert_eq!(s.handle(5, S, result(1), || None), Heard::Nothing, "no such serve");
}

/// With senders here the flow is over when they are; without, when every result is in,
/// the run is stopped, or the results are five seconds past the run's end.
#[test]
fn a_run_with_nothing_to_send_waits_for_its_results_until_a_deadline() {
    let s = two(true);
    assert!(!s.flow_done(100 * S, true, true), "senders still at it");
    assert!(s.flow_done(0, false, false));
    let s = two(false);
    assert!(!s.flow_done(2 * S + REVERSE_WAIT_NS, false, false));
    assert!(s.flow_done(2 * S + REVERSE_WAIT_NS + 1, false, false));
    assert!(s.flow_done(S, false, true), "stopped");
}

/// This host's receivers take a snapshot once an interval; after a stall the loop catches
/// up one interval per turn, each at its own time.
#[test]
fn local_snapshots_come_once_an_interval() {
    let mut s = two(false);
    let due: Vec<bool> = [500, 999, 1_000, 1_000, 2_500, 5_200, 5_200, 5_200, 5_200, 5_300]
        .into_iter()
        .map(|ms| s.local_due(ms * MS))
        .collect();
    assert_eq!(due, [false, false, true, false, true, true, true, true, false, false]);
}

#[test]
fn the_part_after_the_last_report_is_a_row_to_the_end_of_sending() {
    let mut snaps = vec![(1_058 * MS, counts(21_081))];
    close_rows(&mut snaps, 2_000 * MS, counts(40_000));
    assert_eq!(snaps, [(1_058 * MS, counts(21_081)), (2_000 * MS, counts(40_000))]);
    // nothing after the last report: no row
    close_rows(&mut snaps, 2_100 * MS, counts(40_000));
    assert_eq!(snaps.len(), 2);
    // no report at all: one row, the whole run
    let mut snaps = Vec::new();
    close_rows(&mut snaps, 2_000 * MS, counts(7));
    assert_eq!(snaps, [(2_000 * MS, counts(7))]);
}

/// Seen with two serves (docs/modes/stream.md): the second serve's last report came at
/// 2.025 s, after the sending ended, with 246 messages still to count; they became a row
/// ending at 2.025 s + 1 ns, at 246 billion messages a second.
#[test]
fn what_came_after_a_report_past_the_end_of_sending_joins_that_row() {
    let mut snaps = vec![(1_058 * MS, counts(21_081)), (2_025 * MS, counts(39_510))];
    close_rows(&mut snaps, 1_988 * MS, counts(39_756));
    assert_eq!(snaps, [(1_058 * MS, counts(21_081)), (2_025 * MS, counts(39_756))]);
    let rows = intervals(&snaps);
    assert_eq!(rows.iter().map(|r| r.counts.received).sum::<u64>(), 39_756, "the rows add up");
    let last = rows[1].counts.per_sec(rows[1].at_ns - rows[0].at_ns);
    assert!((last - 18_675.0 / 0.967).abs() < 1.0, "the last row's rate: {last}");
    // a report exactly at the end of sending, the same
    let mut snaps = vec![(2_000 * MS, counts(10))];
    close_rows(&mut snaps, 2_000 * MS, counts(12));
    assert_eq!(snaps, [(2_000 * MS, counts(12))]);
}

#[test]
fn the_rows_cap_follows_the_run_and_stays_bounded() {
    assert_eq!(rows_cap(10 * S, S), 74);
    assert_eq!(rows_cap(10 * S, 0), 1 << 20, "no interval: the bound");
    assert_eq!(rows_cap(u64::MAX, 1), 1 << 20);
}

/// Serves are named by their targets as given; a number past them names none.
#[test]
fn a_serve_is_named_by_its_target() {
    let s = two(true);
    assert_eq!((s.name(0), s.name(1), s.name(2)), ("a:7878", "b:7878", ""));
}

/// Once this side's senders are done, a serve's result is its answer, not an early end:
/// the run goes on until every result is in.
#[test]
fn after_the_senders_finish_a_result_is_the_answer() {
    let mut s = two(true);
    s.finished();
    assert_eq!(s.handle(0, 2_100 * MS, result(10), || None), Heard::Nothing);
    assert_eq!((s.peer_lost.as_ref(), s.owed()), (None, vec![1]));
    assert!(!s.flow_done(2_100 * MS, false, false), "one result owed");
    s.handle(1, 2_200 * MS, result(12), || None);
    assert!(s.flow_done(2_200 * MS, false, false));
}
