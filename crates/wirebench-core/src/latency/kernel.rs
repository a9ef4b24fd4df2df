//! A round trip split by kernel timestamps (`SO_TIMESTAMPING`): the time between the
//! probe leaving this host's stack and the reply entering it (stack to stack), and the rest,
//! which is the hosts' own send path, wake-up and scheduling.
//!
//! ```text
//! t1 app send ─ tx kernel ──── network, far stack ──── rx kernel ─ t4 app receive
//!               (+ the responder's dwell: t2 kernel rx .. t3 app send, when it stamps t2
//!                with its kernel time: probes of 48 bytes or more, serve with timestamps)
//! ```
//!
//! Software timestamps are on the kernel's `CLOCK_REALTIME`; the pinger's t1 and t4 are on
//! its monotonic clock. Each reply carries a wall-clock reading taken right after t4, so the
//! receive check (`rx <= t4_wall`) needs no conversion. t1 goes onto the wall clock with
//! the smallest `t4_wall - t4` seen so far: every pairing overstates the offset by the time
//! between its two clock reads (a preemption there makes it microseconds), never
//! understates it, so the smallest is the closest. A kernel time on the wrong side of the
//! application's own (impossible, unless a clock stepped or the stamp belongs to another
//! packet) is counted and not used.
//!
//! Hardware timestamps are on the NIC's clock: a pair of them (TX and RX, same NIC) gives
//! the stack-to-stack time and nothing else; everything compared with the application's
//! clock uses software stamps.

use hdrhistogram::Histogram;

use super::{histogram, record};

/// The kernel's view of one probe and its reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelObs {
    /// The probe's software TX timestamp, wall-clock ns.
    pub tx_ns: Option<u64>,
    /// The reply's software RX timestamp, wall-clock ns.
    pub rx_ns: Option<u64>,
    /// The wall clock read right after the application read t4.
    pub t4_wall_ns: u64,
    /// Hardware TX and RX timestamps (the NIC's clock), when both were given.
    pub hw: Option<(u64, u64)>,
    /// The responder stamped t2 with its kernel RX time: its dwell `t3 - t2` then covers
    /// its own wake-up, which is taken out of the stack-to-stack time.
    pub t2_kernel: bool,
}

/// Which stack-to-stack time the stats hold (fixed by the first sample, so one histogram
/// never mixes two meanings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackScope {
    /// This host's TX to RX timestamp minus the responder's kernel-to-send dwell: both
    /// hosts' wake-ups excluded.
    BothHosts,
    /// This host's TX to RX timestamp: the responder's wake-up and dwell included.
    ThisHost,
}

/// Kernel-timestamp accounting of one responder's measured replies.
#[derive(Debug, Clone)]
pub struct KernelStats {
    /// Stack to stack, ns.
    pub stack: Histogram<u64>,
    /// Per reply, the round trip minus stack to stack: the hosts' own share, ns.
    pub hosts: Histogram<u64>,
    /// What `stack` measures, once known.
    pub scope: Option<StackScope>,
    /// Measured replies seen.
    pub replies: u64,
    /// Of those, with a software TX stamp of the probe.
    pub tx: u64,
    /// With a software RX stamp.
    pub rx: u64,
    /// Stack-to-stack times taken from a hardware pair.
    pub hardware: u64,
    /// RX stamps later than the application's receive (never used).
    pub rx_after_app: u64,
    /// TX stamps earlier than the application's send (never used).
    pub tx_before_app: u64,
    /// Samples of the other scope than the first one's (not recorded).
    pub other_scope: u64,
    /// The smallest wall-minus-monotonic pairing seen.
    wall_minus_mono: Option<i128>,
}

impl Default for KernelStats {
    fn default() -> Self {
        Self {
            stack: histogram(),
            hosts: histogram(),
            scope: None,
            replies: 0,
            tx: 0,
            rx: 0,
            hardware: 0,
            rx_after_app: 0,
            tx_before_app: 0,
            other_scope: 0,
            wall_minus_mono: None,
        }
    }
}

