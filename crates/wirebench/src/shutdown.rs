//! Stopping: a shared flag that Ctrl-C (or a test) sets, and three ways to wait for it
//! without waking while nothing happens. A thread blocked on a descriptor waits in one
//! `ppoll` on that descriptor and the stop descriptor ([`Shutdown::wait_input`]: one end of a
//! socket pair that the trigger makes readable for good), a thread with nothing else to do
//! blocks on the stop descriptor alone ([`Shutdown::wait`]), and async tasks (the mesh agent's
//! HTTP side and discovery) await [`Shutdown::stopped`], which the trigger wakes. Only when
//! the socket pair cannot be made (out of descriptors) do the waits fall back to looking at
//! the flag every [`POLL`]. Loops that must wake anyway (a probe schedule, a read with its
//! own deadline) look at the flag at least every [`POLL`], so a stop takes effect promptly
//! and every mode still returns what it measured.

use std::io::Write as _;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use tokio::sync::Notify;

/// How often a blocked loop wakes to check the flag, where it must poll at all.
pub const POLL: Duration = Duration::from_millis(100);

/// Readable once the stop is triggered, for good (the byte written is never read).
#[derive(Debug)]
struct StopFd {
    read: UnixStream,
    write: UnixStream,
}

impl StopFd {
    fn new() -> std::io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        write.set_nonblocking(true)?;
        Ok(Self { read, write })
    }

    /// Idempotent: a full buffer (after thousands of calls) already wakes every waiter.
    fn signal(&self) {
        let _ = (&self.write).write(&[1]);
    }
}

#[derive(Debug)]
struct Inner {
    flag: AtomicBool,
    /// Woken (every waiter) by [`Shutdown::trigger`].
    notify: Notify,
    /// `None` only when the socket pair could not be made: waits then poll the flag. Made
    /// at once for a root, at the first wait for a child (most children are only looked at,
    /// and a serve session's must not cost two descriptors).
    fd: OnceLock<Option<StopFd>>,
    /// Children still alive, set by this one's trigger.
    children: Mutex<Vec<Weak<Self>>>,
}

impl Inner {
    fn new(fd: OnceLock<Option<StopFd>>) -> Self {
        Self { flag: AtomicBool::new(false), notify: Notify::new(), fd, children: Mutex::new(Vec::new()) }
    }
}

impl Default for Inner {
    fn default() -> Self {
        Self::new(OnceLock::from(StopFd::new().ok()))
    }
}

/// What a wait for a descriptor's input found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// The descriptor has something: data, a connection, the peer's close, or an error (a
    /// read says which).
    Ready,
    /// The stop is triggered.
    Stop,
    /// Nothing within the timeout (or a signal interrupted the wait).
    Quiet,
}

/// A cloneable stop signal.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(Arc<Inner>);

impl Shutdown {
    /// A signal that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets it, and wakes every waiter: threads on the stop descriptor and tasks awaiting
    /// [`Self::stopped`].
    pub fn trigger(&self) {
        self.0.flag.store(true, Ordering::Relaxed);
        // Paired with the fence in `stop_fd`: a waiter that made the descriptor after this
        // looked for it sees the flag.
        fence(Ordering::SeqCst);
        if let Some(Some(fd)) = self.0.fd.get() {
            fd.signal();
        }
        self.0.notify.notify_waiters();
        // Set for good: the children are set once and forgotten.
        let children = std::mem::take(&mut *self.0.children.lock().unwrap_or_else(PoisonError::into_inner));
        for c in children.iter().filter_map(Weak::upgrade) {
            Self(c).trigger();
        }
    }

    /// A signal set by its own trigger or by this one's (at once if this one is set), not
    /// the other way round: for work that can also end by itself.
    #[must_use]
    pub fn child(&self) -> Self {
        let child = Self(Arc::new(Inner::new(OnceLock::new())));
        {
            let mut children = self.0.children.lock().unwrap_or_else(PoisonError::into_inner);
            children.retain(|c| c.strong_count() > 0);
            children.push(Arc::downgrade(&child.0));
        }
        // After the registration: a trigger either found the child in the list or set the
        // flag before taking the list, which the lock orders before this look.
        if self.is_set() {
            child.trigger();
        }
        child
    }

    /// The stop descriptor, made now if this is a child's first wait; `None` as well when
    /// the stop is already set (a trigger before it was made did not signal it).
    fn stop_fd(&self) -> Option<&StopFd> {
        let fd = self.0.fd.get_or_init(|| StopFd::new().ok()).as_ref();
        fence(Ordering::SeqCst);
        fd.filter(|_| !self.is_set())
    }

    /// Is it set?
    pub fn is_set(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }

    /// The flag itself, for engines that take `&AtomicBool`.
    pub fn flag(&self) -> &AtomicBool {
        &self.0.flag
    }

