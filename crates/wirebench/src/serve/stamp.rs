//! The STAMP reflector (RFC 8762, RFC 8972 §3-4): `serve --stamp` and the mesh agent's
//! `--stamp` (flags in [`crate::stamp`]) answer the standard's test packets, so routers' and
//! other tools' session-senders (TWAMP-Light included) can measure to this host.
//!
//! Per packet: the receive time T2 is the kernel's RX timestamp when the socket gives one
//! (else the time the read returned), the sender's TTL comes from `IP_RECVTTL`, the source
//! is checked against the allow-list and its rate cap, an authenticated packet's HMAC is
//! checked, and the reply (as long as the request, never longer) is written with T3 read
//! last, just before the send. Replies leave with TTL 255. The error estimate's S bit and
//! error come from the kernel's view of the wall clock (`adjtimex`), refreshed every 10 s.
//! Everything dropped is counted by cause in serve's counters.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;
use wirebench_core::units::nanos;

use wirebench_core::reflect::{Admission, Admit, SeqBook};
use wirebench_core::wire::stamp::{self, Reject, TsFormat};
use wirebench_net::clock::wall_now_ns;
use wirebench_net::stamp as kstamp;

use super::Counters;
use super::spin::Spinner;
use crate::shutdown::Shutdown;
use crate::stamp::{StampConfig, own_error};

/// The wall clock's state is read again after this long.
const SYNC_REFRESH_NS: u64 = 10_000_000_000;

/// Counters of the reflector, in serve's [`Counters`].
fn count(c: &AtomicU64) {
    Counters::bump(c);
}

/// One reflector thread on its socket.
pub(super) struct Reflector {
    pub(super) sock: UdpSocket,
    pub(super) cfg: StampConfig,
    pub(super) spin: bool,
    pub(super) timestamps: bool,
    pub(super) counters: Arc<Counters>,
    pub(super) shutdown: Shutdown,
}

/// Binds the reflector's socket: replies leave with TTL 255, and each datagram's TTL is
/// read.
pub(super) fn bind(cfg: &StampConfig) -> anyhow::Result<UdpSocket> {
    use anyhow::Context as _;
    let sock =
        UdpSocket::bind(cfg.addr).with_context(|| format!("cannot bind the STAMP reflector to udp {}", cfg.addr))?;
    sock.set_ttl(255)?;
    kstamp::enable_ttl(&sock, cfg.addr.is_ipv6())?;
    wirebench_net::batch::size_buffers(&sock, super::PROBE_RCVBUF);
    Ok(sock)
}

impl Reflector {
    pub(super) fn run(self) {
        let ok = if self.spin { self.sock.set_nonblocking(true) } else { self.sock.set_read_timeout(None) };
        if ok.is_err() {
            return;
        }
        let kernel_rx = self.timestamps && kstamp::enable(&self.sock, false).is_ok();
        let mut rx = kstamp::Receiver::default();
        let mut req = vec![0u8; stamp::MAX_LEN + 1];
        let mut out = vec![0u8; stamp::MAX_LEN + 1];
        let mut admission = Admission::new(self.cfg.allow.clone(), self.cfg.max_rate);
        let mut book = SeqBook::default();
        let mut spinner = Spinner::new();
        let origin = Instant::now();
        let mut refl =
            stamp::Reflector { key: self.cfg.key.clone(), format: self.cfg.format, error: own_error(TsFormat::Ntp) };
        let mut refreshed = 0u64;
        while !self.shutdown.is_set() {
            let got = rx.recv(&self.sock, &mut req);
            let r = match got {
                Ok(r) if r.len == 0 && self.shutdown.is_set() => break,
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::WouldBlock && self.spin => {
                    spinner.on_empty(&self.sock, &self.shutdown);
                    continue;
                }
                Err(_) => continue,
            };
            spinner.on_traffic();
            let Some(from) = r.from else { continue };
            let t2 = r.at.sw_ns.filter(|_| kernel_rx).unwrap_or_else(wall_now_ns);
            let now = nanos(origin.elapsed());
            if now.saturating_sub(refreshed) > SYNC_REFRESH_NS {
                refl.error = own_error(TsFormat::Ntp);
                refreshed = now;
            }
            let c = &self.counters;
            match admission.admit(from.ip(), now) {
                Admit::Yes => {}
                Admit::NotAllowed => {
                    count(&c.stamp_not_allowed);
                    continue;
                }
                Admit::OverRate => {
                    count(&c.stamp_over_rate);
                    continue;
                }
            }
            let tp = match refl.check(&req[..r.len]) {
                Ok(tp) => tp,
                Err(Reject::Auth) => {
                    count(&c.stamp_auth_failures);
                    continue;
                }
                Err(_) => {
                    count(&c.stamp_malformed);
                    continue;
                }
            };
            let seq = if self.cfg.stateful {
                let Some(s) = book.next(from, tp.ssid, now) else {
                    count(&c.stamp_sessions_full);
                    continue;
                };
                s
            } else {
                tp.seq
            };
            // No TTL from the kernel (it always gives one once asked): 0, which no real
            // packet arrives with.
            let ttl = r.ttl.unwrap_or(0);
            let Some(n) = refl.reflect(&req[..r.len], &mut out, seq, t2, ttl, wall_now_ns) else { continue };
            match self.sock.send_to(&out[..n], from) {
                Ok(_) => count(&c.stamp_reflected),
                Err(_) => count(&c.send_errors),
            }
        }
    }
}
