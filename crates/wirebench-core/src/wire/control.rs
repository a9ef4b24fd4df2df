//! Control messages between a client and `serve`, on a TCP connection to the same port as
//! the probes: frames of an 8-byte header (magic, control version, kind 4, a 32-bit length)
//! and that many bytes of JSON. A connection whose first frame is a probe carries probes; one
//! whose first frame is control carries control (and, for TCP streams, data after it).
//!
//! ```text
//! offset size field
//!      0    2 magic 0x5742
//!      2    1 control version (3; probes and stream messages stay at 1)
//!      3    1 kind (4 control)
//!      4    4 length of the JSON that follows (at most 64 KiB; 4 KiB before authentication)
//!      8   .. JSON: one `Control` message
//! ```
//!
//! Every message is checked once, here, when it is decoded ([`decode`]): sizes, counts,
//! rates, durations, hex fields and list lengths. Code past the decoder never sees a rate of
//! 0, -1, NaN or 5e-324, nor a list of a million publishers. The handshake that precedes a
//! `start` (nonces, HMAC tags, the reverse-UDP knock) is in [`super::handshake`].

use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use super::handshake::{NONCE_HEX, SECRET_HEX, TAG_HEX, is_hex};
use super::{DecodeError, Kind, MAGIC};
use crate::snmp::Snmp;
use crate::stream::StreamCounts;

/// The version byte of control frames (the common header's second byte). Version 1 sent the
/// token as a string and let a client name serve's reverse-UDP destination port; version 2
/// had serve prove the token before the client did (an offline oracle for anyone who said
/// `hello`).
pub const VERSION: u8 = 3;
/// The oldest control version; a frame of it or of any version up to [`VERSION`] gets a
/// [`legacy_refusal`].
pub const LEGACY_VERSION: u8 = 1;
/// Control frame header size.
pub const HEADER_LEN: usize = 8;
/// Largest JSON body accepted (an `interval` of 64 publishers is about 25 KB).
pub const MAX_BODY: usize = 64 << 10;
/// Largest body before the client has been authenticated (`hello`, `start`).
pub const MAX_FIRST_BODY: usize = 4 << 10;
/// Most publishers in one session (and entries in a list of per-publisher values).
pub const MAX_PUBLISHERS: u16 = 64;
/// Slowest rate a client may ask for, messages per second per publisher: one message each
/// 1,000 s. Anything slower is a request to send nothing, and smaller values overflow an
/// intended-send-time schedule.
pub const MIN_RATE_PER_S: f64 = 1e-3;
/// Fastest rate a client may name, messages per second per publisher (beyond any NIC).
pub const MAX_RATE_PER_S: f64 = 1e10;
/// Longest duration a client may name (serve caps it further with `--max-duration`).
pub const MAX_DURATION_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;
/// Longest `error` message accepted, bytes.
pub const MAX_MESSAGE: usize = 1024;
/// Smallest stream message (the stream header).
const MIN_SIZE: usize = super::stream::HEADER_LEN;

/// Writes the frame header for a body of `len` bytes.
///
/// # Panics
/// If `len` exceeds [`MAX_BODY`].
pub fn header(len: usize) -> [u8; HEADER_LEN] {
    assert!(len <= MAX_BODY, "control message too large");
    header_with(VERSION, len)
}

fn header_with(version: u8, len: usize) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    h[2] = version;
    h[3] = Kind::Control as u8;
    h[4..8].copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    h
}

/// Reads the body length from a control frame header: magic, version, kind, and a length of
/// at most `max` (pass [`MAX_BODY`], or [`MAX_FIRST_BODY`] before authentication).
pub fn body_len(h: &[u8; HEADER_LEN], max: usize) -> Result<usize, DecodeError> {
    let magic = u16::from_be_bytes([h[0], h[1]]);
    if magic != MAGIC {
        return Err(DecodeError::Foreign(magic));
    }
    if h[2] != VERSION {
        return Err(DecodeError::Version(h[2]));
    }
    if h[3] != Kind::Control as u8 {
        return Err(DecodeError::Kind(h[3]));
    }
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    if len > max.min(MAX_BODY) {
        return Err(DecodeError::Length { declared: len, got: max.min(MAX_BODY) });
    }
    Ok(len)
}

