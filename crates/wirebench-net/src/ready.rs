//! Readiness of many sockets at once (the proxy's flows, the mesh prober's peers): epoll,
//! level-triggered. A sleep is one `epoll_pwait2` (Linux 5.11: a nanosecond timeout), so a
//! datagram wakes the waiter straight from the socket's wait queue, as a blocking `recv`
//! would. (The first version slept in `ppoll` on the epoll descriptor, because
//! `epoll_wait`'s own timeout is in milliseconds, and then collected the ready set with a
//! second call: a nested wake-up and one more system call between a reply's arrival and its
//! read, which the mesh agent measured as about 10 µs of its UDP round trip.)
//! Kernels without `epoll_pwait2`, and seccomp filters that refuse it (`EPERM`), get that
//! two-step wait.
//!
//! A set made with [`ReadySet::direct`] waits on its first few descriptors with one `ppoll` on
//! them, not through epoll: a datagram then wakes the waiter from the socket's own wait queue
//! (no epoll callback, no ready list to collect), as `ping`'s wait does. The mesh agent's
//! UDP round trip read about 7 % longer than `ping --poisson`'s through epoll and about 3 %
//! with `ppoll` (`bench/mesh.sh accuracy`). Past that many descriptors the set moves
//! them all to epoll for good (a `ppoll` costs a wait-queue entry per descriptor per wait).
//! A descriptor must leave a direct set ([`ReadySet::remove`]) before it is closed: `ppoll`
//! would report a closed one as invalid, or a reused number as someone else's.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::time::TimeSpec;

/// A set of descriptors, each with a caller-chosen token.
#[derive(Debug)]
pub struct ReadySet {
    epoll: Epoll,
    events: Vec<EpollEvent>,
    /// Waited on with `ppoll` while at most `direct_max` (none once moved to epoll).
    direct: Vec<libc::pollfd>,
    /// The token of each entry of `direct`.
    direct_tokens: Vec<u64>,
    /// 0: every descriptor goes to epoll.
    direct_max: usize,
}

