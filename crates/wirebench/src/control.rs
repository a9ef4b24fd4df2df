//! Control frames on a TCP connection: send and receive one `Control` message
//! (`wirebench_core::wire::control` has the format and does every check).
//!
//! Every read of a frame is bounded: once its first byte has arrived, the rest must arrive
//! within [`FRAME_WITHIN`] (or the caller's bound), and a stop flag ends the wait within one
//! socket timeout. A body is read as it arrives, so a header that declares 64 KiB and sends
//! 8 bytes holds 8 bytes, not 64 KiB.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wirebench_core::wire::control::{self, Control};

/// How long the rest of a frame may take once its first byte arrived.
pub const FRAME_WITHIN: Duration = Duration::from_secs(5);
/// Bytes read from the socket at a time for a body.
const CHUNK: usize = 4096;

/// How a frame is read.
#[derive(Debug, Clone, Copy)]
pub struct Bounds<'a> {
    /// Largest body accepted.
    pub max_body: usize,
    /// The whole frame must have arrived by then (once its first byte did).
    pub within: Duration,
    /// Set: give up (within one socket read timeout).
    pub stop: Option<&'a AtomicBool>,
}

impl Default for Bounds<'_> {
    fn default() -> Self {
        Self { max_body: control::MAX_BODY, within: FRAME_WITHIN, stop: None }
    }
}

/// The bytes of one frame.
pub fn encode(msg: &Control) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > control::MAX_BODY {
        return Err(io::Error::new(ErrorKind::InvalidInput, "control message too large"));
    }
    let mut frame = Vec::with_capacity(control::HEADER_LEN + body.len());
    frame.extend_from_slice(&control::header(body.len()));
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Sends one message (blocking; a socket write timeout surfaces as an error).
pub fn send(conn: &mut TcpStream, msg: &Control) -> io::Result<()> {
    conn.write_all(&encode(msg)?)
}

/// Sends one message on a socket that has a write timeout, riding out timeouts until the
/// peer has not taken a byte for `stall`, or `stop` is set (a client that never reads cannot
/// hold the sender).
pub fn send_bounded(conn: &mut TcpStream, msg: &Control, stop: &AtomicBool, stall: Duration) -> io::Result<()> {
    write_bounded(conn, &encode(msg)?, stop, stall)
}

/// `write_all` that gives up once the peer took nothing for `stall` or `stop` is set.
pub fn write_bounded(conn: &mut TcpStream, mut buf: &[u8], stop: &AtomicBool, stall: Duration) -> io::Result<()> {
    let mut last = Instant::now();
    while !buf.is_empty() {
        match conn.write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                last = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                if stop.load(Ordering::Relaxed) {
                    return Err(io::Error::new(ErrorKind::Interrupted, "stopped"));
                }
                if last.elapsed() > stall {
                    return Err(io::Error::new(ErrorKind::TimedOut, "the peer stopped reading"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads one whole message. A read timeout on the socket surfaces as `WouldBlock` or
/// `TimedOut` only when no byte of the frame had arrived yet; once one has, the rest must
/// come within [`FRAME_WITHIN`].
pub fn recv(conn: &mut TcpStream) -> io::Result<Control> {
    recv_with(conn, &[], &Bounds::default())
}

/// Reads one message whose first bytes (`prefix`, possibly none) were already read.
pub fn recv_after(prefix: &[u8], conn: &mut TcpStream) -> io::Result<Control> {
    recv_with(conn, prefix, &Bounds::default())
}

/// Reads one message within `b`; `prefix` holds bytes of it already read.
pub fn recv_with(conn: &mut TcpStream, prefix: &[u8], b: &Bounds<'_>) -> io::Result<Control> {
    let mut h = [0u8; control::HEADER_LEN];
    let mut have = prefix.len().min(control::HEADER_LEN);
    h[..have].copy_from_slice(&prefix[..have]);
    if have == 0 {
        match conn.read(&mut h[..1]) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            // A stop signal (SIGSTOP then SIGCONT: a debugger, a paused host) makes a read
            // with a timeout fail with EINTR even without a handler (signal(7)). Nothing was
            // read: it is a timeout like any other, not the end of the session.
            Err(e) if e.kind() == ErrorKind::Interrupted => return Err(ErrorKind::TimedOut.into()),
            Err(e) => return Err(e),
        }
        have = 1;
    }
    let deadline = Instant::now() + b.within;
    read_rest(conn, &mut h[have..], deadline, b.stop)?;
    let len = control::body_len(&h, b.max_body).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
    let mut body = Vec::with_capacity(len.min(CHUNK));
    let already = prefix.get(control::HEADER_LEN..).unwrap_or_default();
    body.extend_from_slice(&already[..already.len().min(len)]);
    let mut chunk = [0u8; CHUNK];
    while body.len() < len {
        let want = (len - body.len()).min(CHUNK);
        read_rest(conn, &mut chunk[..want], deadline, b.stop)?;
        body.extend_from_slice(&chunk[..want]);
    }
    control::decode(&body).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))
}

/// `read_exact` that rides out read timeouts until `deadline` or `stop`.
fn read_rest(conn: &mut TcpStream, mut buf: &mut [u8], deadline: Instant, stop: Option<&AtomicBool>) -> io::Result<()> {
    while !buf.is_empty() {
        match conn.read(buf) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                    return Err(io::Error::new(ErrorKind::Interrupted, "stopped"));
                }
                if Instant::now() >= deadline {
                    return Err(io::Error::new(ErrorKind::InvalidData, "a control frame stalled part-way"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// True for the errors a read timeout gives.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}
