//! Datagrams to many unicast addresses in one `sendmmsg(2)` (the relay's fan-out to its
//! peers): a batch of up to [`FAN_BATCH`] datagrams, each to every destination. The message
//! headers are allocated once, when the peer list changes, never per datagram.
//!
//! A full send buffer (`EAGAIN`) is the socket's, not one destination's: every message after
//! it would fail the same way. So a batch that meets one waits for room (`ppoll` for
//! `POLLOUT`) and resumes at the message that did not go, in order, within a time budget per
//! batch and the stop flag ([`SendWait`]); what is left when the budget runs out fails, and
//! is counted, as a whole. (The first version skipped the message and tried the next one: a
//! full buffer cost one system call and one lost copy per message, up to 32 x peers calls for
//! one batch.) A wait is at most a millisecond before the send is tried again (`POLLOUT`
//! comes only once the buffer is half empty), so a batch resumes about as soon as one
//! datagram fits. Any other error belongs to one message (an unreachable or refused
//! destination): that message fails and the rest go on.

use std::io::IoSlice;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrIn, sendmmsg};

/// The most datagrams one [`FanOut::send_batch`] takes.
pub const FAN_BATCH: usize = 32;
/// The most messages one `sendmmsg` takes (the kernel's `UIO_MAXIOV`).
const MAX_MSGS: usize = 1024;
/// Longest single sleep of a wait for room: the send is tried again (and the stop flag
/// looked at) at least this often.
const WAIT_SLICE: Duration = Duration::from_millis(1);

/// How long one batch may wait for room in a full send buffer, in total, and the flag that
/// ends the wait at once (the caller's stop signal).
#[derive(Debug, Clone, Copy)]
pub struct SendWait<'a> {
    /// The most one batch waits (zero: a full buffer fails the rest at once).
    pub budget: Duration,
    /// Set: stop waiting.
    pub stop: &'a AtomicBool,
}

/// What the last batch's send took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    /// `sendmmsg` calls.
    pub calls: usize,
    /// Waits for room in the send buffer (each up to a millisecond, then the send is tried
    /// again).
    pub waits: usize,
    /// Messages that failed because the buffer stayed full past the budget (or the stop).
    pub full: usize,
}

