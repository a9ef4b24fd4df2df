//! A stream's missing datagrams split by the kernel counters of both ends: the sending
//! host's drops after the send (`SndbufErrors` and its egress qdiscs' drops, the larger:
//! [`sender_drops`]; sent by the application, dropped before the wire), the receiving
//! host's socket refusals (`Udp InErrors`, of which `RcvbufErrors` are full receive
//! buffers) and its drops below the sockets (the receiving interface's `rx_dropped`,
//! `rx_errors`, `rx_missed_errors` and the softnet backlog); the rest happened elsewhere on
//! the path. Pure: the hosts read their counters and carry them as [`Snmp`] differences.
//!
//! A receiver carries its below-socket counters in two more tables of its `/proc/net/snmp`
//! difference, [`SOFTNET`] and [`NIC`] (so a stream result's `kernel` field keeps one shape
//! on the wire and in reports; an older serve just lacks them).
//!
//! Counting: `RcvbufErrors` and `InErrors` count dropped *packets*. A sender that batches
//! with UDP GSO and a receiver that reads with GRO meet whole GSO runs (up to 64 datagrams)
//! on loopback and veth, and one dropped run is one count. So the socket's share is its
//! count times the mean run the receiver read ([`RunSizes`]), and the split says how far
//! that may be off (`LossSplit::uncertain`: the runs read ranged from this to that size).

use super::{Delta, LossSplit};
use crate::snmp::Snmp;
use crate::stream::wake::WakeDelay;

/// Table of the softnet backlog's counters: `Dropped`, `TimeSqueeze` (summed over CPUs).
pub const SOFTNET: &str = "Softnet";
/// Table of the receiving interfaces' counters: `RxDropped`, `RxErrors`, `RxMissedErrors`.
pub const NIC: &str = "Nic";
/// Table of the egress qdiscs' counters on the interfaces that carry the stream:
/// `Dropped` (the root qdiscs' drops, what `tc -s qdisc` prints; [`super::qdisc`]).
pub const QDISC: &str = "Qdisc";

/// Adds the egress qdiscs' drops (`before`, `after`: the root qdiscs' drop counts, summed
/// over the interfaces) to `kernel` as the [`QDISC`] table, when read both times.
pub fn add_qdisc_table(kernel: &mut Snmp, before: Option<u64>, after: Option<u64>) {
    if let (Some(a), Some(b)) = (before, after) {
        kernel.0.entry(QDISC.to_owned()).or_default().insert("Dropped".into(), to_i64(b.saturating_sub(a)));
    }
}

/// What a sending host's counters say it dropped after the application sent: its `Udp
/// SndbufErrors` (a send the kernel refused with `ENOBUFS`, a full qdisc among the causes:
/// one count per send, a GSO batch whole) and its egress qdiscs' drops (per packet, a GSO
/// batch the qdisc split and dropped in part included, which no socket counter sees). The
/// two overlap (a packet the qdisc refused whole counts in both), so the host's share is
/// the larger: a lower bound, never a double count. `None` when neither was read.
pub fn sender_drops(k: &Snmp) -> Option<u64> {
    let sndbuf = count(k, "Udp", "SndbufErrors");
    let qdisc = count(k, QDISC, "Dropped");
    match (sndbuf, qdisc) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0))),
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Adds the softnet and receiving-interface parts of `d` to `kernel` as the [`SOFTNET`] and
/// [`NIC`] tables (each only when it was read both times; interfaces summed).
pub fn add_below_socket_tables(kernel: &mut Snmp, d: &Delta) {
    if let Some(s) = d.softnet {
        let t = kernel.0.entry(SOFTNET.to_owned()).or_default();
        t.insert("Dropped".into(), to_i64(s.dropped));
        t.insert("TimeSqueeze".into(), to_i64(s.time_squeeze));
    }
    if !d.interfaces.is_empty() {
        let sum = |f: fn(&super::Iface) -> u64| to_i64(d.interfaces.iter().map(f).sum());
        let t = kernel.0.entry(NIC.to_owned()).or_default();
        t.insert("RxDropped".into(), sum(|i| i.rx_dropped));
        t.insert("RxErrors".into(), sum(|i| i.rx_errors));
        t.insert("RxMissedErrors".into(), sum(|i| i.rx_missed_errors));
    }
}

/// A counter of a difference; a wrapped (negative) difference reads as 0.
fn count(k: &Snmp, table: &str, field: &str) -> Option<u64> {
    k.get(table, field).map(|v| u64::try_from(v).unwrap_or(0))
}