    /// Blocks the calling thread until the signal is set: asleep on the stop descriptor, no
    /// wake-ups before it (every [`POLL`] without one).
    pub fn wait(&self) {
        while !self.is_set() {
            // Interrupted: look again. Ready with the flag not set means `ppoll` itself
            // failed (the trigger sets the flag before it makes the descriptor readable);
            // not expected (the descriptor is ours and open), but it must not spin: look
            // again after a pause.
            if self.pause(None) == Input::Ready && !self.is_set() {
                std::thread::park_timeout(POLL);
            }
        }
    }

    /// Sleeps for `d`, or less if the signal is set meanwhile (on the stop descriptor).
    pub(crate) fn sleep(&self, d: Duration) {
        self.pause(Some(d));
    }

    /// One wait for the stop alone, up to `timeout` (`None`: none): a `ppoll` on the stop
    /// descriptor, or, without it, a pause of `timeout` (at most [`POLL`] when none).
    fn pause(&self, timeout: Option<Duration>) -> Input {
        if let Some(stop) = self.stop_fd() {
            return self.ppoll(stop.read.as_fd(), None, timeout);
        }
        if self.is_set() {
            return Input::Stop;
        }
        std::thread::park_timeout(timeout.unwrap_or(POLL));
        if self.is_set() { Input::Stop } else { Input::Quiet }
    }

    /// Sleeps until `fd` is readable, the signal is set, or `timeout` passes (`None`: no
    /// timeout). One `ppoll` on `fd` and the stop descriptor: no wake-ups while nothing
    /// happens. A stop wins over pending input.
    pub(crate) fn wait_input(&self, fd: &impl AsFd, timeout: Option<Duration>) -> Input {
        match self.stop_fd() {
            Some(stop) => self.ppoll(fd.as_fd(), Some(stop.read.as_fd()), timeout),
            None if self.is_set() => Input::Stop,
            // Without a stop descriptor: at most POLL at a time, then look at the flag.
            None => self.ppoll(fd.as_fd(), None, Some(timeout.map_or(POLL, |t| t.min(POLL)))),
        }
    }