/// One single-slice vector per buffer (at most [`FAN_BATCH`]; the rest of the array empty).
fn slices<'a>(bufs: &[&'a [u8]]) -> [[IoSlice<'a>; 1]; FAN_BATCH] {
    let mut iovs = [[IoSlice::new(&[])]; FAN_BATCH];
    for (v, b) in iovs.iter_mut().zip(bufs) {
        v[0] = IoSlice::new(b);
    }
    iovs
}

/// Sends messages `0..total` by `call(at)` (a `sendmmsg` of the messages from `at`, returning
/// how many went), marking failures in `failed`; see the module's rules. Returns the count
/// sent.
fn drive(
    fd: &impl AsFd,
    total: usize,
    failed: &mut [bool],
    wait: SendWait<'_>,
    stats: &mut SendStats,
    mut call: impl FnMut(usize) -> nix::Result<usize>,
) -> usize {
    *stats = SendStats::default();
    let mut deadline = None;
    let mut at = 0;
    let mut sent = 0;
    while at < total {
        stats.calls += 1;
        match call(at) {
            Ok(done) if done > 0 => {
                at += done;
                sent += done;
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {
                let end = *deadline.get_or_insert_with(|| Instant::now() + wait.budget);
                if !room(fd, end, wait.stop) {
                    failed[at..total].fill(true);
                    stats.full = total - at;
                    break;
                }
                stats.waits += 1;
            }
            // This message's own error (EACCES, ENETUNREACH, EMSGSIZE...): skip it.
            Ok(_) | Err(_) => {
                failed[at] = true;
                at += 1;
            }
        }
    }
    sent
}

/// Waits for room in `fd`'s send buffer, one slice at a time: false once `end` has passed or
/// `stop` is set (give up), else true after `POLLOUT` or a slice, whichever comes first (try
/// again). `POLLOUT` comes only when the buffer is half empty (16 MiB: 8 MiB to drain), while
/// a datagram fits as soon as one datagram's worth is free: the slice catches that.
fn room(fd: &impl AsFd, end: Instant, stop: &AtomicBool) -> bool {
    let now = Instant::now();
    if stop.load(Ordering::Relaxed) || now >= end {
        return false;
    }
    let _ = crate::ready::wait_writable(fd, (end - now).min(WAIT_SLICE));
    true
}

/// Preallocated headers and addresses for a fan-out to a fixed set of destinations.
pub struct FanOut {
    headers: MultiHeaders<SockaddrIn>,
    /// The destinations, repeated for every datagram of a batch (capped at [`MAX_MSGS`]).
    addrs: Vec<Option<SockaddrIn>>,
    n: usize,
    /// Per message of the last batch (datagram-major): whether it failed.
    failed: Vec<bool>,
    stats: SendStats,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut").field("destinations", &self.n).finish_non_exhaustive()
    }
}

impl FanOut {
    /// A fan-out to `dests`.
    pub fn new(dests: &[SocketAddrV4]) -> Self {
        let n = dests.len();
        let msgs = (n * FAN_BATCH).clamp(1, MAX_MSGS.max(n));
        let addrs: Vec<Option<SockaddrIn>> =
            dests.iter().map(|d| Some(SockaddrIn::from(*d))).cycle().take(if n == 0 { 0 } else { msgs }).collect();
        Self {
            headers: MultiHeaders::preallocate(msgs, None),
            addrs,
            n,
            failed: vec![false; n * FAN_BATCH],
            stats: SendStats::default(),
        }
    }

    /// Destinations.
    pub const fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Sends `buf` to every destination from `sock` (a batch of one).
    pub fn send(&mut self, sock: &UdpSocket, buf: &[u8], wait: SendWait<'_>) -> usize {
        self.send_batch(sock, &[buf], wait)
    }

    /// Sends each of `bufs` (at most [`FAN_BATCH`]; more are not sent and count as failed)
    /// to every destination from `sock`, datagram by datagram, in as few `sendmmsg` calls as
    /// the kernel takes (one for up to 1,024 messages) and in order. A full send buffer waits
    /// for room as `wait` allows (module docs); an unreachable destination drops that copy
    /// only. Returns how many copies went out; [`FanOut::failed_at`] says which did not and
    /// [`FanOut::stats`] what it took.
    pub fn send_batch(&mut self, sock: &UdpSocket, bufs: &[&[u8]], wait: SendWait<'_>) -> usize {
        self.failed.fill(false);
        self.stats = SendStats::default();
        let n = self.n;
        if n == 0 {
            return 0;
        }
        let m = bufs.len().min(FAN_BATCH);
        self.failed[m * n..].fill(true);
        let iovs = slices(bufs);
        let (headers, addrs) = (&mut self.headers, &self.addrs);
        drive(sock, m * n, &mut self.failed, wait, &mut self.stats, |at| {
            // Message j is datagram j / n to destination j % n; a call starts at a message
            // whose destination index is `at % n`, so its addresses start there too.
            let take = (m * n - at).min(addrs.len() - at % n);
            let slices = (at..at + take).map(|j| &iovs[j / n]);
            sendmmsg(sock.as_raw_fd(), headers, slices, &addrs[at % n..at % n + take], [], MsgFlags::MSG_DONTWAIT)
                .map(Iterator::count)
        })
    }

    /// Whether the last send failed for destination `i` (of datagram 0).
    pub fn failed(&self, i: usize) -> bool {
        self.failed_at(0, i)
    }

    /// Whether the last [`FanOut::send_batch`] failed for datagram `k`, destination `i`.
    pub fn failed_at(&self, k: usize, i: usize) -> bool {
        if i >= self.n {
            return true;
        }
        self.failed.get(k * self.n + i).copied().unwrap_or(true)
    }

    /// What the last [`FanOut::send_batch`] took.
    pub const fn stats(&self) -> SendStats {
        self.stats
    }
}

/// Many datagrams to one address in one `sendmmsg` (the relay's re-emission of a batch
/// into a group from one emitting socket). Headers allocated once.
pub struct Burst {
    headers: MultiHeaders<SockaddrIn>,
    /// The destination of each message (only the first of a send's count are set).
    addrs: [Option<SockaddrIn>; FAN_BATCH],
    failed: [bool; FAN_BATCH],
    stats: SendStats,
}

impl std::fmt::Debug for Burst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Burst").finish_non_exhaustive()
    }
}

impl Default for Burst {
    fn default() -> Self {
        Self {
            headers: MultiHeaders::preallocate(FAN_BATCH, None),
            addrs: [None; FAN_BATCH],
            failed: [false; FAN_BATCH],
            stats: SendStats::default(),
        }
    }
}

