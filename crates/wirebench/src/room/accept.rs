//! Accepting connections within the connection cap. At the cap, the oldest unfinished
//! handshake is closed to make room (so slow or stalled handshakes cannot hold the room:
//! a real client finishes its handshake in a round trip, a slowloris never does); with no
//! handshake to close, the newcomer gets HTTP 503 and is closed (over wss://, after a TLS
//! handshake and with a close_notify: `refuse.rs`). When accept itself fails
//! (EMFILE, ENFILE, ENOBUFS, ENOMEM: out of descriptors or memory), the loop waits
//! [`BACKOFF`] before trying again instead of spinning on the error.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use super::server::{Shared, Tally};

/// How long accepting pauses after a failure for lack of descriptors or memory.
pub const BACKOFF: Duration = Duration::from_millis(100);

/// Connections over the cap while evicted handshakes are still closing; past it, every
/// newcomer gets 503. The room keeps this many descriptors spare.
pub const EVICTING: u64 = 32;

/// Connections open (handshaking or joined) and the unfinished handshakes, oldest first.
#[derive(Debug, Default)]
pub(super) struct Pending {
    next_id: std::sync::atomic::AtomicU64,
    /// Open connections.
    pub(super) live: std::sync::atomic::AtomicU64,
    handshaking: Mutex<BTreeMap<u64, oneshot::Sender<()>>>,
    /// wss:// refusals at the cap in progress (`refuse.rs`).
    pub(super) tls_refusing: std::sync::atomic::AtomicU64,
}

/// A connection's place in the count; leaves it when dropped.
#[derive(Debug)]
pub(super) struct Slot {
    id: u64,
    shared: Arc<Shared>,
}

impl Slot {
    /// The connection's number, unique for the server's life.
    pub(super) const fn id(&self) -> u64 {
        self.id
    }

    /// The handshake is done: no longer evictable.
    pub(super) fn established(&self) {
        self.shared.pending.handshaking.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.established();
        self.shared.pending.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Is this accept error one that only waiting can cure?
pub fn exhausted(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(nix::errno::Errno::from_raw),
        Some(
            nix::errno::Errno::EMFILE
                | nix::errno::Errno::ENFILE
                | nix::errno::Errno::ENOBUFS
                | nix::errno::Errno::ENOMEM
        )
    )
}

/// Calls `accept` until `stop`; hands each connection to `on_conn`; after an error that
/// only waiting can cure, waits [`BACKOFF`] (counted in `errors`). Returns when `stop` changes.
pub async fn accept_loop<S, A, Fut>(
    mut accept: A,
    mut on_conn: impl FnMut(S),
    errors: &std::sync::atomic::AtomicU64,
    mut stop: watch::Receiver<bool>,
) where
    A: FnMut() -> Fut,
    Fut: Future<Output = io::Result<S>>,
{
    loop {
        tokio::select! {
            r = accept() => match r {
                Ok(s) => on_conn(s),
                Err(e) => {
                    errors.fetch_add(1, Ordering::Relaxed);
                    if exhausted(&e) {
                        tokio::select! {
                            () = tokio::time::sleep(BACKOFF) => {}
                            _ = stop.changed() => return,
                        }
                    }
                }
            },
            _ = stop.changed() => return,
        }
    }
}

/// The room's accept loop: caps, evicts, refuses, spawns.
pub(super) async fn run(listener: TcpListener, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let sh = shared.clone();
    let conn_stop = stop.clone();
    let on_conn = move |sock: TcpStream| admit(sock, &sh, &conn_stop);
    accept_loop(|| async { listener.accept().await.map(|(s, _)| s) }, on_conn, &shared.tally.accept_errors, stop).await;
}

/// The answer to a connection over the cap with no handshake to evict.
const FULL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n\
Content-Length: 41\r\nConnection: close\r\n\r\nwirebench room: at its connection limit\r\n";

fn admit(sock: TcpStream, shared: &Arc<Shared>, stop: &watch::Receiver<bool>) {
    let p = &shared.pending;
    let cap = shared.cfg.limits.max_connections;
    let live = p.live.load(Ordering::Acquire);
    if live >= cap {
        let oldest = if live < cap + EVICTING {
            p.handshaking.lock().unwrap_or_else(PoisonError::into_inner).pop_first()
        } else {
            None
        };
        let Some((_, evict)) = oldest else {
            Tally::bump(&shared.tally.refused_full);
            if shared.tls.is_some() {
                // wss://: the 503 after a TLS handshake, ended by close_notify, within a
                // budget of handshakes (`refuse.rs`); over it, closed unanswered
                super::refuse::spawn_tls(sock, FULL, shared, stop);
                return;
            }
            // Best effort, never waiting: the socket buffer of a new connection is empty.
            let _ = sock.try_write(FULL);
            return;
        };
        let _ = evict.send(());
        Tally::bump(&shared.tally.evicted);
    }
    let id = p.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, evicted) = oneshot::channel();
    p.handshaking.lock().unwrap_or_else(PoisonError::into_inner).insert(id, tx);
    p.live.fetch_add(1, Ordering::AcqRel);
    let slot = Slot { id, shared: shared.clone() };
    tokio::spawn(super::conn::run(sock, slot, evicted, shared.clone(), stop.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_errors_back_off() {
        for e in [libc_err(nix::errno::Errno::EMFILE), libc_err(nix::errno::Errno::ENFILE)] {
            assert!(exhausted(&e));
        }
        assert!(!exhausted(&libc_err(nix::errno::Errno::ECONNABORTED)));
        assert!(!exhausted(&io::Error::other("x")));
    }

    fn libc_err(e: nix::errno::Errno) -> io::Error {
        io::Error::from_raw_os_error(e as i32)
    }
}
