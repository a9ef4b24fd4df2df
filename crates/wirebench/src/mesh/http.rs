//! The agent's HTTP side (hyper, HTTP/1.1): `/metrics`, `/v1/matrix`, `/v1/peers`,
//! `/healthz`, `/readyz`. It is exposed on real networks, so every connection is bounded
//! and no client can hold the port:
//!
//! - at most [`MAX_CONNECTIONS`] served connections, at most [`MAX_PER_SOURCE`] from one
//!   source address; at the cap a new connection takes the place of the connection idle the
//!   longest (a keep-alive connection waiting for its next request is closed);
//! - a connection that finds no place (every served connection busy, or its source at its
//!   share) gets one of [`HEALTH_CONNECTIONS`] reserved places ([`HEALTH_PER_SOURCE`] per
//!   source) that answer one `/healthz` or `/readyz` request and close within
//!   [`HEALTH_DEADLINE`]; anything else there is `503` with `Retry-After`; only when those are
//!   taken too is it closed at accept;
//! - the request head must arrive within [`HEAD_TIMEOUT`] and fit [`MAX_HEAD_BYTES`], the
//!   next one within [`IDLE_TIMEOUT`] of the last answer, and an answer must be written
//!   within [`REQUEST_DEADLINE`] of its request (a client that does not read is closed); a
//!   connection lives at most [`CONNECTION_LIFETIME`];
//! - only `GET`/`HEAD` without a body are served, and on stop every connection is closed
//!   within a second.
//!
//! With a token, everything but the two probes (`/healthz`, `/readyz`, for kubelets) needs
//! `Authorization: Bearer TOKEN`, checked as an HMAC in constant time.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use wirebench_core::auth::Key;

use super::state::Shared;
use crate::shutdown::Shutdown;

/// Most served HTTP connections open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Most served HTTP connections from one source address.
pub const MAX_PER_SOURCE: usize = 8;
/// Places reserved for `/healthz` and `/readyz` when the served connections are taken.
pub const HEALTH_CONNECTIONS: usize = 8;
/// Reserved places one source address may take.
pub const HEALTH_PER_SOURCE: usize = 2;
/// A reserved place's whole life: its request head, the answer, the close.
pub const HEALTH_DEADLINE: Duration = Duration::from_secs(2);
/// The request head must arrive within this.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// After an answer, the next request head must arrive within this (keep-alive idle).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// From a request's head to its answer written (a client that does not read is closed).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Largest request head (hyper's buffer; its minimum).
pub const MAX_HEAD_BYTES: usize = 8192;
/// Longest a connection stays open, keep-alive included.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

const AUTH_DOMAIN: &[u8] = b"wirebench mesh http v1";

/// The tag a right token gives (kept by the server; a candidate is checked against it).
pub fn expected_tag(token: &str) -> [u8; 32] {
    Key::new(token.as_bytes()).tag(&[AUTH_DOMAIN])
}

/// Whether `header` (`Bearer TOKEN`) carries the token whose tag is `expected`.
fn authorized(header: Option<&hyper::header::HeaderValue>, expected: &[u8; 32]) -> bool {
    let Some(t) = header.and_then(|h| h.to_str().ok()).and_then(|h| h.strip_prefix("Bearer ")) else {
        return false;
    };
    Key::new(t.trim().as_bytes()).verify(&[AUTH_DOMAIN], expected)
}

fn reply(status: StatusCode, kind: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(kind));
    r
}

fn json(v: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec(v) {
        Ok(b) => reply(StatusCode::OK, "application/json", b),
        Err(_) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", "encoding failed\n"),
    }
}

/// What the routes need.
#[derive(Debug, Clone)]
pub struct Api {
    /// Agent state.
    pub shared: Arc<Shared>,
    /// `/metrics`.
    pub metrics: Arc<super::metrics::Metrics>,
    /// The token's tag, when one is set.
    pub token_tag: Option<[u8; 32]>,
}

/// Answers one request on a reserved place: only the two probes.
pub fn handle_health(api: &Api, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/healthz" | "/readyz" => handle(api, req),
        _ => {
            let mut r = reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                "busy: every connection place is taken (only /healthz and /readyz answered); try again\n",
            );
            r.headers_mut().insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
            r
        }
    }
}

