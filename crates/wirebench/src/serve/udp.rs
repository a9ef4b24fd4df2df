//! The UDP echo loop. With kernel RX timestamps on (they are, unless the kernel refuses),
//! a full-form probe's t2 is the time the datagram entered this host's stack, and the reply
//! says so (`FLAG_KERNEL_RX`): the pinger can then take serve's own wake-up out of the round
//! trip. A compact probe's reply is unchanged.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wirebench_core::wire::Kind;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::{self, FLAG_REPLY_GROUP, Probe};
use wirebench_net::clock::wall_now_ns;
use wirebench_net::stamp;

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
        let mut stamped = stamp::enable(&self.sock, false).ok().map(|_| stamp::Receiver::default());
        while !self.shutdown.is_set() {
            let got = match stamped.as_mut() {
                Some(rx) => rx.recv(&self.sock, &mut buf).map(|r| (r.len, r.from, r.at.sw_ns)),
                None => self.sock.recv_from(&mut buf).map(|(n, from)| (n, Some(from), None)),
            };
            match got {
                Ok((n, Some(from), kernel_t2)) => {
                    self.answer(&mut buf[..n], from, kernel_t2);
                    spinner.on_traffic();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && spin => spinner.on_empty(&self.sock),
                // A datagram without a source (not on an unconnected UDP socket) or an
                // error: nothing to answer.
                Ok((_, None, _)) | Err(_) => {}
            }
        }
    }

    #[inline]
    fn answer(&self, buf: &mut [u8], from: SocketAddr, kernel_t2: Option<u64>) {
        let t2 = match kernel_t2 {
            _ if buf.len() < probe::FULL_LEN => 0,
            Some(k) => k,
            None => wall_now_ns(),
        };
        let p = match Probe::parse(buf) {
            Ok(p) => p,
            Err(e) => return self.counters.rejected(e),
        };
        if p.kind() != Kind::Probe {
            self.counters.unexpected_kind.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(key) = &self.cfg.probe_key
            && !wire_mesh::verify_probe(key, buf)
        {
            self.counters.unauthenticated.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let to = match self.cfg.reply_group {
            Some(g) if p.flags() & FLAG_REPLY_GROUP != 0 => SocketAddr::V4(g),
            _ => from,
        };
        probe::make_reply(buf, t2, wall_now_ns);
        if kernel_t2.is_some() {
            probe::mark_kernel_rx(buf);
        }
        if let Some(key) = &self.cfg.probe_key {
            wire_mesh::sign_reply(key, buf);
        }
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
