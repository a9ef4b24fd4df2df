//! STAMP reflectors as peers (`stamp:` entries): a router, or another tool's reflector, that
//! answers STAMP test packets (RFC 8762) and probes nobody. The prober is their
//! session-sender over UDP, at the plan's rate like any peer, into the same windows.
//!
//! Method: one session per target (a random non-zero SSID). A test packet is written whole
//! when the target is made; a send stamps its 32-bit sequence number and T1 (this host's
//! wall clock, the monotonic send time plus the prober's fixed offset) and, authenticated,
//! signs it: no allocation per probe. A reflection is read with the codec's
//! `Sender::parse` (length, HMAC, timestamps checked), must carry the session's SSID (or 0,
//! from a reflector that predates RFC 8972), and is matched to its probe by the sender
//! sequence number it echoes, with the echoed T1 back on the monotonic clock within
//! [`T1_SLACK_NS`] of the send time recorded. The round trip is the reply's arrival minus
//! that send time, as for every other peer (the reflector's dwell, T3 - T2, is inside it).
//! Anything else is dropped and counted: refused by the codec or of another session or
//! probe as unmatched, a wrong HMAC as unauthenticated.

use std::sync::atomic::Ordering;

use wirebench_core::mesh::window::ReplyOutcome;
use wirebench_core::wire::stamp::{self, Reject};

use super::Prober;

/// How far an echoed T1 may read from the send time recorded: NTP's 32-bit fraction reads
/// back within 1 ns.
const T1_SLACK_NS: u64 = 2;

/// A STAMP reflector target's session and its test packet.
pub(super) struct StampProbe {
    sender: stamp::Sender,
    buf: [u8; stamp::AUTH_LEN],
    len: usize,
}

impl StampProbe {
    /// A session `ssid` (never 0) of `template` (the key, format and error estimate).
    pub(super) fn new(template: &stamp::Sender, ssid: u16) -> Box<Self> {
        let sender = stamp::Sender { ssid: ssid.max(1), ..template.clone() };
        let len = stamp::base_len(sender.key.is_some());
        let mut p = Box::new(Self { sender, buf: [0; stamp::AUTH_LEN], len });
        let Self { sender, buf, len } = &mut *p;
        sender.init(&mut buf[..*len]);
        p
    }

    /// The test packet of probe `seq` sent at `t1_unix_ns`: its low 32 bits on the wire.
    pub(super) fn stamp(&mut self, seq: u64, t1_unix_ns: u64) -> &[u8] {
        #[expect(clippy::cast_possible_truncation, reason = "STAMP numbers probes in 32 bits")]
        self.sender.stamp(&mut self.buf[..self.len], seq as u32, t1_unix_ns);
        &self.buf[..self.len]
    }
}

impl Prober {
    /// A datagram from STAMP target `id`'s reflector, read at `now`.
    pub(super) fn on_stamp_reply(&mut self, id: u64, bytes: &[u8], now: u64) {
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let Some(st) = &slot.stamp else { return };
        let r = match st.sender.parse(bytes) {
            Ok(r) if r.ssid == st.sender.ssid || r.ssid == 0 => r,
            Err(Reject::Auth) => {
                self.shared.replies_unauthenticated.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(_) | Err(_) => {
                self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let t1 = r.t1_unix_ns.saturating_add_signed(self.wall_offset.saturating_neg());
        match slot.target.on_reply_low32(r.sender_seq, t1, T1_SLACK_NS, now, &self.windows) {
            ReplyOutcome::Recorded(rtt) => {
                #[expect(clippy::cast_precision_loss, reason = "seconds for Prometheus")]
                self.shared.rtt_of(slot.proto).observe(rtt as f64 / 1e9);
            }
            _ => {
                self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::wire::stamp::{ErrorEstimate, Key, Reflector, TsFormat};

    /// The kept test packet, restamped, is what a reflector reads and answers, in both
    /// modes; its session is never 0.
    #[test]
    fn a_kept_test_packet_is_restamped_and_reflected() {
        for key in [None, Key::new(&[7; 16])] {
            let template = stamp::Sender { key: key.clone(), format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 0 };
            let mut p = StampProbe::new(&template, 0);
            assert_eq!(p.sender.ssid, 1);
            let r = Reflector { key: key.clone(), format: TsFormat::Ptp, error: ErrorEstimate(1) };
            for (seq, t1) in [(0u64, 1_800_000_000_000_000_000u64), ((1 << 32) + 9, 1_800_000_000_000_000_777)] {
                let pkt = p.stamp(seq, t1).to_vec();
                assert_eq!(pkt.len(), stamp::base_len(key.is_some()));
                let tp = r.check(&pkt).unwrap();
                assert_eq!((u64::from(tp.seq), tp.ssid), (seq & 0xFFFF_FFFF, 1));
                let mut out = [0u8; stamp::AUTH_LEN];
                let n = r.reflect(&pkt, &mut out, 5, t1 + 10, 64, || t1 + 20).unwrap();
                let back = p.sender.parse(&out[..n]).unwrap();
                assert_eq!(u64::from(back.sender_seq), seq & 0xFFFF_FFFF);
                assert!(back.t1_unix_ns.abs_diff(t1) < T1_SLACK_NS);
            }
        }
    }
}
