//! The TCP side: an acceptor and one echo thread per connection. Probes are frames framed
//! by the length in their header; a stream that is not ours is counted and closed.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wirebench_core::wire::Kind;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::{self, Probe};
use wirebench_net::clock::wall_now_ns;

use super::spin::Spinner;
use super::{Config, Counters, MAX_TCP_CONNECTIONS};
use crate::shutdown::{POLL, Shutdown};

pub(super) struct Acceptor {
    pub(super) listener: TcpListener,
    pub(super) cfg: Config,
    pub(super) counters: Arc<Counters>,
    pub(super) shutdown: Shutdown,
}

impl Acceptor {
    pub(super) fn run(self) {
        let Self { listener, cfg, counters, shutdown } = self;
        // Over the cap: dropping the stream closes it.
        crate::accept::run(&listener, &shutdown, "serve-tcp-conn", MAX_TCP_CONNECTIONS, drop, |stream| {
            counters.tcp_connections.fetch_add(1, Ordering::Relaxed);
            let c = Conn { stream, cfg: cfg.clone(), counters: counters.clone(), shutdown: shutdown.clone() };
            Box::new(move || c.run())
        });
    }
}

struct Conn {
    stream: TcpStream,
    cfg: Config,
    counters: Arc<Counters>,
    shutdown: Shutdown,
}

impl Conn {
    fn run(mut self) {
        if let Some(c) = self.cfg.cpu {
            let _ = wirebench_net::pin::pin_current_thread(c);
        }
        let spin = self.cfg.spin;
        let setup = self.stream.set_nodelay(true).and_then(|()| {
            if spin { self.stream.set_nonblocking(true) } else { self.stream.set_read_timeout(Some(POLL)) }
        });
        if setup.is_err() {
            return;
        }
        let mut buf = vec![0u8; 4 * probe::MAX_LEN];
        let (mut start, mut end) = (0usize, 0usize);
        let mut spinner = Spinner::new();
        let mut first = true;
        while !self.shutdown.is_set() {
            match self.stream.read(&mut buf[end..]) {
                Ok(0) => return,
                Ok(n) => {
                    let t2 = wall_now_ns();
                    end += n;
                    // Answer every whole frame in the buffer.
                    loop {
                        if end - start < 8 {
                            break;
                        }
                        let mut h = [0u8; 8];
                        h.copy_from_slice(&buf[start..start + 8]);
                        if first && h[3] == Kind::Control as u8 {
                            // A stream session, not probes: hand the connection over.
                            let _ = self.stream.set_nonblocking(false);
                            let prefix = buf[start..end].to_vec();
                            return super::stream::handle(
                                self.stream,
                                &prefix,
                                &self.cfg,
                                &self.counters,
                                &self.shutdown,
                            );
                        }
                        first = false;
                        let len = match probe::frame_len(&h) {
                            Ok(l) => l,
                            Err(e) => return self.counters.rejected(e),
                        };
                        if end - start < len {
                            break;
                        }
                        if !self.answer(&mut buf[start..start + len], t2) {
                            return;
                        }
                        start += len;
                    }
                    if start == end {
                        (start, end) = (0, 0);
                    } else if buf.len() - end < probe::MAX_LEN {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                    }
                    spinner.on_traffic();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if spin {
                        spinner.on_empty(&self.stream);
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Answers one frame; false if the connection must close.
    fn answer(&mut self, frame: &mut [u8], t2: u64) -> bool {
        let p = match Probe::parse(frame) {
            Ok(p) => p,
            Err(e) => {
                self.counters.rejected(e);
                return false;
            }
        };
        if p.kind() != Kind::Probe {
            self.counters.unexpected_kind.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if let Some(key) = &self.cfg.probe_key
            && !wire_mesh::verify_probe(key, frame)
        {
            // A connection that sends forged probes is closed.
            self.counters.unauthenticated.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        probe::make_reply(frame, t2, wall_now_ns);
        if let Some(key) = &self.cfg.probe_key {
            wire_mesh::sign_reply(key, frame);
        }
        let mut off = 0;
        while off < frame.len() {
            match self.stream.write(&frame[off..]) {
                Ok(0) => return false,
                Ok(n) => off += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => std::hint::spin_loop(),
                Err(_) => {
                    self.counters.send_errors.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
        }
        self.counters.tcp_probes.fetch_add(1, Ordering::Relaxed);
        true
    }
}