/// Answers one request.
pub fn handle(api: &Api, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "only GET\n");
    }
    let has_body = req.headers().contains_key(TRANSFER_ENCODING)
        || req.headers().get(CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0");
    if has_body {
        return reply(StatusCode::PAYLOAD_TOO_LARGE, TEXT, "no request bodies\n");
    }
    let path = req.uri().path();
    match path {
        "/healthz" => return reply(StatusCode::OK, TEXT, "ok\n"),
        "/readyz" => {
            return match api.shared.ready() {
                Ok(()) => reply(StatusCode::OK, TEXT, "ready\n"),
                Err(why) => reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, format!("not ready: {why}\n")),
            };
        }
        _ => {}
    }
    if let Some(tag) = &api.token_tag
        && !authorized(req.headers().get(AUTHORIZATION), tag)
    {
        api.shared.http_unauthorized.fetch_add(1, Ordering::Relaxed);
        let mut r = reply(StatusCode::UNAUTHORIZED, TEXT, "token required\n");
        r.headers_mut().insert(WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
        return r;
    }
    match path {
        "/metrics" => {
            let accept = req.headers().get(ACCEPT).and_then(|h| h.to_str().ok());
            let format = wirebench_core::mesh::exposition::negotiate(accept);
            match api.metrics.scrape(format) {
                Some(body) => reply(StatusCode::OK, format.content_type(), body),
                None => reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, "encoding failed\n"),
            }
        }
        "/v1/matrix" => json(&*api.shared.matrix()),
        "/v1/peers" => json(&*api.shared.peers()),
        _ => reply(StatusCode::NOT_FOUND, TEXT, "not found: /metrics /v1/matrix /v1/peers /healthz /readyz\n"),
    }
}

/// What a connection did last, for the idle and request deadlines and for eviction.
#[derive(Debug)]
struct Activity {
    base: Instant,
    /// Requests whose head arrived.
    requests: AtomicU64,
    /// `requests` when the last answer was flushed.
    answered: AtomicU64,
    /// Milliseconds after `base` of the last head or flushed answer.
    last_ms: AtomicU64,
    /// Woken when an answer is flushed (the deadline may come sooner: idle, not answering).
    answered_now: Notify,
}

impl Activity {
    fn new(base: Instant) -> Self {
        Self {
            base,
            requests: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
            answered_now: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn flushed(&self) {
        let n = self.requests.load(Ordering::Relaxed);
        if self.answered.swap(n, Ordering::Relaxed) != n {
            self.last_ms.store(self.now_ms(), Ordering::Relaxed);
            self.answered_now.notify_one();
        }
    }

    /// Waiting for a request head (not answering one).
    fn idle(&self) -> bool {
        self.requests.load(Ordering::Relaxed) == self.answered.load(Ordering::Relaxed)
    }

    /// When this connection is past its deadline, as of now.
    fn deadline(&self) -> Instant {
        let last = self.base + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        if !self.idle() {
            last + REQUEST_DEADLINE
        } else if self.requests.load(Ordering::Relaxed) == 0 {
            last + HEAD_TIMEOUT
        } else {
            last + IDLE_TIMEOUT
        }
    }
}

/// The socket, with its reads and writes seen by [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) {
            self.activity.flushed();
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[derive(Debug)]
struct Entry {
    ip: IpAddr,
    activity: Arc<Activity>,
    evict: Arc<Notify>,
}

/// Where a new connection goes.
#[derive(Debug)]
enum Place {
    /// A served place (all routes).
    Served(u64, Arc<Activity>, Arc<Notify>),
    /// A reserved place (`/healthz`, `/readyz`, one request).
    Health(u64),
    /// None: closed at accept.
    Refused,
}

/// Every open connection, by source, for the caps and eviction.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    served: HashMap<u64, Entry>,
    health: HashMap<u64, IpAddr>,
}

impl Table {
    fn place(&mut self, ip: IpAddr, base: Instant) -> Place {
        self.next += 1;
        let id = self.next;
        let from_ip = self.served.values().filter(|e| e.ip == ip).count();
        if from_ip < MAX_PER_SOURCE {
            if self.served.len() >= MAX_CONNECTIONS {
                // The connection idle the longest gives its place up (closed at once: it has
                // no request in flight).
                let victim = self
                    .served
                    .iter()
                    .filter(|(_, e)| e.activity.idle())
                    .min_by_key(|(_, e)| e.activity.last_ms.load(Ordering::Relaxed))
                    .map(|(k, _)| *k);
                if let Some(e) = victim.and_then(|k| self.served.remove(&k)) {
                    e.evict.notify_one();
                }
            }
            if self.served.len() < MAX_CONNECTIONS {
                let activity = Arc::new(Activity::new(base));
                let evict = Arc::new(Notify::new());
                self.served.insert(id, Entry { ip, activity: activity.clone(), evict: evict.clone() });
                return Place::Served(id, activity, evict);
            }
        }
        if self.health.len() < HEALTH_CONNECTIONS
            && self.health.values().filter(|h| **h == ip).count() < HEALTH_PER_SOURCE
        {
            self.health.insert(id, ip);
            return Place::Health(id);
        }
        Place::Refused
    }

