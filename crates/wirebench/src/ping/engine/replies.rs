//! The receive side of the probe loop: every datagram that arrives is matched to its
//! responder (by source address; a new address is a new responder), screened for duplicates
//! and accounted, and feeds the closed loop's patience and the per-second histograms.

use std::time::Duration;

use wirebench_core::latency::{self, Interval, KernelObs, Phase, ReplyObs, ReplyVerdict, ResponderStats, SEQ_WINDOW};
use wirebench_core::seq::{Arrival, SeqWindow};
use wirebench_core::wire::Kind;
use wirebench_core::wire::probe::{FLAG_KERNEL_RX, Probe};
use wirebench_net::io::{Clock, ProbeIo, Received};

use super::{DISCOVERY_BASE, INTERVAL_NS, Loop, Responder, STAMP_SEQ};

/// A reply, whatever its wire form.
struct Parsed {
    seq: u64,
    /// The probe's send time, monotonic ns.
    t1: u64,
    /// The responder's receive and send times, wall ns.
    responder: Option<(u64, u64)>,
    /// The responder's receive time is its kernel's RX timestamp.
    t2_kernel: bool,
}

impl<I: ProbeIo, C: Clock> Loop<'_, I, C> {
    /// Accounts one datagram: a reply to this session from a known or new responder, or
    /// something to ignore.
    pub(super) fn on_datagram(&mut self, rcv: &Received) {
        let (from, at_ns) = (rcv.from, rcv.at_ns);
        let Some(p) = self.parse_reply(rcv.len) else {
            self.out.ignored += 1;
            return;
        };
        let seq = p.seq;
        let idx = if let Some(i) = self.out.responders.iter().position(|r| r.addr == from) {
            i
        } else {
            let first = if seq >= DISCOVERY_BASE { 0 } else { seq };
            let open = self.cfg.pacing.is_open();
            let mut stats = ResponderStats::new(open, first);
            if self.measure_start != u64::MAX {
                stats.begin_measure(self.measure_start);
            }
            self.out.responders.push(Responder {
                addr: from,
                stats,
                window: SeqWindow::new(SEQ_WINDOW),
                answered: self.next_seq,
                last_heard_ns: at_ns,
                stopped: None,
            });
            self.out.responders.len() - 1
        };
        self.last_reply_ns = at_ns;
        self.out.responders[idx].last_heard_ns = at_ns;
        if seq >= DISCOVERY_BASE {
            // Discovery replies teach the closed loop how long the responders take.
            self.patience.on_round_trip(at_ns.saturating_sub(p.t1));
            return;
        }
        let phase = self.phase_of(seq);
        let intended = self.intended(seq);
        // The kernel's view of this probe and its reply: its TX stamp (read back now, after
        // the reply's receive time was taken) and the reply's RX stamp.
        let kernel = rcv.kernel.filter(|_| phase == Phase::Measure).map(|k| {
            let tx = self.io.tx_stamp(seq).unwrap_or_default();
            KernelObs {
                tx_ns: tx.sw_ns,
                rx_ns: k.at.sw_ns,
                t4_wall_ns: k.at_wall_ns,
                hw: tx.hw_ns.zip(k.at.hw_ns),
                t2_kernel: p.t2_kernel,
            }
        });
        let obs = ReplyObs {
            seq,
            phase,
            t1: p.t1,
            t4: at_ns,
            intended,
            responder: p.responder,
            wall_minus_mono: self.cfg.wall_minus_mono,
            kernel,
        };
        let timeout = self.cfg.timeout_ns;
        let r = &mut self.out.responders[idx];
        match r.window.on_seq(seq) {
            Arrival::Duplicate => r.stats.on_duplicate(),
            Arrival::TooOld => {
                if phase == Phase::Measure {
                    r.stats.late += 1;
                }
            }
            Arrival::New => {
                r.answered = r.answered.max(seq + 1);
                if let ReplyVerdict::OnTime { rtt_ns } = r.stats.on_reply(&obs, timeout) {
                    self.patience.on_round_trip(at_ns.saturating_sub(obs.t1));
                    if phase == Phase::Measure {
                        self.on_interval_sample(rtt_ns, at_ns);
                    }
                }
            }
        }
    }

    /// Reads a reply to this session: a wirebench reply with the session id, or a STAMP
    /// reflection (authenticated when the run is) whose SSID is this run's or zero (a
    /// reflector that predates RFC 8972 leaves it zero). `None` for anything else.
    fn parse_reply(&self, len: usize) -> Option<Parsed> {
        let buf = &self.recv_buf[..len];
        if let Some(s) = &self.cfg.stamp {
            let r = s.parse(buf).ok()?;
            if r.ssid != s.ssid && r.ssid != 0 {
                return None;
            }
            return Some(Parsed {
                seq: STAMP_SEQ.from_wire(r.sender_seq, self.next_seq),
                t1: r.t1_unix_ns.saturating_add_signed(-self.cfg.wall_minus_mono),
                responder: Some((r.t2_unix_ns, r.t3_unix_ns)),
                t2_kernel: false,
            });
        }
        let p = Probe::parse(buf).ok()?;
        if p.kind() != Kind::Reply || p.session() != self.cfg.session {
            return None;
        }
        Some(Parsed {
            seq: p.seq(),
            t1: p.t1(),
            responder: p.responder_times(),
            t2_kernel: p.flags() & FLAG_KERNEL_RX != 0,
        })
    }

    fn on_interval_sample(&mut self, rtt_ns: u64, at_ns: u64) {
        let Some((begin, h)) = self.interval.as_mut() else { return };
        if at_ns >= *begin + INTERVAL_NS {
            let start = Duration::from_nanos(*begin - self.out.start_ns);
            self.out.intervals.push(Interval {
                start,
                length: Duration::from_nanos(INTERVAL_NS),
                histogram: h.clone(),
            });
            h.reset();
            // Skip empty seconds rather than log them.
            *begin += (at_ns - *begin) / INTERVAL_NS * INTERVAL_NS;
        }
        latency::record(h, rtt_ns);
    }
}
