//! Readiness of many sockets at once (the proxy's flows): epoll, level-triggered. epoll's
//! own timeout is in milliseconds, so a sleep waits in `ppoll` on the epoll descriptor
//! (nanosecond resolution) and then collects the ready set without blocking.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::time::TimeSpec;

/// A set of descriptors, each with a caller-chosen token.
#[derive(Debug)]
pub struct ReadySet {
    epoll: Epoll,
    events: Vec<EpollEvent>,
}

impl ReadySet {
    /// An empty set that reports up to `batch` ready descriptors per wait.
    pub fn new(batch: usize) -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        Ok(Self { epoll, events: vec![EpollEvent::empty(); batch.max(1)] })
    }

    /// Watches `fd` for readability under `token`.
    pub fn add(&self, fd: &impl AsFd, token: u64) -> io::Result<()> {
        Ok(self.epoll.add(fd.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, token))?)
    }

    /// Watches `fd` for writability under `token` (a connect in progress: ready when it
    /// finished, either way; errors and hang-ups are always reported).
    pub fn add_writable(&self, fd: &impl AsFd, token: u64) -> io::Result<()> {
        Ok(self.epoll.add(fd.as_fd(), EpollEvent::new(EpollFlags::EPOLLOUT, token))?)
    }

    /// Watches a descriptor already in the set for readability instead.
    pub fn set_readable(&self, fd: &impl AsFd, token: u64) -> io::Result<()> {
        let mut ev = EpollEvent::new(EpollFlags::EPOLLIN, token);
        Ok(self.epoll.modify(fd.as_fd(), &mut ev)?)
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: &impl AsFd) -> io::Result<()> {
        Ok(self.epoll.delete(fd.as_fd())?)
    }

    /// Waits up to `timeout_ns` (0: only look) for any descriptor to be readable and puts
    /// the ready tokens in `ready` (cleared first; its capacity is reused).
    pub fn wait(&mut self, timeout_ns: u64, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        if timeout_ns > 0 && !crate::wait::readable(&self.epoll.0, timeout_ns)? {
            return Ok(());
        }
        let n = match self.epoll.wait(&mut self.events, EpollTimeout::ZERO) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        ready.extend(self.events[..n].iter().map(EpollEvent::data));
        Ok(())
    }
}

/// Waits up to `timeout` for `fd` to become writable (`ppoll`). True if it is.
pub fn wait_writable(fd: &impl AsFd, timeout: Duration) -> io::Result<bool> {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
    let ts = TimeSpec::from_duration(timeout);
    match ppoll(&mut fds, Some(ts), None) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn reports_the_tokens_of_readable_sockets() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut set = ReadySet::new(8).unwrap();
        set.add(&a, 7).unwrap();
        set.add(&b, 9).unwrap();
        let mut ready = Vec::with_capacity(8);
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty());
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        set.wait(1_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [9]);
        set.remove(&b).unwrap();
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty());
        assert!(wait_writable(&a, Duration::from_millis(10)).unwrap());
    }

    #[test]
    fn a_finished_connect_is_reported_then_only_replies() {
        use std::io::Write as _;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut far, _) = l.accept().unwrap();
        let mut set = ReadySet::new(8).unwrap();
        let mut ready = Vec::with_capacity(8);
        set.add_writable(&c, 3).unwrap();
        set.wait(1_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [3], "writable: the connect finished");
        set.set_readable(&c, 4).unwrap();
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty(), "nothing to read yet");
        far.write_all(b"x").unwrap();
        set.wait(1_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [4]);
    }
}