    fn ppoll(&self, fd: BorrowedFd<'_>, stop: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> Input {
        let ts = timeout.map(TimeSpec::from_duration);
        let (res, stopped) = if let Some(s) = stop {
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN), PollFd::new(s, PollFlags::POLLIN)];
            let res = nix::poll::ppoll(&mut fds, ts, None);
            (res, fds[1].any().unwrap_or(false))
        } else {
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
            (nix::poll::ppoll(&mut fds, ts, None), false)
        };
        match res {
            _ if stopped || self.is_set() => Input::Stop,
            Ok(0) | Err(nix::errno::Errno::EINTR) => Input::Quiet,
            // Ready, or poll itself failed (a read then reports the descriptor's state).
            Ok(_) | Err(_) => Input::Ready,
        }
    }

    /// Completes once the signal is set, without polling: the waiter is registered before
    /// the flag is looked at, so a trigger between the two is not missed.
    pub async fn stopped(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    /// Sets it on Ctrl-C (SIGINT) and SIGTERM. Call once per process, from `main`.
    pub fn on_ctrl_c(&self) -> anyhow::Result<()> {
        let me = self.clone();
        ctrlc::set_handler(move || me.trigger()).map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;

    /// A wait on a descriptor tells input, stop and quiet apart, and a stop wins over pending
    /// input, for every later wait too.
    #[test]
    fn a_wait_tells_input_stop_and_quiet_apart() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (srv, _) = l.accept().unwrap();
        let s = Shutdown::new();
        assert_eq!(s.wait_input(&srv, Some(Duration::ZERO)), Input::Quiet);
        c.write_all(b"x").unwrap();
        assert_eq!(s.wait_input(&srv, Some(Duration::from_secs(10))), Input::Ready);
        s.trigger();
        s.trigger();
        for _ in 0..3 {
            assert_eq!(s.wait_input(&srv, Some(Duration::from_secs(10))), Input::Stop);
        }
    }

    /// A thread waiting for a descriptor that never becomes readable sleeps in `ppoll` with
    /// no timeout (so it never wakes while idle), and the trigger from another thread ends
    /// the wait. The same for a thread waiting for the stop alone.
    #[test]
    fn idle_waits_have_no_timeout_and_end_at_the_trigger() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        for on_input in [true, false] {
            let s = Shutdown::new();
            let (tid_tx, tid_rx) = mpsc::channel();
            let (done_tx, done_rx) = mpsc::channel();
            let waiter = std::thread::spawn({
                let (s, l) = (s.clone(), l.try_clone().unwrap());
                move || {
                    tid_tx.send(wirebench_net::rusage::thread_id()).unwrap();
                    let r = if on_input {
                        s.wait_input(&l, None)
                    } else {
                        s.wait();
                        Input::Stop
                    };
                    done_tx.send(r).unwrap();
                }
            });
            let tid = tid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
            let args = blocked::wait_in(tid, &[nix::libc::SYS_ppoll]);
            assert_eq!(args[2], 0, "ppoll's timeout pointer is null: no timed wake-ups");
            s.trigger();
            assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)).unwrap(), Input::Stop);
            waiter.join().unwrap();
        }
    }

    /// A child is set by its parent's trigger (and its own child by it), never sets its
    /// parent, and is born set under a set parent.
    #[test]
    fn a_child_stops_with_its_parent_and_alone() {
        let parent = Shutdown::new();
        let (a, b) = (parent.child(), parent.child());
        let grandchild = a.child();
        b.trigger();
        assert!(b.is_set() && !parent.is_set() && !a.is_set(), "a child's stop is its own");
        drop(b);
        parent.trigger();
        assert!(a.is_set() && a.flag().load(Ordering::Relaxed) && grandchild.is_set());
        assert!(parent.child().is_set(), "born set");
        assert_eq!(parent.child().wait_input(&TcpListener::bind("127.0.0.1:0").unwrap(), None), Input::Stop);
    }

    /// A thread asleep on a child's descriptor (made at its first wait) wakes at the parent's
    /// trigger, with no timed wake-ups before it; an async waiter on the child too.
    #[test]
    fn a_child_waiter_wakes_at_the_parents_trigger() {
        let parent = Shutdown::new();
        let child = parent.child();
        let (tid_tx, tid_rx) = mpsc::channel();
        let waiter = std::thread::spawn({
            let child = child.clone();
            move || {
                tid_tx.send(wirebench_net::rusage::thread_id()).unwrap();
                child.wait();
            }
        });
        let tid = tid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let args = blocked::wait_in(tid, &[nix::libc::SYS_ppoll]);
        assert_eq!(args[2], 0, "no timeout");
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let task = rt.spawn({
            let child = child.clone();
            async move { child.stopped().await }
        });
        parent.trigger();
        waiter.join().unwrap();
        rt.block_on(task).unwrap();
    }

    /// `sleep` waits on the stop descriptor with its timeout, and the trigger from another
    /// thread ends it early.
    #[test]
    fn a_sleep_ends_at_the_trigger() {
        let s = Shutdown::new();
        let (tid_tx, tid_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let sleeper = std::thread::spawn({
            let s = s.clone();
            move || {
                tid_tx.send(wirebench_net::rusage::thread_id()).unwrap();
                s.sleep(Duration::from_secs(3600));
                done_tx.send(()).unwrap();
            }
        });
        let tid = tid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let args = blocked::wait_in(tid, &[nix::libc::SYS_ppoll]);
        assert_ne!(args[2], 0, "ppoll has the sleep's timeout");
        s.trigger();
        done_rx.recv_timeout(Duration::from_secs(10)).expect("the trigger ends the sleep");
        sleeper.join().unwrap();
    }

    /// `stopped` completes for a waiter that registered before the trigger (woken, not
    /// polled: the runtime's clock is paused, so a polling wait would never see the flag
    /// unless time advanced) and for one that starts after it.
    #[tokio::test(start_paused = true)]
    async fn stopped_wakes_on_the_trigger_without_polling() {
        let s = Shutdown::new();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.stopped().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        let t0 = tokio::time::Instant::now();
        std::thread::spawn({
            let s = s.clone();
            move || s.trigger()
        })
        .join()
        .unwrap();
        waiter.await.unwrap();
        assert_eq!(tokio::time::Instant::now(), t0, "woken by the trigger, not by a timer");
        // Already set: at once.
        s.stopped().await;
    }
}

/// What a thread of this process is blocked in, from `/proc/self/task/TID/syscall`, for tests
/// that an idle thread's wait has no timeout (a wait with one wakes on its own: the thread's
/// arguments say which it is without waiting for that to happen).
#[cfg(test)]
pub(crate) mod blocked {
    use std::time::{Duration, Instant};

    /// The system call thread `tid` is blocked in and its six arguments; `None` while it
    /// runs (or is gone).
    pub(crate) fn syscall(tid: i32) -> Option<(i64, [u64; 6])> {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
        let mut it = text.split_whitespace();
        let nr = it.next()?.parse().ok()?;
        let mut args = [0u64; 6];
        for a in &mut args {
            *a = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
        }
        Some((nr, args))
    }

    /// Waits (bounded: 10 s, then panics) until thread `tid` is blocked in one of the system
    /// calls `nrs`; returns its arguments.
    pub(crate) fn wait_in(tid: i32, nrs: &[i64]) -> [u64; 6] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match syscall(tid) {
                Some((n, args)) if nrs.contains(&n) => return args,
                last => assert!(Instant::now() < deadline, "thread {tid} not blocked in {nrs:?}: {last:?}"),
            }
            std::thread::park_timeout(Duration::from_millis(1));
        }
    }
}