/// A whole frame telling a client of an older control version (1 or 2) why it was refused,
/// in the framing that client reads (`{"type":"error","message":...}` behind a header of its
/// version).
pub fn legacy_refusal(version: u8, message: &str) -> Vec<u8> {
    let body = serde_json::to_vec(&Control::Error { message: message.chars().take(MAX_MESSAGE / 4).collect() })
        .unwrap_or_default();
    let mut f = header_with(version, body.len()).to_vec();
    f.extend_from_slice(&body);
    f
}

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, serve receives.
    Forward,
    /// Serve sends to the client (only ever to the control connection's address).
    Reverse,
    /// Both at once.
    Both,
}

/// Transport of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamProto {
    /// UDP datagrams.
    Udp,
    /// Frames on a TCP connection.
    Tcp,
}

/// What a client asks of serve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamRequest {
    /// The run's session id.
    pub session: u64,
    /// The client's token. Never sent: the handshake proves it with an HMAC tag instead.
    #[serde(skip)]
    pub token: Option<String>,
    /// Transport.
    pub proto: StreamProto,
    /// Message size, bytes.
    pub size: usize,
    /// Which way.
    pub direction: Direction,
    /// Parallel publishers.
    pub publishers: u16,
    /// Reverse: the rate serve should send at, messages/s per publisher (`None` = as fast
    /// as serve allows).
    pub rate_per_s: Option<f64>,
    /// Reverse: how long serve sends, ns (0 = serve's cap; always capped by serve).
    pub duration_ns: u64,
    /// Reverse: how many messages per publisher at most.
    pub count: Option<u64>,
    /// Not sent (version 1 named the reverse port here): serve learns the port from the
    /// knock datagram instead.
    #[serde(skip)]
    pub client_port: Option<u16>,
    /// Forward multicast: join this group and receive there.
    pub group: Option<SocketAddrV4>,
    /// Forward UDP: the receive buffer serve asks for on its data socket, bytes
    /// (`--rcvbuf`; 1..=[`MAX_RCVBUF`]; absent: serve's own, 16 MiB). The kernel rounds it
    /// up to its minimum; `ready` says what was granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<usize>,
}

/// The largest receive buffer a client may ask serve for, bytes (serve's own default).
pub const MAX_RCVBUF: usize = 16 << 20;

/// Counters of one publisher as a receiver saw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherCounts {
    /// Publisher index.
    pub publisher: u16,
    /// The counts.
    pub counts: StreamCounts,
}

