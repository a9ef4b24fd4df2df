//! The pure parts of `wirebench room`: what an opening HTTP request is (a WebSocket upgrade
//! to a room, or something to refuse with 400 or 426), and the server's memory budget.
//!
//! The room reads a request head itself (at most [`MAX_HEAD`] bytes, within its handshake
//! timeout), asks [`classify`], and either answers with an HTTP error and closes, or
//! answers 101 and speaks WebSocket. tungstenite would only drop a connection that is not a
//! WebSocket upgrade, without telling the client why.

/// The largest request head the room reads (RFC 6455 handshakes are a few hundred bytes).
pub const MAX_HEAD: usize = 8 * 1024;
/// The longest room path.
pub const MAX_PATH: usize = 256;
/// Headers a request may carry.
const MAX_HEADERS: usize = 32;

/// What the opening bytes of a connection are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head<'a> {
    /// Not a whole head yet: read more (unless [`MAX_HEAD`] bytes are in).
    Partial,
    /// A WebSocket upgrade: the room's path, the client's key, and how many bytes the head
    /// took (anything after it is WebSocket data).
    Upgrade {
        /// The request path without its query (`/rooms/7?user=ann` is room `/rooms/7`): the
        /// room's name, so per-client query values do not split a room.
        path: &'a str,
        /// `Sec-WebSocket-Key`, to derive the accept key from.
        key: &'a [u8],
        /// Length of the head, bytes.
        len: usize,
    },
    /// Refuse with this status and reason.
    Refuse(Refusal),
}

/// Why a request is refused, and with which status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 400: not HTTP, too large, not GET, a bad path or no key.
    BadRequest(&'static str),
    /// 426: HTTP, but not a WebSocket upgrade (or not version 13).
    UpgradeRequired(&'static str),
}

impl Refusal {
    /// The whole HTTP response, with a one-line body saying why.
    pub fn response(self) -> String {
        let (status, why, extra) = match self {
            Self::BadRequest(why) => ("400 Bad Request", why, ""),
            Self::UpgradeRequired(why) => (
                "426 Upgrade Required",
                why,
                "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n",
            ),
        };
        let body = format!("wirebench room: {why}; connect with a WebSocket client to ws://HOST:PORT/rooms/NAME\n");
        format!(
            "HTTP/1.1 {status}\r\n{extra}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    /// The HTTP status code.
    pub const fn status(self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::UpgradeRequired(_) => 426,
        }
    }
}

/// Does a comma-separated header value hold `token` (case-insensitive)?
fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// The length of the HTTP response head at the start of `buf` (status line, headers and the
/// blank line), or `None` while it is incomplete or not a response. A WebSocket client reads
/// the server's first frames from the bytes after it. Up to 124 headers, as tungstenite.
pub fn response_head_len(buf: &[u8]) -> Option<usize> {
    let mut headers = [httparse::EMPTY_HEADER; 124];
    match httparse::Response::new(&mut headers).parse(buf) {
        Ok(httparse::Status::Complete(n)) => Some(n),
        _ => None,
    }
}

/// Classifies the bytes read so far from a new connection.
pub fn classify(buf: &[u8]) -> Head<'_> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Head::Partial,
        Ok(httparse::Status::Partial) => return Head::Refuse(Refusal::BadRequest("request head over 8 KiB")),
        Err(httparse::Error::TooManyHeaders) => return Head::Refuse(Refusal::BadRequest("more than 32 headers")),
        Err(_) => return Head::Refuse(Refusal::BadRequest("not an HTTP request")),
    };
    if len > MAX_HEAD {
        return Head::Refuse(Refusal::BadRequest("request head over 8 KiB"));
    }
    if req.method != Some("GET") {
        return Head::Refuse(Refusal::BadRequest("only GET opens a WebSocket"));
    }
    if req.version != Some(1) {
        return Head::Refuse(Refusal::BadRequest("HTTP/1.1 needed"));
    }
    let path = req.path.unwrap_or("");
    if !path.starts_with('/') || path.len() > MAX_PATH {
        return Head::Refuse(Refusal::BadRequest("the path must start with / and be at most 256 bytes"));
    }
    let header = |name: &str| req.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value);
    if !header("upgrade").is_some_and(|v| has_token(v, "websocket"))
        || !header("connection").is_some_and(|v| has_token(v, "upgrade"))
    {
        return Head::Refuse(Refusal::UpgradeRequired("not a WebSocket upgrade"));
    }
    if header("sec-websocket-version").map(<[u8]>::trim_ascii) != Some(b"13") {
        return Head::Refuse(Refusal::UpgradeRequired("WebSocket version 13 only"));
    }
    match header("sec-websocket-key").map(<[u8]>::trim_ascii) {
        Some(key) if !key.is_empty() && key.len() <= 64 => {
            let path = path.split_once('?').map_or(path, |(p, _query)| p);
            Head::Upgrade { path, key, len }
        }
        _ => Head::Refuse(Refusal::BadRequest("no Sec-WebSocket-Key")),
    }
}

/// The room's limits: the memory budget is a function of these alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections (handshaking or joined).
    pub max_connections: u64,
    /// Largest message and largest frame, bytes.
    pub max_message: u64,
    /// Bytes queued for one member before it is dropped (close 1013).
    pub member_backlog: u64,
    /// Bytes queued for all members together; past it the members with the longest queues
    /// are dropped until the relay fits (the limit holds at every instant).
    pub total_backlog: u64,
}

/// Bytes a connection costs beyond its messages: the 4 KiB read buffer, the request head
/// buffer while handshaking (8 KiB, freed after), the task, the WebSocket state, the
/// member's entry in its room (measured: about 2 KiB besides the buffers).
pub const PER_CONNECTION: u64 = 4 * 1024 + MAX_HEAD as u64 + 2 * 1024;

impl Limits {
    /// The most memory the room's connections and queues can take, bytes: per connection
    /// one frame being read plus one message being assembled (tungstenite reserves a whole
    /// frame when its header arrives, so both are the message cap), one message in
    /// tungstenite's write buffer when the socket will not take it, plus
    /// [`PER_CONNECTION`]; and the queued relays, capped in total.
    pub const fn budget_bytes(&self) -> u64 {
        self.max_connections.saturating_mul(3 * self.max_message + PER_CONNECTION).saturating_add(self.total_backlog)
    }
}

#[cfg(test)]
mod tests;
