//! A stream receiver's missing messages in words, split by the kernel counters of both
//! hosts (`ReceiverResult::loss_split`, computed once when the run's report is built, so
//! the text, the HTML page and the JSON show the same numbers).

use wirebench_core::counters::{NIC, ReceiveDrops, RunSizes, SOFTNET};
use wirebench_core::report::{ReceiverResult, SenderResult};

use crate::words::grouped;

/// The sending host's figures behind its share, `(SndbufErrors +3, egress qdisc drops
/// +6,876: the larger, they overlap)`, as far as the report has them (this client's own
/// sending: `sender`; serve's: not kept).
fn sender_source(sender: Option<&SenderResult>) -> String {
    sender
        .and_then(|s| sender_figures(s.sndbuf_errors, s.qdisc_drops))
        .unwrap_or_else(|| "SndbufErrors or egress qdisc drops".into())
}

/// A sending host's drops after the send in words, as far as they were read:
/// `SndbufErrors +3, egress qdisc drops +6,876: the larger, they overlap` (streams' and
/// ping's lines say it the same way).
pub fn sender_figures(sndbuf: Option<u64>, qdisc: Option<u64>) -> Option<String> {
    match (sndbuf, qdisc) {
        (Some(b), Some(q)) => {
            Some(format!("SndbufErrors +{}, egress qdisc drops +{}: the larger, they overlap", grouped(b), grouped(q)))
        }
        (Some(b), None) => Some(format!("SndbufErrors +{}", grouped(b))),
        (None, Some(q)) => Some(format!("egress qdisc drops +{}", grouped(q))),
        (None, None) => None,
    }
}

/// The split line of receiver `r` and its caveats (nothing without a split or with nothing
/// missing and nothing counted). `sender`: this client's sending, when it sent to `r`
/// (its batching with UDP GSO and its counters; `None`: unknown, e.g. serve sent).
pub fn lines(r: &ReceiverResult, sender: Option<&SenderResult>) -> Vec<String> {
    let sender_gso = sender.map(|s| s.gso);
    let (Some(s), Some(k)) = (r.loss_split.as_ref(), r.kernel.as_ref()) else { return Vec::new() };
    if s.missing == 0 && s.excess == 0 {
        return Vec::new();
    }
    let drops = ReceiveDrops::of(k).unwrap_or_default();
    let fix = if s.socket > 0 { ": raise the receive buffer, sysctl -w net.core.rmem_max=16777216" } else { "" };
    let nic_source = if drops.nic.is_some() {
        let squeeze = k.get(SOFTNET, "TimeSqueeze").unwrap_or(0);
        format!(
            "interface rx_dropped +{} rx_errors +{}, softnet drops +{}, squeezes +{squeeze}",
            k.get(NIC, "RxDropped").unwrap_or(0),
            k.get(NIC, "RxErrors").unwrap_or(0) + k.get(NIC, "RxMissedErrors").unwrap_or(0),
            k.get(SOFTNET, "Dropped").unwrap_or(0)
        )
    } else {
        "not reported by that receiver".to_owned()
    };
    let who = if r.direction == wirebench_core::report::StreamDirection::Reverse {
        "this host's"
    } else {
        "the receiving host's"
    };
    let sizes = r.wake.as_ref().and_then(RunSizes::of).filter(RunSizes::batched);
    let runs = sizes.map_or_else(String::new, |z| format!(", each a GRO run of {}", run_words(&z)));
    let mut out = vec![format!(
        "{}: of {} missing, {} dropped by {who} socket buffers (Udp InErrors +{}, RcvbufErrors +{}{runs}{fix}), {} by its NIC ({nic_source}), \
         {} by the sending host after the send ({}), {} elsewhere on the path",
        r.addr,
        grouped(s.missing),
        grouped(s.socket),
        drops.socket,
        drops.rcvbuf,
        grouped(s.nic),
        grouped(s.send_buffer),
        sender_source(sender),
        grouped(s.elsewhere),
    )];
    let excess = if s.excess > 0 {
        format!(" (they rose {} beyond what this run lost)", grouped(s.excess))
    } else {
        String::new()
    };
    let caveat = format!("counters are host-wide: other traffic on those hosts counts too{excess}");
    out.push(format!("{}:   {caveat}", r.addr));
    if s.uncertain > 0 {
        out.push(format!(
            "{}:   a socket counts a GRO run it refuses once, and the runs read held {} datagrams: the socket's share \
             and 'elsewhere' may each be off by up to {}",
            r.addr,
            sizes.map_or_else(String::new, |z| format!("{} to {}", z.min, z.max)),
            grouped(s.uncertain)
        ));
    } else if s.socket > 0
        && s.elsewhere > 0
        && sender_gso != Some(false)
        && r.wake.as_ref().and_then(RunSizes::of).is_none()
    {
        out.push(format!(
            "{}:   the sender may batch with UDP GSO and the receiver reads with GRO: where a batch arrives whole \
             (loopback, veth) one RcvbufErrors count can be up to 64 datagrams, so part of 'elsewhere' may be that buffer",
            r.addr
        ));
    }
    out
}

