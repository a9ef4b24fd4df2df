//! Replies on the UDP and group sockets, and what every reply goes through: matched to its
//! target by the session it carries, its tag checked, its round trip recorded.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use wirebench_core::mesh::api::Proto;
use wirebench_core::mesh::window::ReplyOutcome;
use wirebench_core::wire::Kind;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::Probe;

use wirebench_net::clock::Clock as _;

use super::{DRAIN_BATCH, GROUP_ID, Prober};

impl Prober {
    pub(super) fn drain_udp(&mut self, group: bool) {
        let mut buf = [0u8; 2048];
        // At most a batch per wake-up: a flood at this socket must not starve the schedule.
        for _ in 0..DRAIN_BATCH {
            let sock = if group { self.group_sock.as_ref() } else { Some(&self.udp) };
            let Some(sock) = sock else { return };
            let (n, from) = match sock.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let now = self.clock.now_ns();
            let id = if group { self.group_by_ip.get(&from.ip()).copied() } else { self.udp_target(&buf[..n]) };
            match id {
                Some(id) => self.on_reply(id, &buf[..n], now),
                None if group && self.cfg.self_match.is_self(SocketAddr::new(from.ip(), self.cfg.self_match.port)) => {}
                None => {
                    self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Replies on UDP target `id`'s own (connected) socket: the kernel lets only its peer's
    /// datagrams in.
    pub(super) fn drain_peer(&mut self, id: u64) {
        let mut buf = [0u8; 2048];
        for _ in 0..DRAIN_BATCH {
            let Some(sock) = self.slots.get(&id).and_then(|s| s.udp.as_ref()) else { return };
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // Nothing more, or an ICMP error (the peer's port closed): the probe is lost.
                Err(_) => return,
            };
            let now = self.clock.now_ns();
            // Matched by the session it carries, as on the shared socket (a kernel that
            // delivered it here wrongly loses nothing).
            match self.udp_target(&buf[..n]) {
                Some(t) => self.on_reply(t, &buf[..n], now),
                None => {
                    self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// The UDP target a reply names by its session.
    fn udp_target(&self, bytes: &[u8]) -> Option<u64> {
        Probe::parse(bytes)
            .ok()
            .map(|p| p.session().wrapping_sub(self.session))
            .filter(|id| self.slots.get(id).is_some_and(|s| s.proto == Proto::Udp))
    }

    pub(super) fn on_reply(&mut self, id: u64, bytes: &[u8], now: u64) {
        let Ok(p) = Probe::parse(bytes) else {
            self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let target = self.slots.get(&id).map(|s| if s.proto == Proto::Multicast { GROUP_ID } else { id });
        if p.kind() != Kind::Reply || Some(p.session()) != target.map(|t| self.session.wrapping_add(t)) {
            self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(key) = &self.cfg.key
            && !wire_mesh::verify_reply(key, bytes)
        {
            self.shared.replies_unauthenticated.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(slot) = self.slots.get_mut(&id) else { return };
        match slot.target.on_reply(p.seq(), p.t1(), now, &self.windows) {
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