/// What a receiving host's counters say about drops there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiveDrops {
    /// `Udp InErrors`: datagrams a socket refused (full buffer, memory, checksum).
    pub socket: u64,
    /// `Udp RcvbufErrors`: of those, refused for a full receive buffer.
    pub rcvbuf: u64,
    /// Interface drops and errors plus softnet backlog drops; `None` when the receiver did
    /// not report them (an older serve).
    pub nic: Option<u64>,
}

impl ReceiveDrops {
    /// From a receiver's counter difference; `None` without its `Udp` table.
    pub fn of(k: &Snmp) -> Option<Self> {
        let rcvbuf = count(k, "Udp", "RcvbufErrors")?;
        // InErrors includes RcvbufErrors; a kernel without it: the buffer drops alone.
        let socket = count(k, "Udp", "InErrors").unwrap_or(rcvbuf).max(rcvbuf);
        let nic_parts = [
            count(k, NIC, "RxDropped"),
            count(k, NIC, "RxErrors"),
            count(k, NIC, "RxMissedErrors"),
            count(k, SOFTNET, "Dropped"),
        ];
        let nic = nic_parts
            .iter()
            .any(Option::is_some)
            .then(|| nic_parts.iter().flatten().fold(0u64, |a, &b| a.saturating_add(b)));
        Some(Self { socket, rcvbuf, nic })
    }
}

impl LossSplit {
    /// Splits `missing` in order: the send buffer's, the socket's, the NIC's drops, each
    /// capped by what is still unexplained; the rest is `elsewhere`. What the counters
    /// rose beyond `missing` (other traffic on a host, counters being host-wide) is
    /// `excess`, so the parts always add up to `missing`.
    pub fn of(missing: u64, send_buffer: u64, socket: u64, nic: u64) -> Self {
        let mut left = missing;
        let mut take = |n: u64| {
            let t = n.min(left);
            left -= t;
            t
        };
        let (s, k, n) = (take(send_buffer), take(socket), take(nic));
        // Counters come from the far end: saturate rather than wrap or panic on absurd ones.
        let excess = (send_buffer - s).saturating_add(socket - k).saturating_add(nic - n);
        Self { missing, send_buffer: s, socket: k, nic: n, elsewhere: left, excess, uncertain: 0 }
    }

    /// Sets [`Self::uncertain`] from the range the socket's drops could span, datagrams
    /// (`RunSizes::range`): how far the socket's share, capped as [`Self::of`] caps it,
    /// could move within it.
    #[must_use]
    pub fn with_socket_range(mut self, (lo, hi): (u64, u64)) -> Self {
        let room = self.missing - self.send_buffer;
        let (lo, hi) = (lo.min(room), hi.min(room));
        self.uncertain = self.socket.saturating_sub(lo).max(hi.saturating_sub(self.socket));
        self
    }
}

/// How many datagrams a receiving socket's drop counts stand for. A socket counts a packet
/// it refuses once (`InErrors`, `RcvbufErrors`), and a stream's packet can be a GRO run of
/// up to 64 datagrams: a GSO batch that crossed loopback or a veth whole, or datagrams the
/// receiving interface coalesced. The receiver's reads say how large the runs were
/// (`WakeDelay::runs`): a count stands for the mean run read, and at least the smallest,
/// at most the largest. Where every run read had one size (a loopback stream of full GSO
/// batches) the count is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSizes {
    /// Runs read.
    pub runs: u64,
    /// Datagrams in them.
    pub datagrams: u64,
    /// Fewest datagrams in one.
    pub min: u64,
    /// Most.
    pub max: u64,
}

impl RunSizes {
    /// From a receiver's reads; `None` when it read nothing or did not say (an older one).
    pub fn of(w: &WakeDelay) -> Option<Self> {
        let datagrams = w.stamped.saturating_add(w.unstamped);
        (w.runs > 0 && w.run_min > 0 && datagrams > 0).then_some(Self {
            runs: w.runs,
            datagrams,
            min: w.run_min,
            max: w.run_max.max(w.run_min),
        })
    }

    /// `packets` counted by a socket, in datagrams: at the mean run read, rounded.
    pub fn datagrams(&self, packets: u64) -> u64 {
        let d = (u128::from(packets) * u128::from(self.datagrams) + u128::from(self.runs) / 2) / u128::from(self.runs);
        u64::try_from(d).unwrap_or(u64::MAX)
    }

    /// The fewest and most datagrams `packets` can be.
    pub const fn range(&self, packets: u64) -> (u64, u64) {
        (packets.saturating_mul(self.min), packets.saturating_mul(self.max))
    }

    /// The mean run read, datagrams.
    #[expect(clippy::cast_precision_loss, reason = "a display value")]
    pub fn mean(&self) -> f64 {
        self.datagrams as f64 / self.runs as f64
    }

