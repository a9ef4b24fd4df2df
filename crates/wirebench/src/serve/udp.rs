//! The UDP echo loop.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wirebench_core::wire::Kind;
use wirebench_core::wire::probe::{self, FLAG_REPLY_GROUP, Probe};
use wirebench_net::clock::wall_now_ns;

use super::spin::Spinner;
use super::{Config, Counters};
use crate::shutdown::{POLL, Shutdown};

pub(super) struct Worker {
    pub(super) sock: UdpSocket,
    /// For a group socket: serve's own unicast socket, which answers its probes. Every serve
    /// on a host receives a group's probes on the same group port, so replies sent from it
    /// would all come from one address and a pinger could not tell the serves apart.
    pub(super) reply_from: Option<UdpSocket>,
    pub(super) cfg: Config,
    pub(super) counters: Arc<Counters>,
    pub(super) shutdown: Shutdown,
}

impl Worker {
    pub(super) fn run(self) {
        if let Some(c) = self.cfg.cpu {
            let _ = wirebench_net::pin::pin_current_thread(c);
        }
        let spin = self.cfg.spin;
        let ok = if spin { self.sock.set_nonblocking(true) } else { self.sock.set_read_timeout(Some(POLL)) };
        if ok.is_err() {
            return;
        }
        let mut buf = vec![0u8; probe::MAX_LEN + 1];
        let mut spinner = Spinner::new();
        while !self.shutdown.is_set() {
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    self.answer(&mut buf[..n], from);
                    spinner.on_traffic();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && spin => spinner.on_empty(&self.sock),
                Err(_) => {}
            }
        }
    }

    #[inline]
    fn answer(&self, buf: &mut [u8], from: SocketAddr) {
        let t2 = if buf.len() >= probe::FULL_LEN { wall_now_ns() } else { 0 };
        let p = match Probe::parse(buf) {
            Ok(p) => p,
            Err(e) => return self.counters.rejected(e),
        };
        if p.kind() != Kind::Probe {
            self.counters.unexpected_kind.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let to = match self.cfg.reply_group {
            Some(g) if p.flags() & FLAG_REPLY_GROUP != 0 => SocketAddr::V4(g),
            _ => from,
        };
        probe::make_reply(buf, t2, wall_now_ns);
        // A unicast socket bound to an address that cannot reach `to` (127.0.0.1 while the
        // group was joined on eth0): answer from the group socket as before.
        let sent = match &self.reply_from {
            Some(u) => u.send_to(buf, to).or_else(|_| self.sock.send_to(buf, to)),
            None => self.sock.send_to(buf, to),
        };
        match sent {
            Ok(_) => self.counters.udp_probes.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.send_errors.fetch_add(1, Ordering::Relaxed),
        };
    }
}