/// `44 datagrams`, or `36-44 datagrams, 43.99 on average`.
fn run_words(z: &RunSizes) -> String {
    if z.min == z.max {
        format!("{} datagrams", z.max)
    } else {
        format!("{}-{} datagrams, {:.2} on average", z.min, z.max, z.mean())
    }
}

/// One line per interval row of `r` that lost something (or whose counters rose beyond
/// it), with its share of the run's split: the rows add up to [`lines`]' figures.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn interval_lines(r: &ReceiverResult) -> Vec<String> {
    if r.loss_split.is_none() {
        return Vec::new();
    }
    r.intervals
        .iter()
        .filter_map(|row| {
            let s = row.loss_split?;
            (s.missing > 0).then(|| {
                let excess = if s.excess > 0 { format!(" (counters +{} beyond)", grouped(s.excess)) } else { String::new() };
                let uncertain =
                    if s.uncertain > 0 { format!(" (socket and elsewhere +-{})", grouped(s.uncertain)) } else { String::new() };
                format!(
                    "{}:   interval to {:.3} s: of {} missing, {} socket buffers, {} NIC, {} sending host, {} elsewhere{uncertain}{excess}",
                    r.addr,
                    row.at_ns as f64 / 1e9,
                    grouped(s.missing),
                    grouped(s.socket),
                    grouped(s.nic),
                    grouped(s.send_buffer),
                    grouped(s.elsewhere),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use wirebench_core::counters::{Iface, LossSplit, Snapshot, Softnet, add_below_socket_tables};
    use wirebench_core::snmp::Snmp;

    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(12_345), "12,345");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    fn receiver(missing: u64, rcvbuf: i64, nic: bool) -> ReceiverResult {
        receiver_of(100_000, 100_000 - missing, rcvbuf, nic)
    }

    fn receiver_of(sent: u64, received: u64, rcvbuf: i64, nic: bool) -> ReceiverResult {
        let mut report = crate::fixtures::stream(sent, received);
        let wirebench_core::report::Results::Stream(results) = &mut report.results else { unreachable!() };
        let mut row = results.receivers.remove(0);
        let mut kernel = Snmp::default();
        let udp = kernel.0.entry("Udp".into()).or_default();
        udp.insert("InErrors".into(), rcvbuf);
        udp.insert("RcvbufErrors".into(), rcvbuf);
        if nic {
            let mut delta = Snapshot::default().delta(&Snapshot::default());
            delta.softnet = Some(Softnet::default());
            delta.interfaces.push(Iface::default());
            add_below_socket_tables(&mut kernel, &delta);
        }
        row.kernel = Some(kernel);
        row.attribute(Some(0), &[]);
        row
    }

    fn sender(gso: bool, sndbuf: Option<u64>, qdisc: Option<u64>) -> SenderResult {
        SenderResult {
            messages: 100_000,
            bytes: 0,
            per_s: 0.0,
            bits_per_s: 0.0,
            send_ns: 0,
            slip_mean_ns: 0,
            slip_max_ns: 0,
            gso,
            retransmits: None,
            sndbuf_errors: sndbuf,
            qdisc_drops: qdisc,
        }
    }

    /// A sender whose egress qdisc dropped what its socket counters did not see (a GSO batch
    /// split and dropped in part): the line names the qdisc's drops beside SndbufErrors.
    #[test]
    fn the_sending_hosts_qdisc_drops_are_named() {
        let mut r = receiver(6_876, 0, true);
        let snd = sender(true, Some(62), Some(6_876));
        r.attribute(Some(6_876), &[]);
        let l = lines(&r, Some(&snd));
        assert!(
            l[0].ends_with(
                "6,876 by the sending host after the send (SndbufErrors +62, egress qdisc drops +6,876: the larger, \
                 they overlap), 0 elsewhere on the path"
            ),
            "{}",
            l[0]
        );
        // serve sent (reverse): its figures are not kept, the line says what they are
        assert!(lines(&r, None)[0].contains("(SndbufErrors or egress qdisc drops)"), "{:?}", lines(&r, None));
    }

    #[test]
    fn the_issues_example_in_words() {
        let r = receiver(12_345, 12_001, true);
        assert_eq!(
            r.loss_split,
            Some(LossSplit {
                missing: 12_345,
                send_buffer: 0,
                socket: 12_001,
                nic: 0,
                elsewhere: 344,
                ..LossSplit::default()
            })
        );
        let l = lines(&r, Some(&sender(false, Some(0), None)));
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(
            l[0].ends_with(
                ": of 12,345 missing, 12,001 dropped by the receiving host's socket buffers (Udp InErrors +12001, \
                 RcvbufErrors +12001: raise the receive buffer, sysctl -w net.core.rmem_max=16777216), 0 by its NIC \
                 (interface rx_dropped +0 rx_errors +0, softnet drops +0, squeezes +0), 0 by the sending host after \
                 the send (SndbufErrors +0), 344 elsewhere on the path"
            ),
            "{}",
            l[0]
        );
        assert!(l[1].contains("counters are host-wide"), "{}", l[1]);
        // a GSO sender: the caveat on whole batches
        assert_eq!(lines(&r, Some(&sender(true, Some(0), None))).len(), 3);
    }

    /// A loopback receiver that read runs of 44 datagrams: 100 refusals are 4,400
    /// datagrams, nothing is elsewhere and no caveat is needed; runs of 36 to 44 make the
    /// share uncertain, and the line says by how much.
    #[test]
    fn socket_counts_are_datagrams_by_the_runs_read() {
        let with_runs = |min, max| {
            let mut r = receiver_of(101_200, 96_800, 100, true);
            let datagrams = r.total.received;
            r.wake = Some(wirebench_core::stream::wake::WakeDelay {
                stamped: datagrams,
                runs: datagrams.div_ceil(max),
                run_min: min,
                run_max: max,
                ..Default::default()
            });
            r.attribute(Some(0), &[]);
            r
        };
        let r = with_runs(44, 44);
        let s = r.loss_split.unwrap();
        assert_eq!((s.missing, s.socket, s.elsewhere, s.uncertain), (4_400, 4_400, 0, 0), "{s:?}");
        let l = lines(&r, Some(&sender(true, Some(0), None)));
        assert!(
            l[0].contains("(Udp InErrors +100, RcvbufErrors +100, each a GRO run of 44 datagrams: raise"),
            "{}",
            l[0]
        );
        assert!(l[0].ends_with(", 0 elsewhere on the path"), "{}", l[0]);
        assert_eq!(l.len(), 2, "no caveat: {l:?}");
        let r = with_runs(36, 44);
        let s = r.loss_split.unwrap();
        assert!(s.uncertain > 0 && s.elsewhere <= s.uncertain, "{s:?}");
        let l = lines(&r, Some(&sender(true, Some(0), None)));
        assert!(l[0].contains("each a GRO run of 36-44 datagrams, "), "{}", l[0]);
        assert!(
            l[2].ends_with(&format!(
                "the runs read held 36 to 44 datagrams: the socket's share and 'elsewhere' may each be off by up to {}",
                grouped(s.uncertain)
            )),
            "{l:?}"
        );
    }

    #[test]
    fn excess_and_what_a_receiver_did_not_report() {
        let r = receiver(10, 25, false);
        let l = lines(&r, Some(&sender(false, Some(0), None)));
        assert!(l[0].contains("of 10 missing, 10 dropped"), "{}", l[0]);
        assert!(l[0].contains("0 by its NIC (not reported by that receiver)"), "{}", l[0]);
        assert!(l[1].contains("they rose 15 beyond what this run lost"), "{}", l[1]);
        // nothing missing, nothing counted: no lines
        assert!(lines(&receiver(0, 0, true), None).is_empty());
        assert!(interval_lines(&receiver(0, 0, true)).is_empty());
    }

    #[test]
    fn interval_lines_are_the_rows_shares_and_add_up() {
        // two rows of 50,000 expected: 30 missing in the second, the buffer's (read there)
        let mut r = receiver(30, 30, true);
        r.intervals[0].counts.expected = r.intervals[0].counts.received;
        r.intervals[1].counts.expected = r.intervals[1].counts.received + 30;
        let k = r.kernel.clone();
        r.attribute(
            Some(0),
            &[
                wirebench_core::counters::reading(Some(0), k.as_ref()).map(|_| Some(0)),
                wirebench_core::counters::reading(Some(0), k.as_ref()),
            ],
        );
        let l = interval_lines(&r);
        assert_eq!(l.len(), 1, "only the row that lost: {l:?}");
        assert!(
            l[0].ends_with(
                ":   interval to 1.000 s: of 30 missing, 30 socket buffers, 0 NIC, 0 sending host, 0 elsewhere"
            ),
            "{}",
            l[0]
        );
        let rows = r.intervals.iter().filter_map(|x| x.loss_split).fold(LossSplit::default(), LossSplit::plus);
        assert_eq!(Some(rows), r.loss_split);
    }
}
