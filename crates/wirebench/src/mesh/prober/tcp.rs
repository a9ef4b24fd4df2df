//! One kept-open TCP connection per peer for TCP probes (as `ping --proto tcp` does): a
//! non-blocking connect, probes written whole, replies framed by their header. A connection
//! the peer closed (an idle timeout, a restart) is opened again when the next probe is due,
//! and that probe waits for it, so a reconnect is not a loss; a connect that fails or takes
//! longer than the probe timeout loses the probe that waited.

use std::io::{ErrorKind, Read, Write as _};
use std::net::{SocketAddr, TcpStream};

use socket2::{Domain, Socket, Type};
use wirebench_core::wire::probe;

/// Longest reply frame taken on a probe connection (a probe is 64 bytes; a peer that
/// declares more is not answering probes).
pub(super) const MAX_FRAME: usize = 4096;
/// Bytes read from one connection per wake-up: a peer streaming at line rate (hostile or
/// broken) is read in turns with every other socket and the send schedule, not drained
/// without end. The ready set is level-triggered, so what is left is reported again at once.
pub(super) const READ_PER_WAKE: usize = 16 << 10;
/// Bytes per read.
const CHUNK: usize = 1024;
/// The read buffer's capacity, which it never passes: a frame in progress (shorter than
/// [`MAX_FRAME`]) and one chunk.
pub(super) const RBUF_CAPACITY: usize = MAX_FRAME + CHUNK;

/// What a drain of a connection found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drain {
    /// Still open (and may have more to read at the next wake-up).
    Open,
    /// Closed or reset by the peer.
    Closed,
    /// Not a stream of probe replies (a bad header, or a frame longer than [`MAX_FRAME`]):
    /// dropped, and counted.
    NotProbes,
}

/// Where a connection is.
#[derive(Debug)]
pub(super) enum Conn {
    /// Not connected; may connect once the clock passes `retry_at`.
    Down {
        /// Earliest next attempt, monotonic ns.
        retry_at: u64,
    },
    /// Connect in progress since `since`.
    Connecting {
        /// The socket.
        stream: TcpStream,
        /// When it started.
        since: u64,
        /// A probe that waits for it: (seq).
        waiting: Option<u64>,
    },
    /// Connected.
    Up {
        /// The socket (in the ready set under the target's id).
        stream: TcpStream,
        /// Bytes read, not yet a whole reply.
        rbuf: Vec<u8>,
        /// Probes sent on this connection and not yet answered: a peer owes at most one
        /// reply per probe, so a frame past them means it is not answering probes.
        owed: u64,
    },
}

/// Starts a non-blocking connect.
pub(super) fn connect(to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)?;
    match s.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(nix::libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}

/// Whether a connecting socket finished: `Some(true)` connected, `Some(false)` failed,
/// `None` still going.
pub(super) fn finished(stream: &TcpStream) -> Option<bool> {
    match wirebench_net::ready::wait_writable(stream, std::time::Duration::ZERO) {
        Ok(false) => None,
        Ok(true) => Some(matches!(stream.take_error(), Ok(None)) && stream.peer_addr().is_ok()),
        Err(_) => Some(false),
    }
}

/// Writes one probe whole; false if the connection cannot take it (then it is closed).
pub(super) fn send(stream: &mut TcpStream, buf: &[u8]) -> bool {
    let mut off = 0;
    while off < buf.len() {
        match stream.write(&buf[off..]) {
            Ok(0) => return false,
            Ok(n) => off += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // 64 bytes do not fit: the peer has not read for a long time.
            Err(_) => return false,
        }
    }
    true
}

