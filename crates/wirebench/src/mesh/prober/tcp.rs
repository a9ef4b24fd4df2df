//! One kept-open TCP connection per peer for TCP probes (as `ping --proto tcp` does): a
//! non-blocking connect, probes written whole, replies framed by their header. A connection
//! the peer closed (an idle timeout, a restart) is opened again when the next probe is due,
//! and that probe waits for it, so a reconnect is not a loss; a connect that fails or takes
//! longer than the probe timeout loses the probe that waited.

use std::io::{ErrorKind, Read, Write as _};
use std::net::{SocketAddr, TcpStream};

use socket2::{Domain, Socket, Type};
use wirebench_core::wire::probe;

/// Largest read buffer (a few replies; anything longer is not a probe stream).
const MAX_RBUF: usize = 4096;

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

/// Reads what is there and hands every whole frame to `on_frame`; false when the
/// connection is finished (closed, reset, or not a probe stream). A read shorter than the
/// buffer took everything queued, so it ends the drain without another read to see
/// `WouldBlock` (one read per reply, not two; bytes that arrive later make the socket
/// readable again in the level-triggered ready set).
pub(super) fn read(stream: &mut impl Read, rbuf: &mut Vec<u8>, mut on_frame: impl FnMut(&[u8])) -> bool {
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => {
                rbuf.extend_from_slice(&chunk[..n]);
                loop {
                    if rbuf.len() < 8 {
                        break;
                    }
                    let mut h = [0u8; 8];
                    h.copy_from_slice(&rbuf[..8]);
                    let Ok(len) = probe::frame_len(&h) else { return false };
                    if len > MAX_RBUF {
                        return false;
                    }
                    if rbuf.len() < len {
                        break;
                    }
                    on_frame(&rbuf[..len]);
                    rbuf.drain(..len);
                }
                if rbuf.len() > MAX_RBUF {
                    return false;
                }
                if n < chunk.len() {
                    return true;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::{self, Read};

    use wirebench_core::wire::probe;

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
        assert!(super::read(&mut s, &mut rbuf, |got| {
            assert_eq!(got, &f[..]);
            frames += 1;
        }));
        assert_eq!((frames, s.calls), (2, 1), "both replies from one read, and no read to see WouldBlock");
    }

    #[test]
    fn a_full_read_reads_on_and_a_frame_split_across_reads_is_whole() {
        let f = frame();
        // 1,024 bytes (the whole buffer: more may be queued), then one more frame.
        let stream: Vec<u8> = f.iter().copied().cycle().take(17 * f.len()).collect();
        let mut s =
            Script { chunks: VecDeque::from([Ok(stream[..1024].to_vec()), Ok(stream[1024..].to_vec())]), calls: 0 };
        let (mut rbuf, mut frames) = (Vec::new(), 0);
        let mut count = |got: &[u8]| {
            assert_eq!(got, &f[..]);
            frames += 1;
        };
        assert!(super::read(&mut s, &mut rbuf, &mut count));
        assert_eq!((s.calls, rbuf.len()), (2, 0));
        // Half a frame, then the rest, in two drains.
        let mut half = Script { chunks: VecDeque::from([Ok(f[..32].to_vec())]), calls: 0 };
        assert!(super::read(&mut half, &mut rbuf, &mut count));
        assert_eq!(rbuf.len(), 32);
        let mut rest = Script { chunks: VecDeque::from([Ok(f[32..].to_vec())]), calls: 0 };
        assert!(super::read(&mut rest, &mut rbuf, &mut count));
        assert_eq!((frames, rbuf.len()), (18, 0));
        // A closed connection is finished.
        let mut closed = Script { chunks: VecDeque::from([Ok(Vec::new())]), calls: 0 };
        assert!(!super::read(&mut closed, &mut rbuf, |_| {}));
    }
}