impl Burst {
    /// Sends each of `bufs` (at most [`FAN_BATCH`]; more are not sent and count as failed)
    /// to `to` from `sock`, in order; a full send buffer waits for room as `wait` allows
    /// (module docs), a datagram the kernel refuses fails alone. Returns how many went out;
    /// [`Burst::failed`] says which did not and [`Burst::stats`] what it took.
    pub fn send(&mut self, sock: &UdpSocket, bufs: &[&[u8]], to: SocketAddrV4, wait: SendWait<'_>) -> usize {
        self.failed = [true; FAN_BATCH];
        let m = bufs.len().min(FAN_BATCH);
        self.failed[..m].fill(false);
        let iovs = slices(bufs);
        self.addrs[..m].fill(Some(SockaddrIn::from(to)));
        let (headers, addrs) = (&mut self.headers, &self.addrs);
        drive(sock, m, &mut self.failed, wait, &mut self.stats, |at| {
            sendmmsg(sock.as_raw_fd(), headers, &iovs[at..m], &addrs[..m - at], [], MsgFlags::MSG_DONTWAIT)
                .map(Iterator::count)
        })
    }

    /// Whether datagram `k` of the last [`Burst::send`] failed.
    pub fn failed(&self, k: usize) -> bool {
        self.failed.get(k).copied().unwrap_or(true)
    }

    /// What the last [`Burst::send`] took.
    pub const fn stats(&self) -> SendStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static NO_STOP: AtomicBool = AtomicBool::new(false);

