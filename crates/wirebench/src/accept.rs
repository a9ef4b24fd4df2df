//! The TCP accept loop `serve` and `proxy` share: accept until the stop signal, at most `max`
//! connections open at once, one thread per connection, and every thread joined before
//! returning. Between connections the loop sleeps in one `ppoll` on the listener and the
//! stop descriptor with no timeout (`Shutdown::wait_input`): an idle acceptor never wakes,
//! and a stop ends the wait at once.
//!
//! When accept fails (EMFILE: out of file descriptors; ENFILE, ENOBUFS, ENOMEM), the pending
//! connection stays in the backlog and the listener stays readable: retrying at once spins
//! a core. The loop backs off for [`BACKOFF`] instead (on the stop descriptor, so a stop
//! still ends it at once), as Go's net/http and Tokio's accept loops do.

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use crate::shutdown::Shutdown;

/// Pause after a failed accept.
pub(crate) const BACKOFF: Duration = Duration::from_millis(50);

/// Accepts on `listener` until `shutdown`. A connection past `max` open goes to `refused`;
/// any other gets a thread named `name` running what `handle` returns for it.
pub(crate) fn run<H, R>(listener: &TcpListener, shutdown: &Shutdown, name: &str, max: u64, refused: R, handle: H)
where
    R: FnMut(TcpStream),
    H: FnMut(TcpStream) -> Box<dyn FnOnce() + Send>,
{
    let mut refused = refused;
    let limits = Limits { max, per_source: u64::MAX, reserve: 0 };
    run_with(listener, shutdown, name, limits, None, |s, _| refused(s), || {}, || {}, handle);
}

/// How many connections the loop keeps open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// At once, from everywhere.
    pub(crate) max: u64,
    /// At once, from one source address.
    pub(crate) per_source: u64,
    /// Of `max`, the places only a [`Known`] source may take.
    pub(crate) reserve: u64,
}

/// Source addresses the loop keeps [`Limits::reserve`] places for (a mesh agent's own peers),
/// shared with whoever learns them. Replaced whole, read at each accept.
#[derive(Debug, Clone, Default)]
pub struct Known(Arc<RwLock<Arc<HashSet<IpAddr>>>>);

impl Known {
    /// From now on, these addresses.
    pub fn set(&self, ips: HashSet<IpAddr>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(ips);
    }

    /// Whether `ip` is one of them (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.read().unwrap_or_else(PoisonError::into_inner).contains(&ip.to_canonical())
    }
}

/// Which limit turned a connection away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// [`Limits::max`].
    All,
    /// [`Limits::per_source`], for this address.
    Source(IpAddr),
    /// Every place but the [`Limits::reserve`] kept for known sources.
    Strangers,
}

/// The connections open, in all and per source address (an entry leaves at zero: at most
/// `max` of them).
#[derive(Debug, Default)]
struct Places {
    open: AtomicU64,
    by_source: Mutex<HashMap<IpAddr, u64>>,
}

