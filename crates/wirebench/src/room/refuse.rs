//! Refusing a connection so that the client reads the whole answer: the response, then a
//! clean end (over TLS a close_notify alert, so a client can tell the end of the answer from
//! a cut connection), then what the client still sends is read and thrown away until it
//! closes (closing with unread data would make the kernel send a reset, which can discard
//! the answer before the client reads it). Every step is bounded by the caller's deadline.
//!
//! Over wss://, the 503 at the connection cap needs a TLS handshake first: at most
//! [`TLS_REFUSING`] run at once (each within the handshake timeout, then the write
//! timeout); beyond, a newcomer is closed unanswered.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::server::Shared;
use crate::tls::Stream;

/// wss:// refusals at the connection cap in progress at most (memory: this many times
/// `TLS_BYTES_PER_CONNECTION`; descriptors: taken from the room's spare ones).
pub(super) const TLS_REFUSING: u64 = 16;

/// Bytes of what the client still sends read and dropped after the answer, at most.
const DRAIN_BYTES: usize = 64 << 10;

/// Writes `answer`, flushes, ends the stream (close_notify and FIN over TLS, FIN over
/// TCP), then reads until the client closes or [`DRAIN_BYTES`] came. No deadline of its
/// own: the caller bounds it.
pub(super) async fn answer_and_close(sock: &mut Stream, answer: &[u8]) -> std::io::Result<()> {
    sock.write_all(answer).await?;
    sock.flush().await?;
    sock.shutdown().await?;
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_BYTES {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
    Ok(())
}

/// Counts one refusal in progress while alive.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.pending.tls_refusing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Answers `answer` over TLS to a connection the room cannot take, in a task of its own;
/// closes it unanswered when [`TLS_REFUSING`] are already in progress.
pub(super) fn spawn_tls(sock: TcpStream, answer: &'static [u8], shared: &Arc<Shared>, stop: &watch::Receiver<bool>) {
    let Some(cfg) = shared.tls.clone() else { return };
    if shared.pending.tls_refusing.fetch_add(1, Ordering::AcqRel) >= TLS_REFUSING {
        shared.pending.tls_refusing.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let guard = InFlight(shared.clone());
    let mut stop = stop.clone();
    tokio::spawn(async move {
        let c = &guard.0.cfg;
        let work = async {
            let accept = tokio_rustls::TlsAcceptor::from(cfg).accept(sock);
            let Ok(Ok(tls)) = tokio::time::timeout(c.handshake_timeout, accept).await else { return };
            let mut s = Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(tls)));
            let _ = tokio::time::timeout(c.write_timeout, answer_and_close(&mut s, answer)).await;
        };
        tokio::select! {
            () = work => {}
            _ = stop.changed() => {}
        }
        drop(guard);
    });
}
