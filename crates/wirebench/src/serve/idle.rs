//! How a TCP connection's thread waits for its next frame without waking while idle: it
//! sleeps in one `ppoll` on its socket and on serve's stop descriptor, with the time left
//! before the connection's own timeout (first frame or idle) as the poll's timeout. An idle
//! connection then costs no wake-ups (a thread that woke every [`crate::shutdown::POLL`] to
//! look at the stop flag cost 10 a second each: 10,000 a second at 1,000 connections), and
//! the wait is still bounded by both the timeout and the stop signal.
//!
//! The stop descriptor is one end of a socket pair that becomes readable, for good, once one
//! byte is written to the other: [`Server::stop`](super::Server::stop) writes it, and so does
//! the acceptor as soon as it sees the stop flag (so a stop from Ctrl-C reaches every
//! connection within one poll interval of the acceptor, whoever joins serve).

use std::io::{self, Write as _};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;

/// Readable once serve stops.
#[derive(Debug)]
pub(crate) struct StopFd {
    read: UnixStream,
    write: UnixStream,
}

impl StopFd {
    pub(crate) fn new() -> io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        write.set_nonblocking(true)?;
        Ok(Self { read, write })
    }

    /// Wakes every waiter, now and later (the byte is never read). Idempotent: a full
    /// buffer (after thousands of calls) already wakes them.
    pub(crate) fn signal(&self) {
        let _ = (&self.write).write(&[1]);
    }
}

/// What a wait for a connection's next bytes found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// The socket has something: data, the peer's close, or an error (a read says which).
    Ready,
    /// Serve is stopping.
    Stop,
    /// Nothing within the timeout (or a signal interrupted the wait).
    Quiet,
}

/// Sleeps until `stream` has input, `stop` is signalled, or `timeout` passes.
pub(crate) fn wait(stream: &TcpStream, stop: &StopFd, timeout: Duration) -> Input {
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN), PollFd::new(stop.read.as_fd(), PollFlags::POLLIN)];
    match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => Input::Quiet,
        Ok(_) if fds[1].any().unwrap_or(false) => Input::Stop,
        // Ready, or poll itself failed (a read then reports the socket's state).
        Ok(_) | Err(_) => Input::Ready,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_wait_tells_input_stop_and_quiet_apart() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let stop = StopFd::new().unwrap();
        assert_eq!(wait(&s, &stop, Duration::ZERO), Input::Quiet);
        c.write_all(b"x").unwrap();
        assert_eq!(wait(&s, &stop, Duration::from_secs(10)), Input::Ready);
        // A stop wins over pending input, and stays signalled for every later wait.
        stop.signal();
        stop.signal();
        for _ in 0..3 {
            assert_eq!(wait(&s, &stop, Duration::from_secs(10)), Input::Stop);
        }
    }
}
