//! The UDP echo loop. With kernel RX timestamps on (they are, unless the kernel refuses),
//! a full-form probe's t2 is the time the datagram entered this host's stack, and the reply
//! says so (`FLAG_KERNEL_RX`): the pinger can then take serve's own wake-up out of the round
//! trip. A compact probe's reply is unchanged.
//!
//! Waiting: the thread blocks in its read with no timeout, so an idle serve's UDP thread
//! never wakes (one that woke every [`crate::shutdown::POLL`] to look at the stop flag cost
//! 10 wake-ups a second, each about as dear as a probe), and a probe costs one system call
//! to receive, as before. The stop reaches it by [`wake_all`]: `shutdown(SHUT_RD)` on its
//! socket, which Linux applies to an unconnected UDP socket too (it answers `ENOTCONN`, then
//! marks the socket shut for reading and wakes its sleepers: a read then returns what is
//! queued, then 0 at once). The acceptor calls it as soon as it sees the stop, and
//! `Server::stop` again.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wirebench_core::wire::Kind;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::{self, FLAG_REPLY_GROUP, Probe};
use wirebench_net::clock::wall_now_ns;
use wirebench_net::stamp;

use super::spin::Spinner;
use super::{Config, Counters};
use crate::shutdown::Shutdown;

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
        // Blocking with no timeout: the stop wakes the read (`wake_all`).
        let ok = if spin { self.sock.set_nonblocking(true) } else { self.sock.set_read_timeout(None) };
        if ok.is_err() {
            return;
        }
        let mut buf = vec![0u8; probe::MAX_LEN + 1];
        let mut spinner = Spinner::new();
        let mut stamped = self
            .cfg
            .timestamps
            .then(|| stamp::enable(&self.sock, false).ok())
            .flatten()
            .map(|_| stamp::Receiver::default());
        while !self.shutdown.is_set() {
            let got = match stamped.as_mut() {
                Some(rx) => rx.recv(&self.sock, &mut buf).map(|r| (r.len, r.from, r.at.sw_ns)),
                None => self.sock.recv_from(&mut buf).map(|(n, from)| (n, Some(from), None)),
            };
            match got {
                // The stop shut the socket for reading (`wake_all`).
                Ok((0, _, _)) if self.shutdown.is_set() => break,
                Ok((n, Some(from), kernel_t2)) => {
                    self.answer(&mut buf[..n], from, kernel_t2);
                    spinner.on_traffic();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && spin => spinner.on_empty(&self.sock, &self.shutdown),
                // A datagram without a source (not on an unconnected UDP socket; also the 0
                // a read returns once the stop shut the socket for reading) or an error:
                // nothing to answer.
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

/// Wakes every UDP thread blocked in a read on one of `sockets` (clones of serve's probe
/// sockets), for good: `shutdown(SHUT_RD)`, which Linux applies to unconnected UDP sockets
/// as well (while answering `ENOTCONN`). Call after the stop flag is set: a woken thread
/// looks at it before its next read. Idempotent.
pub(super) fn wake_all(sockets: &[UdpSocket]) {
    for s in sockets {
        let _ = nix::sys::socket::shutdown(s.as_raw_fd(), nix::sys::socket::Shutdown::Read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// An idle UDP thread blocks in its read with no timeout (it had a 100 ms one before),
    /// answers a probe, and ends once the stop is triggered and its socket woken.
    #[test]
    fn an_idle_udp_thread_has_no_read_timeout_and_ends_at_the_stop() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (clone, addr) = (sock.try_clone().unwrap(), sock.local_addr().unwrap());
        let stop = Shutdown::new();
        let counters = Arc::new(Counters::default());
        let worker = Worker {
            sock,
            reply_from: None,
            cfg: Config::loopback(),
            counters: counters.clone(),
            shutdown: stop.clone(),
        };
        let (tid_tx, tid_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            tid_tx.send(wirebench_net::rusage::thread_id()).unwrap();
            worker.run();
            done_tx.send(()).unwrap();
        });
        let tid = tid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let reads = [nix::libc::SYS_recvmsg, nix::libc::SYS_recvfrom];
        crate::shutdown::blocked::wait_in(tid, &reads);
        assert_eq!(clone.read_timeout().unwrap(), None, "blocked in its read with no timeout");
        // It still answers.
        let pinger = UdpSocket::bind("127.0.0.1:0").unwrap();
        pinger.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sent = vec![0u8; probe::FULL_LEN];
        probe::init(&mut sent, 1, 0);
        probe::stamp(&mut sent, 1, 2);
        pinger.send_to(&sent, addr).unwrap();
        let mut reply = [0u8; 128];
        let (len, _) = pinger.recv_from(&mut reply).unwrap();
        assert_eq!(Probe::parse(&reply[..len]).unwrap().kind(), Kind::Reply);
        crate::shutdown::blocked::wait_in(tid, &reads);
        stop.trigger();
        wake_all(&[clone]);
        done_rx.recv_timeout(Duration::from_secs(10)).expect("the stop ended the blocked read");
        thread.join().unwrap();
        let c = counters.snapshot();
        let dropped = c.malformed + c.foreign + c.bad_version + c.unexpected_kind + c.send_errors;
        assert_eq!((c.udp_probes, dropped), (1, 0), "the wake-up is not counted as a datagram");
    }
}