impl Places {
    /// Takes a place for a connection from `ip`, or says why there is none: strangers stop
    /// short of the reserve (a known source may take every place), and each source has
    /// `per_source` at most.
    fn take(&self, ip: IpAddr, limits: Limits, known: Option<&Known>) -> Result<(), Full> {
        let cap = match known {
            Some(k) if !k.contains(ip) => limits.max.saturating_sub(limits.reserve),
            _ => limits.max,
        };
        if self.open.load(Ordering::Relaxed) >= cap {
            return Err(if cap < limits.max { Full::Strangers } else { Full::All });
        }
        let mut m = self.by_source.lock().unwrap_or_else(PoisonError::into_inner);
        let n = m.entry(ip).or_insert(0);
        if *n >= limits.per_source {
            return Err(Full::Source(ip));
        }
        *n += 1;
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Gives back the place of a connection from `ip`.
    fn leave(&self, ip: IpAddr) {
        let mut m = self.by_source.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
        drop(m);
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// [`run`], calling `on_error` for each failed accept (before the back-off), and `on_stop`
/// once the stop signal is seen, before the connections' threads are joined (to wake them).
#[expect(clippy::too_many_arguments, reason = "the loop's hooks, each a closure")]
pub(crate) fn run_with<H, R, E, S>(
    listener: &TcpListener,
    shutdown: &Shutdown,
    name: &str,
    limits: Limits,
    known: Option<&Known>,
    mut refused: R,
    mut on_error: E,
    on_stop: S,
    mut handle: H,
) where
    R: FnMut(TcpStream, Full),
    E: FnMut(),
    S: FnOnce(),
    H: FnMut(TcpStream) -> Box<dyn FnOnce() + Send>,
{
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let places = Arc::new(Places::default());
    let mut conns = Vec::new();
    while !shutdown.is_set() {
        match listener.accept() {
            Ok((stream, peer)) => {
                // Accepted sockets do not inherit O_NONBLOCK on Linux; make sure.
                let _ = stream.set_nonblocking(false);
                let ip = peer.ip();
                if let Err(full) = places.take(ip, limits, known) {
                    refused(stream, full);
                    continue;
                }
                let (work, mine) = (handle(stream), places.clone());
                let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
                    work();
                    mine.leave(ip);
                });
                if let Ok(h) = spawned {
                    conns.push(h);
                } else {
                    // No thread for it (the work and its stream were dropped): count it free.
                    places.leave(ip);
                    on_error();
                }
                conns.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let _ = shutdown.wait_input(listener, None);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                on_error();
                conns.retain(|h| !h.is_finished());
                shutdown.sleep(BACKOFF);
            }
        }
    }
    on_stop();
    for h in conns {
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// An idle acceptor sleeps in `ppoll` with no timeout (it woke every 100 ms before), and
    /// a trigger from elsewhere still ends the loop and runs the stop hook.
    #[test]
    fn an_idle_acceptor_has_no_timed_wake_ups_and_stops_at_the_trigger() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let stop = Shutdown::new();
        let (tid_tx, tid_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let acceptor = std::thread::spawn({
            let stop = stop.clone();
            move || {
                tid_tx.send(wirebench_net::rusage::thread_id()).unwrap();
                let mut stopped = false;
                let handle = |_: TcpStream| -> Box<dyn FnOnce() + Send> { Box::new(|| {}) };
                let limits = Limits { max: 1, per_source: 1, reserve: 0 };
                run_with(&l, &stop, "t", limits, None, |_, _| {}, || {}, || stopped = true, handle);
                done_tx.send(stopped).unwrap();
            }
        });
        let tid = tid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let args = crate::shutdown::blocked::wait_in(tid, &[nix::libc::SYS_ppoll]);
        assert_eq!(args[2], 0, "ppoll's timeout pointer is null: no timed wake-ups");
        stop.trigger();
        assert!(done_rx.recv_timeout(Duration::from_secs(10)).unwrap(), "ended, with the stop hook");
        acceptor.join().unwrap();
    }

    /// Strangers (127.0.0.2) fill every place but the reserve and are refused past it; a
    /// known source (127.0.0.3) still gets a place, and once the reserve is gone too it is
    /// refused as at the full limit.
    #[test]
    fn strangers_stop_short_of_the_places_kept_for_known_sources() {
        use std::net::{Ipv4Addr, SocketAddr};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Shutdown::new();
        let known = Known::default();
        known.set([IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3))].into());
        let (refused_tx, refused_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let acceptor = std::thread::spawn({
            let stop = stop.clone();
            move || {
                // Each accepted connection is held until the test releases them all.
                let handle = |_: TcpStream| -> Box<dyn FnOnce() + Send> {
                    let r = release_rx.clone();
                    Box::new(move || {
                        let _ = r.lock().unwrap().recv();
                    })
                };
                let limits = Limits { max: 4, per_source: 10, reserve: 1 };
                let refused = |s: TcpStream, why: Full| refused_tx.send((s.peer_addr().unwrap().ip(), why)).unwrap();
                run_with(&l, &stop, "t", limits, Some(&known), refused, || {}, || {}, handle);
            }
        });
        let from = |last: u8| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::from((Ipv4Addr::new(127, 0, 0, last), 0)).into()).unwrap();
            s.connect(&addr.into()).unwrap();
            TcpStream::from(s)
        };
        let wait = Duration::from_secs(10);
        let mut held: Vec<TcpStream> = (0..3).map(|_| from(2)).collect();
        held.push(from(2));
        let stranger = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(refused_rx.recv_timeout(wait).unwrap(), (stranger, Full::Strangers), "the fourth stranger");
        held.push(from(3));
        held.push(from(3));
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
        assert_eq!(refused_rx.recv_timeout(wait).unwrap(), (peer, Full::All), "the reserve held one");
        assert!(refused_rx.try_recv().is_err(), "nothing else refused");
        stop.trigger();
        for _ in 0..4 {
            release_tx.send(()).unwrap();
        }
        acceptor.join().unwrap();
        drop(held);
    }
}