    fn leave(&mut self, id: u64) {
        self.served.remove(&id);
        self.health.remove(&id);
    }
}

/// Gives a connection's place back when its task ends, however it ends.
struct Leave(Arc<Mutex<Table>>, u64);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).leave(self.1);
    }
}

/// Serves `listener` until `shutdown`, then closes every connection within a second.
pub async fn serve(listener: TcpListener, api: Api, shutdown: Shutdown) {
    let table = Arc::new(Mutex::new(Table::default()));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shutdown.stopped() => break,
        };
        while tasks.try_join_next().is_some() {}
        let Ok((stream, peer)) = accepted else {
            // EMFILE and friends: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let place = table.lock().unwrap_or_else(PoisonError::into_inner).place(peer.ip(), Instant::now());
        let _ = stream.set_nodelay(true);
        let (api, shutdown) = (api.clone(), shutdown.clone());
        match place {
            Place::Refused => {
                api.shared.http_refused.fetch_add(1, Ordering::Relaxed);
                drop(stream);
            }
            Place::Health(id) => {
                let leave = Leave(table.clone(), id);
                tasks.spawn(async move {
                    serve_health(stream, api, shutdown).await;
                    drop(leave);
                });
            }
            Place::Served(id, activity, evict) => {
                let leave = Leave(table.clone(), id);
                tasks.spawn(async move {
                    serve_one(stream, api, activity, &evict, shutdown).await;
                    drop(leave);
                });
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
}

/// A served connection: every route, keep-alive, until a deadline, eviction or the stop.
async fn serve_one(stream: TcpStream, api: Api, activity: Arc<Activity>, evict: &Notify, shutdown: Shutdown) {
    let seen = activity.clone();
    let shared = api.shared.clone();
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        seen.request();
        let r = handle(&api, &req);
        async move { Ok::<_, std::convert::Infallible>(r) }
    });
    let io = Watched { inner: stream, activity: activity.clone() };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let end = Instant::now() + CONNECTION_LIFETIME;
    loop {
        // A deadline moves later with a request and sooner with an answer (idle), which
        // wakes this wait: no periodic wake-ups.
        let deadline = activity.deadline().min(end);
        tokio::select! {
            _ = conn.as_mut() => return,
            () = activity.answered_now.notified() => {}
            () = tokio::time::sleep_until(deadline) => {
                let now = Instant::now();
                if now >= end || now >= activity.deadline() {
                    shared.http_timed_out.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            () = evict.notified() => {
                shared.http_evicted.fetch_add(1, Ordering::Relaxed);
                return;
            }
            () = shutdown.stopped() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_millis(500), conn.as_mut()).await;
                return;
            }
        }
    }
}

/// A reserved place: one request, `/healthz` or `/readyz`, within [`HEALTH_DEADLINE`].
async fn serve_health(stream: TcpStream, api: Api, shutdown: Shutdown) {
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let r = handle_health(&api, &req);
        async move { Ok::<_, std::convert::Infallible>(r) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEALTH_DEADLINE)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => {}
        () = tokio::time::sleep(HEALTH_DEADLINE) => {}
        () = shutdown.stopped() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn one_source_gets_its_share_then_a_health_place_then_nothing() {
        let mut t = Table::default();
        let now = Instant::now();
        for _ in 0..MAX_PER_SOURCE {
            assert!(matches!(t.place(ip(1), now), Place::Served(..)));
        }
        for _ in 0..HEALTH_PER_SOURCE {
            assert!(matches!(t.place(ip(1), now), Place::Health(..)));
        }
        assert!(matches!(t.place(ip(1), now), Place::Refused));
        assert!(matches!(t.place(ip(2), now), Place::Served(..)), "another source is served");
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_gives_its_place_up() {
        let mut t = Table::default();
        let now = Instant::now();
        let mut held = Vec::new();
        for i in 0..MAX_CONNECTIONS {
            let Place::Served(id, activity, evict) = t.place(ip(u8::try_from(i / MAX_PER_SOURCE).unwrap()), now) else {
                panic!("a place")
            };
            held.push((id, activity, evict));
        }
        // All but the fifth are answering a request: the fifth, idle, is the one evicted.
        for (i, (_, a, _)) in held.iter().enumerate() {
            if i != 4 {
                a.request();
            }
        }
        assert!(matches!(t.place(ip(200), now), Place::Served(..)));
        assert!(!t.served.contains_key(&held[4].0), "the idle one left the table");
        // Every served place busy now: a newcomer gets a reserved place, not a served one.
        let last = t.served.values().find(|e| e.ip == ip(200)).unwrap().activity.clone();
        last.request();
        assert!(matches!(t.place(ip(201), now), Place::Health(..)));
    }
}
