//! The stream datagram (and TCP stream frame): a sequenced message for throughput and loss.
//!
//! ```text
//! offset size field
//!      0    2 magic 0x5742
//!      2    1 version (1)
//!      3    1 kind (3 stream)
//!      4    2 total length in bytes (datagram or frame)
//!      6    2 publisher: which of a run's parallel streams (0..)
//!      8    8 session id (chosen per run by the sender)
//!     16    8 sequence number, per publisher, from 0
//!     24    8 send time: the sender's monotonic ns
//!     32   .. payload (zeros) up to the total length
//! ```

use super::{DecodeError, Kind, MAGIC, VERSION};

/// Header size, and the smallest stream datagram.
pub const HEADER_LEN: usize = 32;
/// The largest UDP stream datagram over IPv4.
pub const MAX_UDP_LEN: usize = 65_507;

/// Writes the fixed fields of a stream message into `buf` (whose length is the message
/// size); then [`stamp`] each send.
///
/// # Panics
/// If `buf` is shorter than [`HEADER_LEN`] or longer than 65,535 bytes.
pub fn init(buf: &mut [u8], session: u64, publisher: u16) {
    let len = u16::try_from(buf.len())
        .ok()
        .filter(|&l| usize::from(l) >= HEADER_LEN)
        .expect("stream message size out of range");
    buf[..HEADER_LEN].fill(0);
    buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    buf[2] = VERSION;
    buf[3] = Kind::Stream as u8;
    buf[4..6].copy_from_slice(&len.to_be_bytes());
    buf[6..8].copy_from_slice(&publisher.to_be_bytes());
    buf[8..16].copy_from_slice(&session.to_be_bytes());
}

/// Sets sequence number and send time: the per-message work on the send path.
#[inline]
pub fn stamp(buf: &mut [u8], seq: u64, sent_ns: u64) {
    buf[16..24].copy_from_slice(&seq.to_be_bytes());
    buf[24..32].copy_from_slice(&sent_ns.to_be_bytes());
}

/// A checked view of a stream message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Total length declared (equals the datagram's length over UDP).
    pub len: usize,
    /// Publisher index.
    pub publisher: u16,
    /// Session id.
    pub session: u64,
    /// Sequence number.
    pub seq: u64,
    /// Sender's monotonic send time.
    pub sent_ns: u64,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Parses the header at the start of `buf`. Over UDP pass the whole datagram and check
/// `len == buf.len()` with [`parse_datagram`]; over TCP the frame may continue past `buf`.
pub fn parse_header(buf: &[u8]) -> Result<Header, DecodeError> {
    super::check_preamble(buf, Kind::Stream, HEADER_LEN)?;
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::Truncated { need: HEADER_LEN, got: buf.len() });
    }
    let len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
    if len < HEADER_LEN {
        return Err(DecodeError::Length { declared: len, got: HEADER_LEN });
    }
    Ok(Header {
        len,
        publisher: u16::from_be_bytes([buf[6], buf[7]]),
        session: u64_at(buf, 8),
        seq: u64_at(buf, 16),
        sent_ns: u64_at(buf, 24),
    })
}

/// Parses a whole UDP datagram: the declared length must be the datagram's.
pub fn parse_datagram(buf: &[u8]) -> Result<Header, DecodeError> {
    let h = parse_header(buf)?;
    if h.len != buf.len() {
        return Err(DecodeError::Length { declared: h.len, got: buf.len() });
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_what_is_not_a_stream_message() {
        let mut b = vec![0u8; 64];
        init(&mut b, 1, 2);
        stamp(&mut b, 3, 4);
        assert!(parse_datagram(&b).is_ok());
        assert!(matches!(parse_datagram(&b[..40]), Err(DecodeError::Length { declared: 64, got: 40 })));
        let mut p = b.clone();
        p[3] = Kind::Probe as u8;
        assert_eq!(parse_datagram(&p), Err(DecodeError::Kind(1)));
        let mut f = b.clone();
        f[0] = 1;
        assert!(matches!(parse_datagram(&f), Err(DecodeError::Foreign(_))));
        assert!(matches!(parse_datagram(&b[..10]), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn a_header_alone_is_a_message_and_a_shorter_declared_length_is_not() {
        let mut h = vec![0u8; HEADER_LEN];
        init(&mut h, 1, 2);
        assert_eq!(parse_datagram(&h).map(|x| x.len), Ok(HEADER_LEN));
        let mut short = h.clone();
        short[4..6].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(parse_header(&short), Err(DecodeError::Length { declared: 10, got: HEADER_LEN }));
        assert!(matches!(parse_header(&h[..HEADER_LEN - 1]), Err(DecodeError::Truncated { .. })));
    }

    proptest! {
        #[test]
        fn round_trip(len in HEADER_LEN..3000usize, session: u64, publisher: u16, seq: u64, t: u64) {
            let mut b = vec![0xEE; len];
            init(&mut b, session, publisher);
            stamp(&mut b, seq, t);
            let h = parse_datagram(&b).unwrap();
            prop_assert_eq!(h, Header { len, publisher, session, seq, sent_ns: t });
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = parse_datagram(&bytes);
        }
    }
}
