//! Control messages between a client and `serve`, on a TCP connection to the same port as
//! the probes: frames of an 8-byte header (magic, version, kind 4, a 32-bit length) and that
//! many bytes of JSON. A connection whose first frame is a probe carries probes; one whose
//! first frame is control carries control (and, for TCP streams, data after it).
//!
//! ```text
//! offset size field
//!      0    2 magic 0x5742
//!      2    1 version (1)
//!      3    1 kind (4 control)
//!      4    4 length of the JSON that follows (at most 1 MiB)
//!      8   .. JSON: one `Control` message
//! ```

use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use super::{DecodeError, Kind, MAGIC, VERSION};
use crate::snmp::Snmp;
use crate::stream::StreamCounts;

/// Control frame header size.
pub const HEADER_LEN: usize = 8;
/// Largest JSON body accepted.
pub const MAX_BODY: usize = 1 << 20;

/// Writes the frame header for a body of `len` bytes.
///
/// # Panics
/// If `len` exceeds [`MAX_BODY`].
pub fn header(len: usize) -> [u8; HEADER_LEN] {
    assert!(len <= MAX_BODY, "control message too large");
    let mut h = [0u8; HEADER_LEN];
    h[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    h[2] = VERSION;
    h[3] = Kind::Control as u8;
    #[expect(clippy::cast_possible_truncation, reason = "checked above")]
    h[4..8].copy_from_slice(&(len as u32).to_be_bytes());
    h
}

/// Reads the body length from a control frame header.
pub fn body_len(h: &[u8; HEADER_LEN]) -> Result<usize, DecodeError> {
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
    if len > MAX_BODY {
        return Err(DecodeError::Length { declared: len, got: MAX_BODY });
    }
    Ok(len)
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
    /// Optional shared secret.
    pub token: Option<String>,
    /// Transport.
    pub proto: StreamProto,
    /// Message size, bytes.
    pub size: usize,
    /// Which way.
    pub direction: Direction,
    /// Parallel publishers.
    pub publishers: u16,
    /// Reverse: the rate serve should send at (messages/s; `None` = as fast as it can).
    pub rate_per_s: Option<f64>,
    /// Reverse: how long serve sends, ns (capped by serve).
    pub duration_ns: u64,
    /// Reverse: how many messages per publisher at most.
    pub count: Option<u64>,
    /// Reverse (UDP): the client's UDP port for the data (the address is the control
    /// connection's).
    pub client_port: Option<u16>,
    /// Forward multicast: join this group and receive there.
    pub group: Option<SocketAddrV4>,
}

/// Counters of one publisher as a receiver saw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublisherCounts {
    /// Publisher index.
    pub publisher: u16,
    /// The counts.
    pub counts: StreamCounts,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Client -> serve: start a stream.
    Start(StreamRequest),
    /// Serve -> client: ready; forward UDP data goes to this port (same host).
    Ready {
        /// UDP port for forward data (0 for TCP: data follows on this connection).
        data_port: u16,
        /// The receive buffer the kernel granted, bytes (so the client can warn).
        rcvbuf: usize,
    },
    /// Serve -> client: once per second, what serve received in that second.
    Interval {
        /// Per publisher.
        publishers: Vec<PublisherCounts>,
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
    },
    /// Either way: a refusal or failure, in words.
    Error {
        /// What went wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_limits() {
        let h = header(1234);
        assert_eq!(body_len(&h), Ok(1234));
        let mut big = h;
        big[4..8].copy_from_slice(&(2u32 << 20).to_be_bytes());
        assert!(matches!(body_len(&big), Err(DecodeError::Length { .. })));
        let mut probe = h;
        probe[3] = Kind::Probe as u8;
        assert_eq!(body_len(&probe), Err(DecodeError::Kind(1)));
    }

    #[test]
    fn messages_are_tagged_json() {
        let m = Control::Finish { sent: vec![1, 2] };
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(j, r#"{"type":"finish","sent":[1,2]}"#);
        assert_eq!(serde_json::from_str::<Control>(&j).unwrap(), m);
    }
}
