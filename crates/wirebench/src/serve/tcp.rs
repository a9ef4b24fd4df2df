//! The TCP side: an acceptor and one echo thread per connection. Probes are frames framed
//! by the length in their header; a stream that is not ours is counted and closed.
//!
//! Bounded everywhere: a new connection's first frame must arrive within the first-frame
//! timeout, a probe connection with no frame for the idle timeout is closed (a partial frame
//! does not count as activity, so slowloris dribbles time out too), a reply the client does
//! not read for [`crate::control::FRAME_WITHIN`] closes the connection, and every wait ends
//! at the stop signal: a connection waiting for its next frame sleeps in one `ppoll` on its
//! socket and the stop descriptor until its own timeout ([`crate::shutdown::Shutdown::wait_input`]: no
//! wake-ups while idle; a thread that woke every [`POLL`] to look at the stop flag cost 10 a
//! second each, 10,000 a second at 1,000 connections),
//! a write blocked on a client that does not read wakes within [`POLL`] to look at the stop
//! flag.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown as Half, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use wirebench_core::wire::Kind;
use wirebench_core::wire::control::Control;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::{self, Probe};
use wirebench_net::clock::wall_now_ns;

use super::spin::Spinner;
use super::{Counters, Shared};
use crate::control::FRAME_WITHIN;
use crate::shutdown::{Input, POLL};

pub(super) struct Acceptor {
    pub(super) listener: TcpListener,
    pub(super) shared: Arc<Shared>,
    pub(super) max: u64,
    pub(super) per_source: u64,
    /// Sources the reserve is kept for ([`crate::accept::Known`]), and its size.
    pub(super) known: Option<(crate::accept::Known, u64)>,
}

impl Acceptor {
    pub(super) fn run(self) {
        let Self { listener, shared, max, per_source, known } = self;
        let reserve = known.as_ref().map_or(0, |k| k.1);
        // Refused connections linger a moment (at most LINGER of them), so the refusal is
        // read before the close: closing at once can reset the connection under the
        // client's probe and take the reason with it.
        let lingering: RefCell<VecDeque<(TcpStream, Instant)>> = RefCell::new(VecDeque::new());
        let refuse = |s: TcpStream, full: crate::accept::Full| {
            Counters::bump(&shared.counters.refused_connections);
            let mut lingering = lingering.borrow_mut();
            lingering.retain(|(s, t)| {
                let young = t.elapsed() < LINGER_FOR;
                if !young {
                    drain(s);
                }
                young
            });
            if lingering.len() >= LINGER {
                lingering.pop_front();
            }
            let why = match full {
                crate::accept::Full::All => {
                    format!("serve is at its connection limit ({max} at once): try again later")
                }
                crate::accept::Full::Strangers => format!(
                    "serve is at its limit for connections from outside its fleet ({} of {max}): try again later",
                    max - reserve
                ),
                crate::accept::Full::Source(ip) => {
                    format!("{ip} already has {per_source} connections to this serve (its share): try again later")
                }
            };
            refuse(&s, &why);
            lingering.push_back((s, Instant::now()));
        };
        let on_error = || {
            Counters::bump(&shared.counters.accept_errors);
            // Out of descriptors: the lingering refusals go first.
            lingering.borrow_mut().clear();
        };
        // The UDP threads block in their reads with no timeout: wake them (whoever triggered
        // the stop, this thread sees it at once on the stop descriptor).
        let on_stop = || super::udp::wake_all(&shared.udp_sockets);
        crate::accept::run_with(
            &listener,
            &shared.shutdown,
            "serve-tcp-conn",
            crate::accept::Limits { max, per_source, reserve },
            known.as_ref().map(|k| &k.0),
            refuse,
            on_error,
            on_stop,
            |stream| {
                shared.counters.tcp_connections.fetch_add(1, Ordering::Relaxed);
                let c = Conn { stream, shared: shared.clone() };
                Box::new(move || c.run())
            },
        );
    }
}

/// Refused connections held open at once, to be read before they close.
const LINGER: usize = 256;
/// For this long.
const LINGER_FOR: std::time::Duration = std::time::Duration::from_millis(200);

/// Tells a client why it was turned away (a control `error` frame, which `ping` and
/// `stream` print), without waiting on it.
pub(super) fn refuse(mut s: &TcpStream, why: &str) {
    let _ = s.set_nonblocking(true);
    if let Ok(f) = crate::control::encode(&Control::Error { message: why.into() }) {
        let _ = s.write(&f);
    }
    let _ = s.shutdown(Half::Write);
    drain(s);
}