/// Reads what is there, at most [`READ_PER_WAKE`] bytes, and hands every whole frame to
/// `on_frame` with its arrival: `now()` read right after the read that completed it returned
/// (as `ping` stamps a reply, and as the agent's UDP replies are: a TCP read is a few
/// microseconds of the round trip, and stamped before it, TCP read a few percent short of
/// `ping`). A read shorter than the chunk took everything queued, so it ends the drain
/// without another read to see `WouldBlock` (one read per reply, not two; bytes that arrive
/// later make the socket readable again in the level-triggered ready set). `rbuf` holds only
/// a frame in progress: it stays within [`RBUF_CAPACITY`] (make it with that capacity and
/// it never grows).
pub(super) fn read(
    stream: &mut impl Read,
    rbuf: &mut Vec<u8>,
    mut now: impl FnMut() -> u64,
    mut on_frame: impl FnMut(&[u8], u64),
) -> Drain {
    let mut chunk = [0u8; CHUNK];
    let mut taken = 0;
    while taken < READ_PER_WAKE {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Drain::Closed,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Drain::Open,
            Err(_) => return Drain::Closed,
        };
        let at_ns = now();
        taken += n;
        rbuf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        while let Some(h) = rbuf.get(at..at + 8) {
            let mut header = [0u8; 8];
            header.copy_from_slice(h);
            let len = match probe::frame_len(&header) {
                Ok(len) if len <= MAX_FRAME => len,
                _ => return Drain::NotProbes,
            };
            let Some(frame) = rbuf.get(at..at + len) else { break };
            on_frame(frame, at_ns);
            at += len;
        }
        rbuf.drain(..at);
        if n < CHUNK {
            return Drain::Open;
        }
    }
    Drain::Open
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;
    use std::io::{self, Read};
    use std::rc::Rc;

    use wirebench_core::wire::probe;

    use super::{Drain, MAX_FRAME, RBUF_CAPACITY, READ_PER_WAKE};

    /// A socket's reads, scripted: each call takes the next chunk (or `WouldBlock`), counted.
    struct Script {
        chunks: VecDeque<io::Result<Vec<u8>>>,
        calls: usize,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls += 1;
            match self.chunks.pop_front() {
                Some(Ok(b)) => {
                    buf[..b.len()].copy_from_slice(&b);
                    Ok(b.len())
                }
                Some(Err(e)) => Err(e),
                None => Err(io::ErrorKind::WouldBlock.into()),
            }
        }
    }

    fn frame() -> Vec<u8> {
        let mut b = vec![0u8; super::super::PROBE_LEN];
        probe::init(&mut b, 7, 0);
        probe::stamp(&mut b, 1, 2);
        b
    }

    #[test]
    fn a_short_read_ends_the_drain_without_another_read() {
        let f = frame();
        let mut two = f.clone();
        two.extend_from_slice(&f);
        let mut s = Script { chunks: VecDeque::from([Ok(two)]), calls: 0 };
        let (mut rbuf, mut frames) = (Vec::new(), 0);
        let end = super::read(
            &mut s,
            &mut rbuf,
            || 0,
            |got, _| {
                assert_eq!(got, &f[..]);
                frames += 1;
            },
        );
        assert_eq!(end, Drain::Open);
        assert_eq!((frames, s.calls), (2, 1), "both replies from one read, and no read to see WouldBlock");
    }

    /// Each frame's arrival is the clock read right after the read that completed it (the
    /// script counts its reads, the clock says how many were done when it was read).
    #[test]
    fn a_frame_arrives_when_the_read_that_completed_it_returned() {
        let f = frame();
        let reads = Rc::new(Cell::new(0u64));
        let mut stream: Vec<u8> = f.iter().copied().cycle().take(17 * f.len()).collect();
        stream.extend_from_slice(&f[..10]);
        // 1,024 bytes (16 frames), then the 17th frame and 10 bytes, then the last 54.
        let mut s = Counted {
            inner: Script {
                chunks: VecDeque::from([Ok(stream[..1024].to_vec()), Ok(stream[1024..].to_vec())]),
                calls: 0,
            },
            reads: Rc::clone(&reads),
        };
        let (mut rbuf, mut at) = (Vec::new(), Vec::new());
        let r = Rc::clone(&reads);
        assert_eq!(super::read(&mut s, &mut rbuf, || r.get() * 1000, |_, t| at.push(t)), Drain::Open);
        let mut rest = Counted { inner: Script { chunks: VecDeque::from([Ok(f[10..].to_vec())]), calls: 0 }, reads };
        assert_eq!(super::read(&mut rest, &mut rbuf, || r.get() * 1000, |_, t| at.push(t)), Drain::Open);
        // Stamped before its read, each would read a thousand less.
        let mut want = vec![1000; 16];
        want.extend([2000, 3000]);
        assert_eq!(at, want);
    }

    /// A stream that counts every read into a shared cell.
    struct Counted {
        inner: Script,
        reads: Rc<Cell<u64>>,
    }

    impl Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads.set(self.reads.get() + 1);
            self.inner.read(buf)
        }
    }

    #[test]
    fn a_full_read_reads_on_and_a_frame_split_across_reads_is_whole() {
        let f = frame();
        // 1,024 bytes (the whole buffer: more may be queued), then one more frame.
        let stream: Vec<u8> = f.iter().copied().cycle().take(17 * f.len()).collect();
        let mut s =
            Script { chunks: VecDeque::from([Ok(stream[..1024].to_vec()), Ok(stream[1024..].to_vec())]), calls: 0 };
        let (mut rbuf, mut frames) = (Vec::new(), 0);
        let mut count = |got: &[u8], _| {
            assert_eq!(got, &f[..]);
            frames += 1;
        };
        assert_eq!(super::read(&mut s, &mut rbuf, || 0, &mut count), Drain::Open);
        assert_eq!((s.calls, rbuf.len()), (2, 0));
        // Half a frame, then the rest, in two drains.
        let mut half = Script { chunks: VecDeque::from([Ok(f[..32].to_vec())]), calls: 0 };
        assert_eq!(super::read(&mut half, &mut rbuf, || 0, &mut count), Drain::Open);
        assert_eq!(rbuf.len(), 32);
        let mut rest = Script { chunks: VecDeque::from([Ok(f[32..].to_vec())]), calls: 0 };
        assert_eq!(super::read(&mut rest, &mut rbuf, || 0, &mut count), Drain::Open);
        assert_eq!((frames, rbuf.len()), (18, 0));
        // A closed connection is finished.
        let mut closed = Script { chunks: VecDeque::from([Ok(Vec::new())]), calls: 0 };
        assert_eq!(super::read(&mut closed, &mut rbuf, || 0, |_, _| {}), Drain::Closed);
    }

    /// A peer streaming replies without end: every read fills the buffer (a 1 MiB guard
    /// fails the test instead of reading for ever).
    struct Endless {
        frame: Vec<u8>,
        at: usize,
        bytes: usize,
        calls: usize,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            assert!(self.bytes < 1 << 20, "1 MiB read in one wake-up: the drain does not end");
            for b in buf.iter_mut() {
                *b = self.frame[self.at];
                self.at = (self.at + 1) % self.frame.len();
            }
            self.bytes += buf.len();
            self.calls += 1;
            Ok(buf.len())
        }
    }

    #[test]
    fn a_peer_streaming_without_end_is_read_16_kib_per_wake_up_in_a_buffer_that_never_grows() {
        let f = frame();
        let mut peer = Endless { frame: f.clone(), at: 0, bytes: 0, calls: 0 };
        let mut rbuf = Vec::with_capacity(RBUF_CAPACITY);
        let mut frames = Vec::new();
        for wake in 1..=3 {
            frames.clear();
            assert_eq!(super::read(&mut peer, &mut rbuf, || 0, |got, _| frames.extend_from_slice(got)), Drain::Open);
            assert_eq!(peer.bytes, wake * READ_PER_WAKE, "16 KiB per wake-up, then the next wait");
            assert_eq!(frames.len(), READ_PER_WAKE, "every byte read became a whole frame");
            assert!(frames.chunks(f.len()).all(|c| c == &f[..]));
            assert_eq!(rbuf.capacity(), RBUF_CAPACITY, "the read buffer never grows");
        }
        assert_eq!(peer.calls, 3 * READ_PER_WAKE / 1024);
        // 100-byte frames: one in progress at the end of most reads, still within the buffer.
        let mut odd = vec![0u8; 100];
        probe::init(&mut odd, 7, 0);
        let mut peer = Endless { frame: odd, at: 0, bytes: 0, calls: 0 };
        rbuf.clear();
        for _ in 0..3 {
            assert_eq!(super::read(&mut peer, &mut rbuf, || 0, |_, _| {}), Drain::Open);
            assert!(!rbuf.is_empty() && rbuf.len() < 100);
            assert_eq!(rbuf.capacity(), RBUF_CAPACITY);
        }
    }

    #[test]
    fn garbage_or_an_oversized_frame_is_not_a_probe_stream() {
        let mut rbuf = Vec::with_capacity(RBUF_CAPACITY);
        let mut garbage = Script { chunks: VecDeque::from([Ok(vec![0x55; 1024])]), calls: 0 };
        assert_eq!(super::read(&mut garbage, &mut rbuf, || 0, |_, _| panic!("no frame")), Drain::NotProbes);
        // A well-formed header declaring 5,000 bytes: refused at its header, not buffered.
        let mut big = frame();
        big[4..6].copy_from_slice(&5000u16.to_be_bytes());
        rbuf.clear();
        let mut s = Script { chunks: VecDeque::from([Ok(big)]), calls: 0 };
        assert_eq!(super::read(&mut s, &mut rbuf, || 0, |_, _| panic!("no frame")), Drain::NotProbes);
        assert_eq!(rbuf.capacity(), RBUF_CAPACITY);
        // The largest frame taken, 4,096 bytes a byte at a time: buffered, then whole.
        let mut most = vec![0u8; MAX_FRAME];
        probe::init(&mut most, 7, 0);
        most[4..6].copy_from_slice(&u16::try_from(MAX_FRAME).unwrap().to_be_bytes());
        rbuf.clear();
        let mut got = 0;
        for b in &most {
            let mut s = Script { chunks: VecDeque::from([Ok(vec![*b])]), calls: 0 };
            assert_eq!(super::read(&mut s, &mut rbuf, || 0, |fr, _| got += fr.len()), Drain::Open);
        }
        assert_eq!((got, rbuf.len(), rbuf.capacity()), (MAX_FRAME, 0, RBUF_CAPACITY));
    }
}
