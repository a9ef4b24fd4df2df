#![expect(clippy::float_cmp, reason = "the rates and shares here are exact in f64 (small integers)")]

use super::*;

const S: u64 = 1_000_000_000;

fn counts(expected: u64, received: u64) -> StreamCounts {
    StreamCounts { expected, received, bytes: received * 100, ..StreamCounts::default() }
}

fn row(sent: u64, received: u64) -> ReceiverResult {
    ReceiverResult {
        addr: "10.0.0.2:7878".into(),
        direction: StreamDirection::Forward,
        sent,
        total: counts(sent, received),
        publishers: Vec::new(),
        intervals: Vec::new(),
        send_ns: 0,
        recv_ns: 0,
        foreign: 0,
        kernel: None,
        loss_split: None,
        wake: None,
    }
}

/// Rates are over the receiving time when there is one (TCP), else over the sending time
/// (UDP), else (old reports, listen) over the receiver's own first to last arrival.
#[test]
fn the_time_base_is_the_receiving_then_the_sending_time_then_the_arrivals() {
    let mut r = row(2_000, 1_000);
    (r.total.first_ns, r.total.last_ns) = (3 * S, 7 * S);
    assert_eq!((r.time_base_ns(), r.over_receive_time(), r.over_send_time()), (4 * S, false, false));
    assert_eq!((r.per_s(), r.bits_per_s()), (250.0, 250.0 * 800.0));
    r.send_ns = 2 * S;
    assert_eq!((r.time_base_ns(), r.over_receive_time(), r.over_send_time()), (2 * S, false, true));
    assert_eq!((r.per_s(), r.bits_per_s()), (500.0, 500.0 * 800.0));
    r.recv_ns = S;
    assert_eq!((r.time_base_ns(), r.over_receive_time(), r.over_send_time()), (S, true, false));
    assert_eq!(r.per_s(), 1_000.0);
    r.send_ns = 0;
    assert_eq!((r.time_base_ns(), r.over_receive_time(), r.over_send_time()), (S, true, false));
}

#[test]
fn loss_is_what_was_sent_and_did_not_arrive() {
    assert_eq!((row(2_000, 1_500).missing(), row(2_000, 1_500).loss()), (500, 0.25));
    assert_eq!((row(0, 0).missing(), row(0, 0).loss()), (0, 0.0), "nothing sent: no loss");
    assert_eq!((row(10, 12).missing(), row(10, 12).loss()), (0, 0.0), "duplicates do not make a gain");
}

#[test]
fn receive_buffer_overflows_are_read_from_the_kernel_counters() {
    let mut r = row(10, 10);
    assert_eq!(r.rcvbuf_errors(), None, "no counters");
    r.kernel = Some(Snmp::default());
    assert_eq!(r.rcvbuf_errors(), None, "not read");
    r.kernel.as_mut().unwrap().0.entry("Udp".into()).or_default().insert("RcvbufErrors".into(), 7);
    assert_eq!(r.rcvbuf_errors(), Some(7));
}

/// 20 of 100 datagrams missing, 10 in each of two rows. The receiving socket refused 3
/// packets (1 in the first row, 2 in the second), and its reads took 4 datagrams a run:
/// 12 datagrams, 4 and 8 a row, each within its row's missing. The runs were 2 to 6
/// datagrams, so the 3 packets were 6 to 18 datagrams: 12 is off by up to 6, shared
/// between the rows as their socket datagrams are (2 and 4).
#[test]
fn the_loss_split_counts_socket_drops_in_datagrams_and_its_rows_add_up() {
    let mut r = row(100, 80);
    r.intervals = [(S, counts(50, 40)), (2 * S, counts(50, 40))]
        .map(|(at_ns, counts)| IntervalRow { at_ns, counts, loss_split: None })
        .to_vec();
    let mut k = Snmp::default();
    let udp = k.0.entry("Udp".into()).or_default();
    udp.insert("InErrors".into(), 3);
    udp.insert("RcvbufErrors".into(), 3);
    r.kernel = Some(k);
    r.wake = Some(WakeDelay { stamped: 40, runs: 10, run_min: 2, run_max: 6, ..WakeDelay::default() });
    r.attribute(None, &[[None, Some(1), None], [None, Some(3), None]]);
    let whole = LossSplit { missing: 20, socket: 12, elsewhere: 8, uncertain: 6, ..LossSplit::default() };
    assert_eq!(r.loss_split, Some(whole));
    let rows: Vec<LossSplit> = r.intervals.iter().map(|row| row.loss_split.unwrap()).collect();
    assert_eq!(
        rows,
        [
            LossSplit { missing: 10, socket: 4, elsewhere: 6, uncertain: 2, ..LossSplit::default() },
            LossSplit { missing: 10, socket: 8, elsewhere: 2, uncertain: 4, ..LossSplit::default() },
        ]
    );
    assert_eq!(rows[0].plus(rows[1]), whole, "the rows add up to the run");
    // the sending host's drops come first
    r.attribute(Some(5), &[]);
    let split = r.loss_split.unwrap();
    assert_eq!((split.send_buffer, split.socket, split.elsewhere), (5, 12, 3));
    // without the receiver's counters there is no split, for the run or its rows
    r.kernel = None;
    r.attribute(Some(5), &[]);
    assert_eq!(r.loss_split, None);
    assert!(r.intervals.iter().all(|row| row.loss_split.is_none()));
}

/// A receiver that did not say how large its reads were (an older one): a refused packet
/// counts as one datagram, with nothing uncertain.
#[test]
fn without_the_reads_a_socket_drop_is_one_datagram() {
    let mut r = row(100, 80);
    let mut k = Snmp::default();
    k.0.entry("Udp".into()).or_default().insert("RcvbufErrors".into(), 3);
    r.kernel = Some(k);
    r.attribute(None, &[]);
    assert_eq!(r.loss_split, Some(LossSplit { missing: 20, socket: 3, elsewhere: 17, ..LossSplit::default() }));
}