/// Reads (a little of) what the client sent, so a close does not reset the connection and
/// discard the refusal before the client read it. True: done with it.
fn drain(mut s: &TcpStream) -> bool {
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match s.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

struct Conn {
    stream: TcpStream,
    shared: Arc<Shared>,
}

/// What the frames read so far ask for.
enum Frames {
    /// Answered; more to read.
    More,
    /// The connection closes.
    Close,
    /// A stream session's first bytes: the connection is handed over with them.
    Session(Vec<u8>),
}

impl Conn {
    fn run(mut self) {
        let cfg = &self.shared.cfg;
        if let Some(c) = cfg.cpu {
            let _ = wirebench_net::pin::pin_current_thread(c);
        }
        let spin = cfg.spin;
        let setup =
            self.stream.set_nodelay(true).and_then(|()| self.stream.set_write_timeout(Some(POLL))).and_then(|()| {
                if spin { self.stream.set_nonblocking(true) } else { self.stream.set_read_timeout(Some(POLL)) }
            });
        if setup.is_err() {
            return;
        }
        let (first_within, idle_for) = (cfg.first_frame_timeout, cfg.idle_timeout);
        // Two of the largest frames: a partial frame (< MAX_LEN) moved to the front always
        // leaves room for a whole one. 128 KiB a connection, touched only as frames arrive.
        let mut buf = vec![0u8; 2 * probe::MAX_LEN];
        let (mut start, mut end) = (0usize, 0usize);
        let mut spinner = Spinner::new();
        let mut first = true;
        let mut last_frame = Instant::now();
        while !self.shared.shutdown.is_set() {
            if !spin {
                // Sleep until input, the stop, or this connection's own timeout: no wake-ups
                // while idle. (The socket's read timeout stays as a backstop.)
                let limit = if first { first_within } else { idle_for };
                match self.shared.shutdown.wait_input(&self.stream, Some(limit.saturating_sub(last_frame.elapsed()))) {
                    Input::Ready => {}
                    Input::Stop => return,
                    Input::Quiet => {
                        if last_frame.elapsed() >= limit {
                            Counters::bump(&self.shared.counters.timed_out);
                            return;
                        }
                        continue;
                    }
                }
            }
            match self.stream.read(&mut buf[end..]) {
                Ok(0) => return,
                Ok(n) => {
                    let t2 = wall_now_ns();
                    end += n;
                    match self.answer_whole(&mut buf, (&mut start, end), &mut first, t2, &mut last_frame) {
                        Frames::More => {}
                        Frames::Close => return,
                        Frames::Session(prefix) => {
                            // A stream session, not probes: hand the connection over.
                            let _ = self.stream.set_nonblocking(false);
                            drop(buf);
                            return super::session::handle(self.stream, &prefix, &self.shared);
                        }
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
                    let waited = last_frame.elapsed();
                    if waited > if first { first_within } else { idle_for } {
                        Counters::bump(&self.shared.counters.timed_out);
                        return;
                    }
                    if spin {
                        spinner.on_empty(&self.stream, &self.shared.shutdown);
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Answers every whole frame in `buf[start..end]` (read at `t2`), moving `start` past
    /// them; a first frame that is a control message is a stream session's.
    fn answer_whole(
        &mut self,
        buf: &mut [u8],
        (start, end): (&mut usize, usize),
        first: &mut bool,
        t2: u64,
        last_frame: &mut Instant,
    ) -> Frames {
        loop {
            if end - *start < 8 {
                return Frames::More;
            }
            let mut h = [0u8; 8];
            h.copy_from_slice(&buf[*start..*start + 8]);
            if *first && h[3] == Kind::Control as u8 {
                return Frames::Session(buf[*start..end].to_vec());
            }
            *first = false;
            let len = match probe::frame_len(&h) {
                Ok(l) => l,
                Err(e) => {
                    self.shared.counters.rejected(e);
                    return Frames::Close;
                }
            };
            if end - *start < len {
                return Frames::More;
            }
            if !self.answer(&mut buf[*start..*start + len], t2) {
                return Frames::Close;
            }
            *last_frame = Instant::now();
            *start += len;
        }
    }

    /// Answers one frame; false if the connection must close.
    fn answer(&mut self, frame: &mut [u8], t2: u64) -> bool {
        let counters = &self.shared.counters;
        let p = match Probe::parse(frame) {
            Ok(p) => p,
            Err(e) => {
                counters.rejected(e);
                return false;
            }
        };
        if p.kind() != Kind::Probe {
            counters.unexpected_kind.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if let Some(key) = &self.shared.cfg.probe_key
            && !wire_mesh::verify_probe(key, frame)
        {
            // A connection that sends forged probes is closed.
            counters.unauthenticated.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        probe::make_reply(frame, t2, wall_now_ns);
        if let Some(key) = &self.shared.cfg.probe_key {
            wire_mesh::sign_reply(key, frame);
        }
        let mut off = 0;
        let mut last = Instant::now();
        while off < frame.len() {
            match self.stream.write(&frame[off..]) {
                Ok(0) => return false,
                Ok(n) => {
                    off += n;
                    last = Instant::now();
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    // A client that does not read its replies: give up after a stall, or at stop.
                    if self.shared.shutdown.is_set() {
                        return false;
                    }
                    if last.elapsed() > FRAME_WITHIN {
                        Counters::bump(&counters.timed_out);
                        return false;
                    }
                    std::hint::spin_loop();
                }
                Err(_) => {
                    counters.send_errors.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
        }
        counters.tcp_probes.fetch_add(1, Ordering::Relaxed);
        true
    }
}