    /// Runs of more than one datagram were read: a count is not a datagram.
    pub const fn batched(&self) -> bool {
        self.max > 1
    }
}

/// A stream receiver's missing datagrams split by the sending host's `SndbufErrors` (if
/// known) and the receiving host's counters; `None` when the receiver sent no counters.
pub fn split_stream(missing: u64, sender_sndbuf: Option<u64>, receiver: &Snmp) -> Option<LossSplit> {
    let [s, k, n] = whole(sender_sndbuf, receiver)?;
    Some(LossSplit::of(missing, s, k, n))
}

/// One row's counter reading ([`super::split_rows`]): the sending host's `SndbufErrors` and
/// the receiving host's counters, each cumulative since the run began (`None`: not read).
pub fn reading(sender_sndbuf: Option<u64>, receiver: Option<&Snmp>) -> super::Reading {
    let r = receiver.and_then(ReceiveDrops::of);
    [sender_sndbuf, r.map(|r| r.socket), r.and_then(|r| r.nic)]
}

/// The whole run's counters as [`split_stream`] takes them; `None` without the receiver's.
pub fn whole(sender_sndbuf: Option<u64>, receiver: &Snmp) -> Option<[u64; 3]> {
    let r = ReceiveDrops::of(receiver)?;
    Some([sender_sndbuf.unwrap_or(0), r.socket, r.nic.unwrap_or(0)])
}

#[cfg(test)]
mod tests {
    use super::super::{Iface, Snapshot, Softnet};
    use super::*;

    fn kernel(in_errors: i64, rcvbuf: i64) -> Snmp {
        let mut k = Snmp::default();
        let t = k.0.entry("Udp".into()).or_default();
        t.insert("InErrors".into(), in_errors);
        t.insert("RcvbufErrors".into(), rcvbuf);
        k
    }

    /// The sending host's share: SndbufErrors and the qdisc's drops overlap, so the larger;
    /// either alone when only it was read; nothing when neither was.
    #[test]
    fn a_senders_drops_are_the_larger_of_sndbuf_errors_and_its_qdiscs() {
        let mut k = Snmp::default();
        assert_eq!(sender_drops(&k), None);
        k.0.entry("Udp".into()).or_default().insert("SndbufErrors".into(), 62);
        assert_eq!(sender_drops(&k), Some(62));
        add_qdisc_table(&mut k, Some(100), Some(100 + 6_876));
        assert_eq!(k.get(QDISC, "Dropped"), Some(6_876));
        assert_eq!(sender_drops(&k), Some(6_876));
        add_qdisc_table(&mut k, Some(5), None);
        assert_eq!(k.get(QDISC, "Dropped"), Some(6_876), "read once: no table change");
        let mut q = Snmp::default();
        add_qdisc_table(&mut q, Some(9), Some(3));
        assert_eq!(sender_drops(&q), Some(0), "a counter that went back (a new qdisc) is 0");
    }

    #[test]
    fn absurd_counters_from_a_far_end_saturate() {
        let s = LossSplit::of(5, u64::MAX, u64::MAX, u64::MAX);
        assert_eq!((s.send_buffer, s.socket, s.nic, s.elsewhere, s.excess), (5, 0, 0, 0, u64::MAX));
        let mut k = kernel(i64::MAX, i64::MAX);
        let nic = k.0.entry(NIC.into()).or_default();
        nic.insert("RxDropped".into(), i64::MAX);
        nic.insert("RxErrors".into(), i64::MAX);
        nic.insert("RxMissedErrors".into(), i64::MAX);
        assert_eq!(ReceiveDrops::of(&k).unwrap().nic, Some(u64::MAX));
    }

    #[test]
    fn the_issues_example_splits_exactly() {
        // of 12,345 missing, 12,001 dropped by the socket buffers, 0 by the NIC, 344 elsewhere
        let mut k = kernel(12_001, 12_001);
        let d =
            Snapshot { softnet: Some(Softnet::default()), interfaces: vec![Iface::default()], ..Snapshot::default() }
                .delta(&Snapshot {
                    softnet: Some(Softnet::default()),
                    interfaces: vec![Iface::default()],
                    ..Snapshot::default()
                });
        add_below_socket_tables(&mut k, &d);
        let s = split_stream(12_345, Some(0), &k).unwrap();
        assert_eq!(
            s,
            LossSplit {
                missing: 12_345,
                send_buffer: 0,
                socket: 12_001,
                nic: 0,
                elsewhere: 344,
                ..LossSplit::default()
            }
        );
    }

