//! TCP probe transport: probes are frames on one connection (`TCP_NODELAY`), framed by the
//! length in their header.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use wirebench_core::units::nanos;

use wirebench_core::wire::Kind;
use wirebench_core::wire::control::{self, Control};
use wirebench_core::wire::probe;

use crate::clock::{Clock, MonoClock};
use crate::io::{ProbeIo, Received};
use crate::udp::Wait;
use crate::{NetError, wait};

/// A pinger's TCP connection.
#[derive(Debug)]
pub struct TcpProbeIo {
    stream: TcpStream,
    peer: SocketAddr,
    wait: Wait,
    timeout_ns: u64,
    clock: MonoClock,
    /// How long before a deadline a blocking wait stops sleeping.
    lead: wait::Lead,
    /// Bytes read but not yet returned; `buf[start..end]`.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl TcpProbeIo {
    /// Connects to `target` within `timeout`.
    pub fn connect(target: SocketAddr, wait: Wait, timeout: Duration) -> Result<Self, NetError> {
        let stream = TcpStream::connect_timeout(&target, timeout.max(Duration::from_millis(1)))
            .map_err(|source| NetError::Connect { addr: target, source })?;
        Self::from_stream(stream, wait, timeout)
    }

    /// The kernel's view of the connection now (`TCP_INFO`; `None` if it refuses).
    pub fn tcp_stats(&self) -> Option<crate::tcpinfo::TcpStats> {
        crate::tcpinfo::stats(&self.stream)
    }

    /// Wraps a connected stream.
    pub fn from_stream(stream: TcpStream, wait: Wait, timeout: Duration) -> Result<Self, NetError> {
        let opt = |what, r: io::Result<()>| r.map_err(|source| NetError::Option { what, source });
        opt("TCP_NODELAY", stream.set_nodelay(true))?;
        match wait {
            Wait::Spin => opt("O_NONBLOCK", stream.set_nonblocking(true))?,
            Wait::Block => opt("SO_RCVTIMEO", stream.set_read_timeout(Some(timeout.max(Duration::from_micros(1)))))?,
        }
        let peer = stream.peer_addr().map_err(|source| NetError::Option { what: "getpeername", source })?;
        Ok(Self {
            stream,
            peer,
            wait,
            timeout_ns: nanos(timeout),
            clock: MonoClock::default(),
            lead: wait::Lead::default(),
            buf: vec![0; 2 * probe::MAX_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
        })
    }

    /// A whole frame at the front of the buffer, if one is there.
    fn frame(&self) -> io::Result<Option<usize>> {
        let have = self.end - self.start;
        if have < 8 {
            return Ok(None);
        }
        let mut h = [0u8; 8];
        h.copy_from_slice(&self.buf[self.start..self.start + 8]);
        if h[3] == Kind::Control as u8 {
            return self.refusal(h);
        }
        let len = probe::frame_len(&h).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
        Ok((have >= len).then_some(len))
    }
}

impl TcpProbeIo {
    /// A control frame where a reply was due: serve turned this connection away (at its
    /// connection limit, say) and said why in an `error` message. Wait for the whole frame,
    /// then give the reason as the error.
    fn refusal(&self, h: [u8; 8]) -> io::Result<Option<usize>> {
        let len =
            control::body_len(&h, control::MAX_FIRST_BODY).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
        let body = &self.buf[self.start + 8..self.end];
        if body.len() < len {
            return Ok(None);
        }
        let why = match control::decode(&body[..len]) {
            Ok(Control::Error { message }) => message,
            _ => "a control frame instead of a reply".into(),
        };
        // Not `ConnectionRefused`: that reads as "nobody listens", and the reason would be lost.
        Err(io::Error::other(format!("serve refused the connection: {why}")))
    }
}

impl ProbeIo for TcpProbeIo {
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut off = 0;
        while off < buf.len() {
            match self.stream.write(&buf[off..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {
                    std::hint::spin_loop();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn recv_until(&mut self, out: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        loop {
            if let Some(len) = self.frame()? {
                let n = len.min(out.len());
                out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
                self.start += len;
                return Ok(Some(Received { len: n, from: self.peer, at_ns: self.clock.now_ns(), kernel: None }));
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let now = self.clock.now_ns();
            if !wait::before_read(
                &self.stream,
                self.wait,
                (&self.clock, now),
                (deadline_ns, self.timeout_ns),
                &mut self.lead,
            )? {
                return Ok(None);
            }
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.end += n,
                Err(e) => {
                    if wait::after_failed_read(e, self.wait, now, deadline_ns)? {
                        return Ok(None);
                    }
                }
            }
        }
    }
}