impl KernelStats {
    /// Accounts one measured reply: `t1`, `t4` on the pinger's monotonic clock, `dwell` the
    /// responder's `t3 - t2` when it sent them. Returns the software TX and RX stamps that
    /// passed the checks (wall clock), for the clock-offset estimate.
    pub fn on_reply(&mut self, t1: u64, t4: u64, dwell: Option<u64>, k: &KernelObs) -> (Option<u64>, Option<u64>) {
        self.replies += 1;
        let rx = k.rx_ns.filter(|&rx| {
            self.rx += 1;
            let ok = rx <= k.t4_wall_ns;
            self.rx_after_app += u64::from(!ok);
            ok
        });
        let pairing = i128::from(k.t4_wall_ns) - i128::from(t4);
        let offset = *self.wall_minus_mono.insert(self.wall_minus_mono.map_or(pairing, |m| m.min(pairing)));
        let t1_wall = i128::from(t1) + offset;
        let tx = k.tx_ns.filter(|&tx| {
            self.tx += 1;
            let ok = i128::from(tx) >= t1_wall;
            self.tx_before_app += u64::from(!ok);
            ok
        });
        let (kernel_rtt, hw) = match (k.hw, tx, rx) {
            (Some((htx, hrx)), _, _) if hrx >= htx => (Some(hrx - htx), true),
            (_, Some(tx), Some(rx)) if rx >= tx => (Some(rx - tx), false),
            _ => (None, false),
        };
        let Some(kernel_rtt) = kernel_rtt else { return (tx, rx) };
        let (scope, stack) = match dwell {
            Some(d) if k.t2_kernel && d <= kernel_rtt => (StackScope::BothHosts, kernel_rtt - d),
            _ => (StackScope::ThisHost, kernel_rtt),
        };
        if *self.scope.get_or_insert(scope) != scope {
            self.other_scope += 1;
            return (tx, rx);
        }
        self.hardware += u64::from(hw);
        record(&mut self.stack, stack);
        record(&mut self.hosts, t4.saturating_sub(t1).saturating_sub(stack));
        (tx, rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinger: monotonic = wall - 1e12. Probe sent at mono 1_000, on the wire 2_000 later,
    /// reply in the stack at mono 60_000, read by the app at mono 70_000.
    fn obs() -> (u64, u64, KernelObs) {
        let wall = |mono: u64| mono + 1_000_000_000_000;
        let k = KernelObs {
            tx_ns: Some(wall(3_000)),
            rx_ns: Some(wall(60_000)),
            t4_wall_ns: wall(70_000),
            hw: None,
            t2_kernel: false,
        };
        (1_000, 70_000, k)
    }

    fn one(h: &Histogram<u64>) -> u64 {
        assert_eq!(h.len(), 1);
        h.max()
    }

    #[test]
    fn this_hosts_stack_to_stack_and_its_share() {
        let (t1, t4, k) = obs();
        let mut s = KernelStats::default();
        let (tx, rx) = s.on_reply(t1, t4, None, &k);
        assert_eq!((tx, rx), (k.tx_ns, k.rx_ns));
        assert_eq!(s.scope, Some(StackScope::ThisHost));
        assert_eq!(one(&s.stack), s.stack.highest_equivalent(57_000));
        // 69 us round trip - 57 us stack to stack = 12 us of this host's send and wake-up
        assert_eq!(one(&s.hosts), s.hosts.highest_equivalent(12_000));
    }

    #[test]
    fn the_responders_kernel_dwell_is_taken_out() {
        let (t1, t4, mut k) = obs();
        k.t2_kernel = true;
        let mut s = KernelStats::default();
        s.on_reply(t1, t4, Some(20_000), &k);
        assert_eq!(s.scope, Some(StackScope::BothHosts));
        assert_eq!(one(&s.stack), s.stack.highest_equivalent(37_000));
        assert_eq!(one(&s.hosts), s.hosts.highest_equivalent(32_000));
        // a later sample without the responder's kernel time is not mixed in
        s.on_reply(t1, t4, None, &obs().2);
        assert_eq!((s.stack.len(), s.other_scope), (1, 1));
    }

    #[test]
    fn every_stamp_given_is_counted() {
        let (t1, t4, k) = obs();
        let mut s = KernelStats::default();
        s.on_reply(t1, t4, None, &k);
        s.on_reply(t1, t4, None, &k);
        assert_eq!((s.replies, s.tx, s.rx), (2, 2, 2));
    }

    #[test]
    fn a_dwell_without_the_responders_kernel_time_stays_in() {
        // t2 read by the responder's application: its dwell does not cover its wake-up
        let (t1, t4, k) = obs();
        let mut s = KernelStats::default();
        s.on_reply(t1, t4, Some(20_000), &k);
        assert_eq!(s.scope, Some(StackScope::ThisHost));
        assert_eq!(one(&s.stack), s.stack.highest_equivalent(57_000));
    }

    #[test]
    fn stamps_in_the_wrong_order_give_no_stack_time() {
        // a hardware RX before its TX: the software pair is used instead
        let (t1, t4, mut k) = obs();
        k.hw = Some((5_050_000, 5_000_000));
        let mut s = KernelStats::default();
        s.on_reply(t1, t4, None, &k);
        assert_eq!((s.hardware, one(&s.stack)), (0, s.stack.highest_equivalent(57_000)));
        // a software RX before the TX (each on the right side of the application's reads)
        let (t1, t4, mut k) = obs();
        k.rx_ns = k.tx_ns.map(|tx| tx - 1);
        let mut s = KernelStats::default();
        assert_eq!(s.on_reply(t1, t4, None, &k), (k.tx_ns, k.rx_ns));
        assert_eq!((s.stack.len(), s.hosts.len(), s.scope), (0, 0, None));
    }

    #[test]
    fn impossible_orders_are_counted_and_not_used() {
        let (t1, t4, mut k) = obs();
        k.rx_ns = Some(k.t4_wall_ns + 1);
        k.tx_ns = Some(k.t4_wall_ns - t4 + t1 - 1);
        let mut s = KernelStats::default();
        assert_eq!(s.on_reply(t1, t4, None, &k), (None, None));
        assert_eq!((s.rx_after_app, s.tx_before_app, s.stack.len()), (1, 1, 0));
        // a stamp exactly at the application's time is possible (same clock read)
        let (t1, t4, mut k) = obs();
        k.rx_ns = Some(k.t4_wall_ns);
        assert!(s.on_reply(t1, t4, None, &k).1.is_some());
    }

    #[test]
    fn a_pairing_stretched_by_a_preemption_does_not_fail_the_send_check() {
        let mut s = KernelStats::default();
        let (t1, t4, k) = obs();
        s.on_reply(t1, t4, None, &k);
        // the next probe: sent at mono 100_000, stamped 1 us later; the wall clock was read
        // 5 us after t4 (preempted between the two reads)
        let wall = |mono: u64| mono + 1_000_000_000_000;
        let late_read = KernelObs {
            tx_ns: Some(wall(101_000)),
            rx_ns: Some(wall(150_000)),
            t4_wall_ns: wall(160_000) + 5_000,
            hw: None,
            t2_kernel: false,
        };
        let (tx, _) = s.on_reply(100_000, 160_000, None, &late_read);
        assert_eq!((tx, s.tx_before_app), (late_read.tx_ns, 0));
    }

    #[test]
    fn missing_stamps_leave_a_note_in_the_counts() {
        let (t1, t4, mut k) = obs();
        k.tx_ns = None;
        let mut s = KernelStats::default();
        s.on_reply(t1, t4, None, &k);
        assert_eq!((s.replies, s.tx, s.rx, s.stack.len()), (1, 0, 1, 0));
    }

    #[test]
    fn a_hardware_pair_gives_stack_to_stack_only() {
        let (t1, t4, mut k) = obs();
        k.hw = Some((5_000_000, 5_050_000));
        let mut s = KernelStats::default();
        s.on_reply(t1, t4, None, &k);
        assert_eq!((s.hardware, one(&s.stack)), (1, s.stack.highest_equivalent(50_000)));
    }
}
