//! The TCP accept loop `serve` and `proxy` share: accept until the stop signal (waking every
//! poll interval to look at it), at most `max` connections open at once, one thread per
//! connection, and every thread joined before returning.

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::shutdown::{POLL, Shutdown};

/// Accepts on `listener` until `shutdown`. A connection past `max` open goes to `refused`;
/// any other gets a thread named `name` running what `handle` returns for it.
pub(crate) fn run<H, R>(
    listener: &TcpListener,
    shutdown: &Shutdown,
    name: &str,
    max: u64,
    mut refused: R,
    mut handle: H,
) where
    R: FnMut(TcpStream),
    H: FnMut(TcpStream) -> Box<dyn FnOnce() + Send>,
{
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let open = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    while !shutdown.is_set() {
        match listener.accept() {
            Ok((stream, _)) => {
                if open.load(Ordering::Relaxed) >= max {
                    refused(stream);
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let (work, open) = (handle(stream), open.clone());
                let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
                    work();
                    open.fetch_sub(1, Ordering::Relaxed);
                });
                if let Ok(h) = spawned {
                    conns.push(h);
                }
                conns.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let _ = wirebench_net::wait_readable(listener, POLL);
            }
            Err(_) => {}
        }
    }
    for h in conns {
        let _ = h.join();
    }
}
