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

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
    let limits = Limits { max, per_source: u64::MAX };
    run_with(listener, shutdown, name, limits, |s, _| refused(s), || {}, || {}, handle);
}

/// How many connections the loop keeps open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// At once, from everywhere.
    pub(crate) max: u64,
    /// At once, from one source address.
    pub(crate) per_source: u64,
}

/// Which limit turned a connection away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// [`Limits::max`].
    All,
    /// [`Limits::per_source`], for this address.
    Source(IpAddr),
}

/// [`run`], calling `on_error` for each failed accept (before the back-off), and `on_stop`
/// once the stop signal is seen, before the connections' threads are joined (to wake them).
#[expect(clippy::too_many_arguments, reason = "the loop's hooks, each a closure")]
pub(crate) fn run_with<H, R, E, S>(
    listener: &TcpListener,
    shutdown: &Shutdown,
    name: &str,
    limits: Limits,
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
    let open = Arc::new(AtomicU64::new(0));
    // Connections open per source address (entries leave at zero: at most `max` of them).
    let by_source: Arc<Mutex<HashMap<IpAddr, u64>>> = Arc::default();
    let leave = |by_source: &Mutex<HashMap<IpAddr, u64>>, ip: IpAddr| {
        let mut m = by_source.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    };
    let mut conns = Vec::new();
    while !shutdown.is_set() {
        match listener.accept() {
            Ok((stream, peer)) => {
                // Accepted sockets do not inherit O_NONBLOCK on Linux; make sure.
                let _ = stream.set_nonblocking(false);
                if open.load(Ordering::Relaxed) >= limits.max {
                    refused(stream, Full::All);
                    continue;
                }
                let ip = peer.ip();
                {
                    let mut m = by_source.lock().unwrap_or_else(PoisonError::into_inner);
                    let n = m.entry(ip).or_insert(0);
                    if *n >= limits.per_source {
                        drop(m);
                        refused(stream, Full::Source(ip));
                        continue;
                    }
                    *n += 1;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let (work, done, mine) = (handle(stream), open.clone(), by_source.clone());
                let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
                    work();
                    leave(&mine, ip);
                    done.fetch_sub(1, Ordering::Relaxed);
                });
                if let Ok(h) = spawned {
                    conns.push(h);
                } else {
                    // No thread for it (the work and its stream were dropped): count it free.
                    leave(&by_source, ip);
                    open.fetch_sub(1, Ordering::Relaxed);
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
                let limits = Limits { max: 1, per_source: 1 };
                run_with(&l, &stop, "t", limits, |_, _| {}, || {}, || stopped = true, handle);
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
}