    #[test]
    fn the_sender_first_then_socket_then_nic_each_capped() {
        let mut k = kernel(30, 25);
        let d = Snapshot {
            softnet: Some(Softnet { dropped: 1, time_squeeze: 0 }),
            interfaces: vec![Iface { name: "eth0".into(), ..Iface::default() }],
            ..Snapshot::default()
        }
        .delta(&Snapshot {
            softnet: Some(Softnet { dropped: 3, time_squeeze: 9 }),
            interfaces: vec![Iface { name: "eth0".into(), rx_dropped: 4, rx_errors: 1, ..Iface::default() }],
            ..Snapshot::default()
        });
        add_below_socket_tables(&mut k, &d);
        assert_eq!(k.get(SOFTNET, "Dropped"), Some(2));
        assert_eq!(k.get(SOFTNET, "TimeSqueeze"), Some(9));
        assert_eq!(k.get(NIC, "RxDropped"), Some(4));
        let r = ReceiveDrops::of(&k).unwrap();
        assert_eq!(r, ReceiveDrops { socket: 30, rcvbuf: 25, nic: Some(7) });
        // enough missing for all: 5 + 30 + 7, 58 elsewhere
        assert_eq!(split_stream(100, Some(5), &k).unwrap(), LossSplit::of(100, 5, 30, 7));
        let s = LossSplit::of(100, 5, 30, 7);
        assert_eq!((s.send_buffer, s.socket, s.nic, s.elsewhere, s.excess), (5, 30, 7, 58, 0));
        // counters above the missing count (host-wide): capped in order, the rest is excess
        let s = split_stream(32, Some(5), &k).unwrap();
        assert_eq!((s.send_buffer, s.socket, s.nic, s.elsewhere, s.excess), (5, 27, 0, 0, 10));
        let s = split_stream(3, Some(5), &k).unwrap();
        assert_eq!((s.send_buffer, s.socket, s.nic, s.elsewhere, s.excess), (3, 0, 0, 0, 39));
        // nothing missing: everything the counters saw is excess
        assert_eq!(split_stream(0, None, &k).unwrap().excess, 37);
    }

    #[test]
    fn what_a_receiver_did_not_report() {
        // an older serve: Udp only, no NIC tables
        let r = ReceiveDrops::of(&kernel(4, 4)).unwrap();
        assert_eq!(r.nic, None);
        assert_eq!(split_stream(10, None, &kernel(4, 4)).unwrap().elsewhere, 6);
        // no Udp table (a TCP run's counters): no split
        assert!(split_stream(10, None, &Snmp::default()).is_none());
        // InErrors missing: the buffer drops alone; a wrapped difference reads as 0
        let mut k = Snmp::default();
        k.0.entry("Udp".into()).or_default().insert("RcvbufErrors".into(), 3);
        assert_eq!(ReceiveDrops::of(&k).unwrap().socket, 3);
        assert_eq!(ReceiveDrops::of(&kernel(-5, -5)).unwrap(), ReceiveDrops { socket: 0, rcvbuf: 0, nic: None });
    }

    fn runs(datagrams: u64, runs: u64, min: u64, max: u64) -> WakeDelay {
        WakeDelay { stamped: datagrams, runs, run_min: min, run_max: max, ..WakeDelay::default() }
    }

    /// A loopback stream of full GSO batches: every run read was 44 datagrams, so 35,912
    /// refusals are 1,580,128 datagrams exactly, and nothing is left elsewhere.
    #[test]
    fn socket_counts_of_whole_runs_are_datagrams_exactly() {
        let z = RunSizes::of(&runs(1_309_000, 29_750, 44, 44)).unwrap();
        assert_eq!(z.datagrams(35_912), 1_580_128);
        assert_eq!(z.range(35_912), (1_580_128, 1_580_128));
        let s = LossSplit::of(1_580_128, 0, z.datagrams(35_912), 0).with_socket_range(z.range(35_912));
        assert_eq!((s.socket, s.elsewhere, s.uncertain, s.excess), (1_580_128, 0, 0, 0));
    }