/// What serve granted: the limits it will actually send under (reverse).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Granted {
    /// Messages per second per publisher serve sends at (`None`: flat out).
    pub rate_per_s: Option<f64>,
    /// How long serve sends, ns.
    pub duration_ns: u64,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Client -> serve, the first frame: the client's nonce (hex).
    Hello {
        /// 16 random bytes, hex.
        nonce: String,
    },
    /// Serve -> client: serve's nonce, whether a tag is required, and (with a token) the
    /// salt of serve's key. Nothing here depends on the token.
    Challenge {
        /// 16 random bytes, hex.
        nonce: String,
        /// An `auth` with the client's tag must come before `start`.
        auth: bool,
        /// The salt the token's key is derived with (`crate::auth::Key::derive`), when serve
        /// has a token; at most [`crate::auth::MAX_SALT`] bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        salt: Option<String>,
    },
    /// Serve -> client, only after a client's `auth` verified: serve's own proof.
    Welcome {
        /// HMAC proof of serve (hex, 64 digits).
        proof: String,
    },
    /// Client -> serve, right before `start` when the client has a token: its proof.
    Auth {
        /// HMAC-SHA256 tag over both nonces (hex, 64 digits).
        tag: String,
    },
    /// Client -> serve: start a stream.
    Start(StreamRequest),
    /// Serve -> client (reverse UDP): send a knock datagram with `secret` from the port that
    /// is to receive the data, to serve's UDP `port`, until `ready` arrives.
    Knock {
        /// Serve's UDP port for the knock.
        port: u16,
        /// The session's secret (16 bytes from the OS RNG, hex).
        secret: String,
    },
    /// Serve -> client: ready; forward UDP data goes to this port (same host).
    Ready {
        /// UDP port for forward data (0 for TCP: data follows on this connection).
        data_port: u16,
        /// The receive buffer the kernel granted, bytes (so the client can warn).
        rcvbuf: usize,
        /// What serve will send under (reverse).
        #[serde(default)]
        granted: Granted,
    },
    /// Serve -> client: once per second, what serve received in that second.
    Interval {
        /// Per publisher.
        publishers: Vec<PublisherCounts>,
        /// Forward UDP: serve's host's kernel counters since the session began, read right
        /// before the counts (the same tables as `Result`'s `kernel`; absent from an older
        /// serve), so the client splits each interval's loss.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<Snmp>,
    },
    /// Client -> serve: the client finished sending; these are its per-publisher counts.
    Finish {
        /// Messages sent per publisher.
        sent: Vec<u64>,
    },
    /// Serve -> client: the lifetime counts (forward) and what serve sent (reverse).
    Result {
        /// Received per publisher (forward).
        received: Vec<PublisherCounts>,
        /// Sent per publisher (reverse).
        sent: Vec<u64>,
        /// Reverse: how long serve's sending took (first send to the end of the last), ns,
        /// the time base of the run's rates (0 from an older serve).
        #[serde(default)]
        send_ns: u64,
        /// Forward: datagrams on the session's socket that were not its stream messages.
        #[serde(default)]
        foreign: u64,
        /// Forward UDP: serve's host's kernel counters over the session (the difference of
        /// `/proc/net/snmp`'s `Udp` and `Tcp` tables; host-wide).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<Snmp>,
        /// Forward UDP: serve's receiving thread's wake-up delay (absent from an older serve).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wake: Option<crate::stream::wake::WakeDelay>,
    },
    /// Either way: a refusal or failure, in words.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// Why a control body was refused: its JSON, or a value in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// Not JSON, or not a message of this version.
    #[error("not a control message: {0}")]
    Json(String),
    /// A field out of range, in words the client is shown.
    #[error("{0}")]
    Value(String),
}

/// Parses and checks one control body. The one place numbers from the wire are validated.
pub fn decode(body: &[u8]) -> Result<Control, ControlError> {
    let m: Control = serde_json::from_slice(body).map_err(|e| ControlError::Json(e.to_string()))?;
    m.check().map_err(ControlError::Value)?;
    Ok(m)
}

fn list_len<T>(what: &str, v: &[T]) -> Result<(), String> {
    if v.len() > usize::from(MAX_PUBLISHERS) {
        return Err(format!("{what}: {} entries, at most {MAX_PUBLISHERS}", v.len()));
    }
    Ok(())
}

fn hex_field(what: &str, s: &str, len: usize) -> Result<(), String> {
    if s.len() != len || !is_hex(s) {
        return Err(format!("{what} must be {len} hex digits"));
    }
    Ok(())
}

fn counts_ok(p: &[PublisherCounts]) -> Result<(), String> {
    list_len("publishers", p)?;
    for c in p {
        if c.publisher >= MAX_PUBLISHERS {
            return Err(format!("publisher {} out of range", c.publisher));
        }
        let j = c.counts.jitter_ns;
        if !j.is_finite() || j < 0.0 {
            return Err(format!("jitter {j} is not a finite non-negative number"));
        }
    }
    Ok(())
}

/// Most tables in a `result`'s kernel counters (`/proc/net/snmp` has six; serve sends `Udp`,
/// `Tcp`, `Softnet` and `Nic`).
pub const MAX_KERNEL_TABLES: usize = 8;
/// Most fields in one table of a `result`'s kernel counters, and longest name, bytes.
pub const MAX_KERNEL_FIELDS: usize = 64;

