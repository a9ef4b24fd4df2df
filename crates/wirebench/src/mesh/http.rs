//! The agent's HTTP side (hyper, HTTP/1.1): `/metrics`, `/v1/matrix`, `/v1/peers`,
//! `/healthz`, `/readyz`. It is exposed on real networks, so every connection is bounded:
//! at most [`MAX_CONNECTIONS`] open (more are closed at accept), the request head must
//! arrive within [`HEAD_TIMEOUT`] and fit [`MAX_HEAD_BYTES`], a connection lives at most
//! [`CONNECTION_LIFETIME`], only `GET`/`HEAD` without a body are served, and on stop every
//! connection is closed within a second. With a token, everything but the two probes
//! (`/healthz`, `/readyz`, for kubelets) needs `Authorization: Bearer TOKEN`, checked as an
//! HMAC in constant time.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use wirebench_core::auth::Key;

use super::state::Shared;
use crate::shutdown::Shutdown;

/// Most HTTP connections open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The request head must arrive within this.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
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
    pub registry: Arc<Registry>,
    /// The token's tag, when one is set.
    pub token_tag: Option<[u8; 32]>,
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
        "/metrics" => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            super::metrics::scrape(&api.registry),
        ),
        "/v1/matrix" => json(&*api.shared.matrix()),
        "/v1/peers" => json(&*api.shared.peers()),
        _ => reply(StatusCode::NOT_FOUND, TEXT, "not found: /metrics /v1/matrix /v1/peers /healthz /readyz\n"),
    }
}

/// Serves `listener` until `shutdown`, then closes every connection within a second.
pub async fn serve(listener: TcpListener, api: Api, shutdown: Shutdown) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shutdown.stopped() => break,
        };
        while tasks.try_join_next().is_some() {}
        let Ok((stream, _)) = accepted else {
            // EMFILE and friends: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
        let _ = stream.set_nodelay(true);
        let (api, shutdown) = (api.clone(), shutdown.clone());
        tasks.spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let r = handle(&api, &req);
                async move { Ok::<_, std::convert::Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            let lifetime = tokio::time::sleep(CONNECTION_LIFETIME);
            tokio::pin!(lifetime);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = &mut lifetime => {}
                () = shutdown.stopped() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_millis(500), conn.as_mut()).await;
                }
            }
            drop(permit);
        });
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
}