    /// Runs of 36 to 44 datagrams (mean 43.9): the share is the mean's, and it may be off
    /// by as much as the count times the spread on either side, capped by what is missing.
    #[test]
    fn runs_of_several_sizes_make_the_share_uncertain_by_their_spread() {
        // 681 runs of 44 and one of 36: 30,000 datagrams
        let z = RunSizes::of(&runs(30_000, 682, 36, 44)).unwrap();
        assert!((z.mean() - 43.988).abs() < 1e-3 && z.batched());
        assert_eq!(z.datagrams(100), 4_399);
        assert_eq!(z.range(100), (3_600, 4_400));
        let s = LossSplit::of(4_400, 0, 4_399, 0).with_socket_range(z.range(100));
        assert_eq!((s.socket, s.elsewhere, s.uncertain), (4_399, 1, 799), "the share could be 3,600");
        // more missing than the largest runs explain: the rest is elsewhere, by up to the spread
        let s = LossSplit::of(10_000, 0, 4_399, 0).with_socket_range(z.range(100));
        assert_eq!((s.socket, s.elsewhere, s.uncertain), (4_399, 5_601, 799));
        // the sender's share first: the socket's room is what is left
        let s = LossSplit::of(4_000, 1_000, 4_399, 0).with_socket_range(z.range(100));
        assert_eq!((s.send_buffer, s.socket, s.uncertain), (1_000, 3_000, 0), "the cap: any size fills it");
    }

    #[test]
    fn no_runs_no_sizes() {
        assert_eq!(RunSizes::of(&WakeDelay::default()), None, "an older receiver");
        assert_eq!(RunSizes::of(&runs(0, 0, 0, 0)), None, "nothing read");
        let one = RunSizes::of(&runs(500, 500, 1, 1)).unwrap();
        assert!(!one.batched());
        assert_eq!((one.datagrams(7), one.range(7)), (7, (7, 7)));
        let huge = RunSizes::of(&runs(u64::MAX, 1, 1, 64)).unwrap();
        assert_eq!(huge.datagrams(u64::MAX), u64::MAX, "saturates");
        assert_eq!(huge.range(u64::MAX), (u64::MAX, u64::MAX));
    }

    /// Each condition alone keeps the sizes unknown: no runs, no smallest run, no datagrams.
    /// Datagrams read without a timestamp count too, and a largest run below the smallest
    /// (an older receiver's) reads as the smallest.
    #[test]
    fn run_sizes_need_runs_a_smallest_run_and_datagrams() {
        assert_eq!(RunSizes::of(&runs(100, 0, 1, 10)), None, "no runs");
        assert_eq!(RunSizes::of(&runs(100, 10, 0, 20)), None, "no smallest run");
        assert_eq!(RunSizes::of(&runs(0, 10, 1, 1)), None, "no datagrams");
        let w = WakeDelay { stamped: 60, unstamped: 40, runs: 10, run_min: 8, run_max: 3, ..WakeDelay::default() };
        assert_eq!(RunSizes::of(&w), Some(RunSizes { runs: 10, datagrams: 100, min: 8, max: 8 }));
        let unstamped = WakeDelay { unstamped: 40, runs: 4, run_min: 10, run_max: 10, ..WakeDelay::default() };
        assert_eq!(RunSizes::of(&unstamped).map(|z| z.datagrams), Some(40));
        assert!(RunSizes::of(&runs(20, 10, 2, 2)).unwrap().batched(), "runs of two");
    }

    /// A row's reading: the sender's count as given, the receiver's socket refusals and
    /// below-socket drops from its counters (each `None` where not read).
    #[test]
    fn a_rows_reading_takes_each_hosts_counters() {
        let mut k = kernel(30, 25);
        let t = k.0.entry(NIC.into()).or_default();
        t.insert("RxDropped".into(), 4);
        t.insert("RxErrors".into(), 1);
        k.0.entry(SOFTNET.into()).or_default().insert("Dropped".into(), 2);
        assert_eq!(reading(Some(5), Some(&k)), [Some(5), Some(30), Some(7)]);
        assert_eq!(reading(None, Some(&kernel(4, 4))), [None, Some(4), None], "an older serve: no NIC tables");
        assert_eq!(reading(Some(5), None), [Some(5), None, None]);
        assert_eq!(reading(None, Some(&Snmp::default())), [None, None, None], "no Udp table");
        assert_eq!(whole(None, &k), Some([0, 30, 7]));
        assert_eq!(whole(Some(9), &kernel(4, 4)), Some([9, 4, 0]));
        assert_eq!(whole(Some(9), &Snmp::default()), None);
    }

    proptest::proptest! {
        #[test]
        fn the_parts_always_add_up(missing in 0u64..1 << 40, a in 0u64..1 << 40, b in 0u64..1 << 40, c in 0u64..1 << 40) {
            let s = LossSplit::of(missing, a, b, c);
            proptest::prop_assert_eq!(s.send_buffer + s.socket + s.nic + s.elsewhere, missing);
            proptest::prop_assert_eq!(s.send_buffer + s.socket + s.nic + s.excess, a + b + c);
            proptest::prop_assert!(s.send_buffer <= a && s.socket <= b && s.nic <= c);
        }
    }
}