fn kernel_ok(k: &Snmp) -> Result<(), String> {
    if k.0.len() > MAX_KERNEL_TABLES {
        return Err(format!("kernel: {} tables, at most {MAX_KERNEL_TABLES}", k.0.len()));
    }
    for (t, fields) in &k.0 {
        if fields.len() > MAX_KERNEL_FIELDS {
            return Err(format!("kernel: {} fields in a table, at most {MAX_KERNEL_FIELDS}", fields.len()));
        }
        if std::iter::once(t).chain(fields.keys()).any(|n| n.is_empty() || n.len() > MAX_KERNEL_FIELDS) {
            return Err(format!("kernel: a table or field name outside 1..={MAX_KERNEL_FIELDS} bytes"));
        }
    }
    Ok(())
}

impl StreamRequest {
    /// Every number and combination a serve can act on, checked.
    pub fn check(&self) -> Result<(), String> {
        let max = match self.proto {
            StreamProto::Udp => super::stream::MAX_UDP_LEN,
            StreamProto::Tcp => usize::from(u16::MAX),
        };
        if self.size < MIN_SIZE || self.size > max {
            return Err(format!("size {} is outside {MIN_SIZE}..={max}", self.size));
        }
        if self.publishers == 0 || self.publishers > MAX_PUBLISHERS {
            return Err(format!("{} publishers: serve takes 1..={MAX_PUBLISHERS}", self.publishers));
        }
        if let Some(r) = self.rate_per_s
            && !(MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&r)
        {
            return Err(format!("rate {r} msg/s is outside {MIN_RATE_PER_S}..={MAX_RATE_PER_S:e} per publisher"));
        }
        if self.duration_ns > MAX_DURATION_NS {
            return Err(format!("duration {} ns is over 7 days", self.duration_ns));
        }
        if self.proto == StreamProto::Tcp && self.direction == Direction::Both {
            return Err("TCP runs one direction per connection: run --reverse separately".into());
        }
        if let Some(b) = self.rcvbuf
            && !(1..=MAX_RCVBUF).contains(&b)
        {
            return Err(format!("receive buffer {b} bytes is outside 1..={MAX_RCVBUF}"));
        }
        if self.proto == StreamProto::Tcp && self.group.is_some() {
            return Err("a multicast group takes UDP".into());
        }
        if let Some(g) = self.group
            && !g.ip().is_multicast()
        {
            return Err(format!("{g} is not a multicast group"));
        }
        Ok(())
    }
}

impl Control {
    /// The checks [`decode`] applies.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Self::Hello { nonce } => hex_field("nonce", nonce, NONCE_HEX),
            Self::Challenge { nonce, salt, .. } => {
                hex_field("nonce", nonce, NONCE_HEX)?;
                match salt {
                    Some(s) if s.len() > crate::auth::MAX_SALT => {
                        Err(format!("salt of {} bytes (at most {})", s.len(), crate::auth::MAX_SALT))
                    }
                    _ => Ok(()),
                }
            }
            Self::Welcome { proof } => hex_field("proof", proof, TAG_HEX),
            Self::Auth { tag } => hex_field("tag", tag, TAG_HEX),
            Self::Start(r) => r.check(),
            Self::Knock { secret, .. } => hex_field("secret", secret, SECRET_HEX),
            Self::Ready { granted, .. } => match granted.rate_per_s {
                Some(r) if !r.is_finite() || r <= 0.0 => Err(format!("granted rate {r} is not positive")),
                _ => Ok(()),
            },
            Self::Interval { publishers, kernel } => {
                counts_ok(publishers)?;
                kernel.as_ref().map_or(Ok(()), kernel_ok)
            }
            Self::Finish { sent } => list_len("sent", sent),
            // `send_ns` and `foreign` are a time and a count: any u64 is only ever divided by
            // or shown, so no range is refused (as with the counts in `received`).
            Self::Result { received, sent, kernel, wake, .. } => {
                counts_ok(received)?;
                list_len("sent", sent)?;
                wake.as_ref().map_or(Ok(()), crate::stream::wake::WakeDelay::check)?;
                kernel.as_ref().map_or(Ok(()), kernel_ok)
            }
            Self::Error { message } if message.len() > MAX_MESSAGE => {
                Err(format!("error message of {} bytes", message.len()))
            }
            Self::Error { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