    /// The relay's kind of wait: up to a second per batch.
    fn wait() -> SendWait<'static> {
        SendWait { budget: Duration::from_secs(1), stop: &NO_STOP }
    }

    #[test]
    fn one_call_reaches_every_destination() {
        let rx: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let dests: Vec<SocketAddrV4> = rx
            .iter()
            .map(|s| match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                std::net::SocketAddr::V6(_) => unreachable!(),
            })
            .collect();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // A destination the kernel refuses (broadcast without SO_BROADCAST) in the middle.
        let mut with_bad = dests.clone();
        with_bad.insert(1, SocketAddrV4::new(std::net::Ipv4Addr::BROADCAST, 9));
        let mut f = FanOut::new(&with_bad);
        assert_eq!(f.send(&tx, b"hello", wait()), 3, "the bad destination does not stop the others");
        assert_eq!((0..4).map(|i| f.failed(i)).collect::<Vec<_>>(), [false, true, false, false]);
        for s in &rx {
            let mut b = [0u8; 16];
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            let (n, from) = s.recv_from(&mut b).unwrap();
            assert_eq!((&b[..n], from), (&b"hello"[..], tx.local_addr().unwrap()));
        }
        assert_eq!(FanOut::new(&[]).send(&tx, b"x", wait()), 0);
    }

    #[test]
    fn a_batch_reaches_every_destination_in_order_and_says_which_copies_failed() {
        let rx: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let mut dests: Vec<SocketAddrV4> = rx
            .iter()
            .map(|s| match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                std::net::SocketAddr::V6(_) => unreachable!(),
            })
            .collect();
        dests.insert(1, SocketAddrV4::new(std::net::Ipv4Addr::BROADCAST, 9));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut f = FanOut::new(&dests);
        let bufs: Vec<Vec<u8>> = (0..FAN_BATCH + 2).map(|k| format!("datagram {k}").into_bytes()).collect();
        let all: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        assert_eq!(f.send_batch(&tx, &all[..5], wait()), 10, "five datagrams to the two good destinations");
        for k in 0..5 {
            assert_eq!([f.failed_at(k, 0), f.failed_at(k, 1), f.failed_at(k, 2)], [false, true, false], "datagram {k}");
        }
        assert!(f.failed_at(5, 0) && f.failed_at(0, 3), "past the batch");
        for s in &rx {
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            for want in &all[..5] {
                let mut b = [0u8; 32];
                let n = s.recv(&mut b).unwrap();
                assert_eq!(&b[..n], *want, "in order");
            }
        }
        // More than a batch: the first FAN_BATCH go out, the rest count as failed.
        assert_eq!(f.send_batch(&tx, &all, wait()), 2 * FAN_BATCH);
        assert!(!f.failed_at(FAN_BATCH - 1, 2) && f.failed_at(FAN_BATCH, 0));
    }

    #[test]
    fn a_burst_sends_every_datagram_to_one_address_in_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(to) = rx.local_addr().unwrap() else { unreachable!() };
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut b = Burst::default();
        let bufs: Vec<Vec<u8>> = (0..5).map(|k| vec![b'a' + k; usize::from(k) + 1]).collect();
        let all: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        assert_eq!(b.send(&tx, &all, to, wait()), 5);
        assert!((0..5).all(|k| !b.failed(k)) && b.failed(5));
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        for want in &all {
            let mut got = [0u8; 8];
            let n = rx.recv(&mut got).unwrap();
            assert_eq!(&got[..n], *want);
        }
        // A destination the kernel refuses: every datagram fails, none is sent, no hang.
        assert_eq!(b.send(&tx, &all, SocketAddrV4::new(std::net::Ipv4Addr::BROADCAST, 9), wait()), 0);
        assert!((0..5).all(|k| b.failed(k)));
    }

    /// `drive` against a scripted kernel: each call gets the next answer and records where
    /// it started; a writable socket stands in for the wait.
    fn scripted(
        total: usize,
        answers: &[nix::Result<usize>],
        w: SendWait<'_>,
    ) -> (usize, Vec<usize>, Vec<bool>, SendStats) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut failed = vec![false; total];
        let mut stats = SendStats::default();
        let mut starts = Vec::new();
        let mut next = answers.iter();
        let sent = drive(&sock, total, &mut failed, w, &mut stats, |at| {
            starts.push(at);
            *next.next().expect("no more calls than scripted")
        });
        (sent, starts, failed, stats)
    }

    #[test]
    fn a_full_buffer_waits_and_resumes_at_the_message_that_did_not_go() {
        // 64 messages (32 datagrams x 2 peers): 5 go, the buffer is full, then room for all.
        let (sent, starts, failed, stats) = scripted(64, &[Ok(5), Err(Errno::EAGAIN), Ok(59)], wait());
        assert_eq!(sent, 64);
        assert_eq!(starts, [0, 5, 5], "resumed at message 5, once: nothing skipped, nothing sent twice");
        assert!(failed.iter().all(|f| !f));
        assert_eq!(stats, SendStats { calls: 3, waits: 1, full: 0 });
    }

    #[test]
    fn a_buffer_that_stays_full_fails_the_rest_of_the_batch_in_one_step() {
        // No budget: the first EAGAIN ends the batch (the first version made 59 more calls).
        let none = SendWait { budget: Duration::ZERO, stop: &NO_STOP };
        let (sent, starts, failed, stats) = scripted(64, &[Ok(5), Err(Errno::EAGAIN)], none);
        assert_eq!((sent, starts), (5, vec![0, 5]));
        assert_eq!(failed.iter().filter(|f| **f).count(), 59);
        assert!(failed[..5].iter().all(|f| !f) && failed[5..].iter().all(|f| *f));
        assert_eq!(stats, SendStats { calls: 2, waits: 0, full: 59 });
        // The stop flag ends the wait as surely, whatever the budget.
        let stop = AtomicBool::new(true);
        let stopped = SendWait { budget: Duration::from_secs(3600), stop: &stop };
        let (sent, _, _, stats) = scripted(64, &[Ok(5), Err(Errno::EAGAIN)], stopped);
        assert_eq!((sent, stats.full), (5, 59));
    }

    #[test]
    fn a_destinations_own_error_costs_that_message_only() {
        let (sent, starts, failed, stats) = scripted(6, &[Ok(1), Err(Errno::EACCES), Ok(4)], wait());
        assert_eq!((sent, starts), (5, vec![0, 1, 2]));
        assert_eq!(failed, [false, true, false, false, false, false]);
        assert_eq!(stats, SendStats { calls: 3, waits: 0, full: 0 });
        // The same batch meeting a full buffer right after the refused copy: the buffer is
        // waited out, not charged to the next destination (the first version failed that
        // copy too, and sent on from the one after it).
        let (sent, starts, failed, stats) =
            scripted(6, &[Ok(1), Err(Errno::EACCES), Err(Errno::EAGAIN), Ok(4)], wait());
        assert_eq!((sent, starts), (5, vec![0, 1, 2, 2]));
        assert_eq!(failed, [false, true, false, false, false, false]);
        assert_eq!(stats, SendStats { calls: 4, waits: 1, full: 0 });
    }
}