impl ReadySet {
    /// An empty set that reports up to `batch` ready descriptors per wait.
    pub fn new(batch: usize) -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        Ok(Self {
            epoll,
            events: vec![EpollEvent::empty(); batch.max(1)],
            direct: Vec::new(),
            direct_tokens: Vec::new(),
            direct_max: 0,
        })
    }

    /// An empty set that waits on up to `max` descriptors directly (one `ppoll` on them; the
    /// module's note) and moves them all to epoll when one more is added; `batch` as in
    /// [`ReadySet::new`].
    pub fn direct(batch: usize, max: usize) -> io::Result<Self> {
        let mut s = Self::new(batch)?;
        s.direct = Vec::with_capacity(max);
        s.direct_tokens = Vec::with_capacity(max);
        s.direct_max = max;
        Ok(s)
    }

    /// Whether the set waits with `ppoll` (not moved to epoll).
    pub fn is_direct(&self) -> bool {
        self.direct_max > 0
    }

    /// Watches `fd` for readability under `token`.
    pub fn add(&mut self, fd: &impl AsFd, token: u64) -> io::Result<()> {
        self.insert(fd.as_fd().as_raw_fd(), EpollFlags::EPOLLIN, token)
    }

    /// Watches `fd` for writability under `token` (a connect in progress: ready when it
    /// finished, either way; errors and hang-ups are always reported).
    pub fn add_writable(&mut self, fd: &impl AsFd, token: u64) -> io::Result<()> {
        self.insert(fd.as_fd().as_raw_fd(), EpollFlags::EPOLLOUT, token)
    }

    /// Watches a descriptor already in the set for readability instead.
    pub fn set_readable(&mut self, fd: &impl AsFd, token: u64) -> io::Result<()> {
        if self.is_direct() {
            let i = self.position(fd.as_fd().as_raw_fd())?;
            self.direct[i].events = libc::POLLIN;
            self.direct_tokens[i] = token;
            return Ok(());
        }
        let mut ev = EpollEvent::new(EpollFlags::EPOLLIN, token);
        Ok(self.epoll.modify(fd.as_fd(), &mut ev)?)
    }

    /// Stops watching `fd`.
    pub fn remove(&mut self, fd: &impl AsFd) -> io::Result<()> {
        if self.is_direct() {
            let i = self.position(fd.as_fd().as_raw_fd())?;
            self.direct.swap_remove(i);
            self.direct_tokens.swap_remove(i);
            return Ok(());
        }
        Ok(self.epoll.delete(fd.as_fd())?)
    }

    /// Where `fd` is in the direct list (`ENOENT`, as epoll says, when it is not).
    fn position(&self, fd: RawFd) -> io::Result<usize> {
        self.direct.iter().position(|p| p.fd == fd).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
    }

    fn insert(&mut self, fd: RawFd, flags: EpollFlags, token: u64) -> io::Result<()> {
        if self.is_direct() {
            if self.direct.iter().any(|p| p.fd == fd) {
                return Err(io::Error::from_raw_os_error(libc::EEXIST));
            }
            if self.direct.len() < self.direct_max {
                let events = if flags.contains(EpollFlags::EPOLLOUT) { libc::POLLOUT } else { libc::POLLIN };
                self.direct.push(libc::pollfd { fd, events, revents: 0 });
                self.direct_tokens.push(token);
                return Ok(());
            }
            self.move_to_epoll()?;
        }
        #[expect(unsafe_code, reason = "a raw descriptor back to a borrowed one, within the caller's borrow")]
        // SAFETY: `fd` was borrowed from a live descriptor by the caller, for this call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        Ok(self.epoll.add(fd, EpollEvent::new(flags, token))?)
    }

    /// Moves every direct entry to epoll, for good.
    fn move_to_epoll(&mut self) -> io::Result<()> {
        for (p, &token) in self.direct.iter().zip(&self.direct_tokens) {
            let flags = if p.events == libc::POLLOUT { EpollFlags::EPOLLOUT } else { EpollFlags::EPOLLIN };
            #[expect(unsafe_code, reason = "the direct list keeps raw descriptors")]
            // SAFETY: every direct entry is a live descriptor (callers remove one before
            // closing it: the module's note).
            let fd = unsafe { BorrowedFd::borrow_raw(p.fd) };
            self.epoll.add(fd, EpollEvent::new(flags, token))?;
        }
        self.direct = Vec::new();
        self.direct_tokens = Vec::new();
        self.direct_max = 0;
        Ok(())
    }

    /// One `ppoll` on the direct entries; their tokens when anything is ready.
    fn wait_direct(&mut self, timeout_ns: u64, ready: &mut Vec<u64>) -> io::Result<()> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout_ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
            // < 1e9: fits every `c_long`.
            tv_nsec: libc::c_long::try_from(timeout_ns % 1_000_000_000).unwrap_or(0),
        };
        let n = libc::nfds_t::try_from(self.direct.len()).unwrap_or(libc::nfds_t::MAX);
        #[expect(unsafe_code, reason = "ppoll on raw pollfds (nix's takes borrowed descriptors)")]
        // SAFETY: `direct` is a live buffer of `n` `pollfd`s the kernel reads and writes
        // (`revents`); `ts` outlives the call; a null mask leaves the signal mask alone.
        let rc = unsafe { libc::ppoll(self.direct.as_mut_ptr(), n, &raw const ts, std::ptr::null()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        if rc > 0 {
            ready.extend(self.direct.iter().zip(&self.direct_tokens).filter(|(p, _)| p.revents != 0).map(|(_, &t)| t));
        }
        Ok(())
    }

    /// Waits up to `timeout_ns` (0: only look) for any descriptor to be readable and puts
    /// the ready tokens in `ready` (cleared first; its capacity is reused).
    pub fn wait(&mut self, timeout_ns: u64, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        if self.is_direct() {
            return self.wait_direct(timeout_ns, ready);
        }
        let n = if timeout_ns > 0 && !NO_PWAIT2.load(Ordering::Relaxed) {
            if let Some(n) = self.pwait2(timeout_ns) {
                n?
            } else {
                NO_PWAIT2.store(true, Ordering::Relaxed);
                self.two_step(timeout_ns)?
            }
        } else {
            self.two_step(timeout_ns)?
        };
        ready.extend(self.events[..n].iter().map(EpollEvent::data));
        Ok(())
    }

    /// One `epoll_pwait2` with a nanosecond timeout; `None` when the kernel has no such call.
    fn pwait2(&mut self, timeout_ns: u64) -> Option<io::Result<usize>> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout_ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
            // < 1e9: fits every `c_long`.
            tv_nsec: libc::c_long::try_from(timeout_ns % 1_000_000_000).unwrap_or(0),
        };
        let max = libc::c_int::try_from(self.events.len()).unwrap_or(libc::c_int::MAX);
        #[expect(unsafe_code, reason = "epoll_pwait2 has no wrapper in nix or in libc's musl")]
        // SAFETY: `events` is a live buffer of `max` `EpollEvent`s, each `repr(transparent)`
        // over `libc::epoll_event`, which the kernel fills (at most `max`); `ts` outlives the
        // call; a null signal mask leaves the mask alone (its size argument is then unused).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.epoll.0.as_raw_fd(),
                self.events.as_mut_ptr().cast::<libc::epoll_event>(),
                max,
                &raw const ts,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        if rc >= 0 {
            return Some(Ok(usize::try_from(rc).unwrap_or(0)));
        }
        match nix::errno::Errno::last() {
            e if no_such_call(e) => None,
            nix::errno::Errno::EINTR => Some(Ok(0)),
            e => Some(Err(e.into())),
        }
    }

    /// Sleeps in `ppoll` on the epoll descriptor, then collects the ready set without blocking.
    fn two_step(&mut self, timeout_ns: u64) -> io::Result<usize> {
        if timeout_ns > 0 && !crate::wait::readable(&self.epoll.0, timeout_ns)? {
            return Ok(0);
        }
        match self.epoll.wait(&mut self.events, EpollTimeout::ZERO) {
            Ok(n) => Ok(n),
            Err(nix::errno::Errno::EINTR) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether `epoll_pwait2` failing with `e` means the call is not there for us: `ENOSYS`
/// before Linux 5.11 (and in gVisor), `EPERM` from a seccomp filter that predates the call
/// (the default profiles of container runtimes before 2021 refuse it so, and a mesh agent
/// runs in a pod). Either way the two-step wait works, where the error would fail every
/// wait.
const fn no_such_call(e: nix::errno::Errno) -> bool {
    matches!(e, nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM)
}

/// Set once the kernel refused `epoll_pwait2` (before Linux 5.11): every set waits in two steps.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

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

    /// A seccomp filter that predates `epoll_pwait2` refuses it with `EPERM` (not `ENOSYS`,
    /// as container runtimes' default profiles before 2021 do): the set must fall back to the
    /// two-step wait, not fail every wait. The filter is installed on a thread of its own
    /// (seccomp filters are per thread without `TSYNC`), which then waits for a datagram.
    #[test]
    fn a_seccomp_refused_epoll_pwait2_falls_back_to_the_two_step_wait() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        let got = std::thread::spawn(move || {
            let nr = u32::try_from(libc::SYS_epoll_pwait2).unwrap();
            // load the syscall number; epoll_pwait2: EPERM; anything else: allow
            let mut prog = [
                libc::sock_filter { code: 0x20, jt: 0, jf: 0, k: 0 },
                libc::sock_filter { code: 0x15, jt: 0, jf: 1, k: nr },
                libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x0005_0000 | u32::try_from(libc::EPERM).unwrap() },
                libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x7fff_0000 },
            ];
            let fprog = libc::sock_fprog { len: 4, filter: prog.as_mut_ptr() };
            #[expect(unsafe_code, reason = "a test installs a seccomp filter on its own thread")]
            // SAFETY: plain prctl calls; `fprog` points at `prog`, both live across the call
            // (the kernel copies the program).
            let rc = unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                libc::prctl(libc::PR_SET_SECCOMP, 2, &raw const fprog)
            };
            assert_eq!(rc, 0, "seccomp filter: {}", io::Error::last_os_error());
            let mut set = ReadySet::new(8).unwrap();
            set.add(&b, 3).unwrap();
            assert!(set.pwait2(1_000).is_none(), "refused: no such call for us");
            let mut ready = Vec::new();
            set.wait(1_000_000_000, &mut ready).map(|()| ready)
        })
        .join()
        .unwrap();
        assert_eq!(got.unwrap(), [3]);
    }

    /// The one-call wait (`epoll_pwait2`) and the two-step one (`ppoll` on the
    /// epoll descriptor, then collect) see the same ready set, with or without a timeout.
    #[test]
    fn the_one_call_and_the_two_step_wait_agree() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut set = ReadySet::new(8).unwrap();
        set.add(&b, 5).unwrap();
        assert_eq!(set.pwait2(200_000).expect("Linux 5.11 or later").unwrap(), 0, "nothing yet");
        assert_eq!(set.two_step(200_000).unwrap(), 0);
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert_eq!(set.pwait2(1_000_000_000).unwrap().unwrap(), 1);
        assert_eq!(set.events[0].data(), 5);
        assert_eq!(set.two_step(1_000_000_000).unwrap(), 1, "level-triggered: still there");
        assert_eq!(set.events[0].data(), 5);
        let mut ready = Vec::new();
        set.wait(1_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [5]);
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

    /// The descriptors registered in `set`'s epoll instance (its `/proc` fdinfo: one `tfd:`
    /// line each).
    fn in_epoll(set: &ReadySet) -> usize {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", set.epoll.0.as_raw_fd())).unwrap();
        info.lines().filter(|l| l.starts_with("tfd:")).count()
    }

    /// A direct set waits on its few sockets with `ppoll`, none of them in epoll
    /// (a reply then wakes the waiter from its socket's own wait queue), and reports the
    /// same tokens as the epoll set: readable, removed, a finished connect, then replies.
    #[test]
    fn a_direct_set_keeps_its_few_sockets_out_of_epoll_and_reports_the_same() {
        use std::io::Write as _;
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut far, _) = l.accept().unwrap();
        let mut set = ReadySet::direct(8, 4).unwrap();
        let mut ready = Vec::new();
        set.add(&a, 7).unwrap();
        set.add(&b, 9).unwrap();
        assert!(set.add(&b, 10).is_err(), "already in the set");
        set.add_writable(&c, 3).unwrap();
        assert!(set.is_direct());
        assert_eq!(in_epoll(&set), 0, "waited on directly");
        set.wait(1_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [3], "writable: the connect finished");
        set.set_readable(&c, 4).unwrap();
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty(), "nothing to read yet");
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        far.write_all(b"x").unwrap();
        // Level-triggered: both stay ready until read; the TCP byte may come a moment
        // after the datagram, so wait (bounded) until both are reported together.
        for _ in 0..100 {
            set.wait(1_000_000_000, &mut ready).unwrap();
            if ready.len() == 2 {
                break;
            }
        }
        ready.sort_unstable();
        assert_eq!(ready, [4, 9]);
        set.remove(&b).unwrap();
        assert!(set.remove(&b).is_err(), "no longer in the set");
        set.remove(&c).unwrap();
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty(), "the removed sockets are not reported");
        assert!(set.is_direct());
    }

    /// Past its direct share, a set moves every descriptor to epoll, with its token and
    /// interest, and keeps reporting them.
    #[test]
    fn a_direct_set_moves_to_epoll_past_its_share() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let socks: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let mut set = ReadySet::direct(8, 2).unwrap();
        set.add(&socks[0], 10).unwrap();
        set.add(&socks[1], 11).unwrap();
        assert_eq!(in_epoll(&set), 0);
        set.add(&socks[2], 12).unwrap();
        assert!(!set.is_direct());
        assert_eq!(in_epoll(&set), 3, "all three in epoll");
        tx.send_to(b"x", socks[0].local_addr().unwrap()).unwrap();
        let mut ready = Vec::new();
        set.wait(1_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [10]);
        set.remove(&socks[0]).unwrap();
        assert_eq!(in_epoll(&set), 2);
    }
}
