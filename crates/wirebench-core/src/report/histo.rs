//! Histograms travel whole: HdrHistogram V2 + DEFLATE, base64, as HdrHistogram's own
//! tools write them, so runs and hosts can be merged and percentiles computed after the
//! merge, never averaged.
//!
//! Decoding checks the input before HdrHistogram's deserializer sees it, because saved
//! reports come from anywhere: the deserializer allocates whatever payload length the header
//! declares, and (with overflow checks on) panics on a count of `i64::MIN`. Fuzzing found
//! both (docs/fuzzing.md).

use std::io::Read as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// HdrHistogram's V2 cookies (uncompressed, and compressed with DEFLATE).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// Header of an uncompressed V2 histogram: cookie, payload length, normalizing offset,
/// significant digits, lowest, highest, integer-to-double ratio.
const V2_HEADER: usize = 40;
/// Largest encoded histogram accepted (base64 text, and decompressed bytes).
const MAX_BYTES: usize = 16 << 20;

/// Why an embedded histogram could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoError {
    /// Not base64.
    #[error("histogram is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// Not an HdrHistogram V2 (compressed) encoding, or an inconsistent one.
    #[error("histogram does not decode: {0}")]
    Decode(String),
}

fn bad(why: &str) -> HistoError {
    HistoError::Decode(why.to_owned())
}

/// Encodes `h` as base64 of its V2+DEFLATE serialization.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serializing to a Vec cannot fail");
    STANDARD.encode(bytes)
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The uncompressed V2 bytes of an encoded histogram.
fn inflate(bytes: &[u8]) -> Result<Vec<u8>, HistoError> {
    if bytes.len() < 8 {
        return Err(bad("shorter than a header"));
    }
    match be_u32(bytes, 0) {
        V2_COOKIE => Ok(bytes.to_vec()),
        V2_COMPRESSED_COOKIE => {
            let len = be_u32(bytes, 4) as usize;
            let body = bytes.get(8..8 + len).ok_or_else(|| bad("compressed length past the end"))?;
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(body)
                .take(MAX_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| HistoError::Decode(format!("inflate: {e}")))?;
            if out.len() > MAX_BYTES {
                return Err(bad("decompresses to more than 16 MiB"));
            }
            Ok(out)
        }
        _ => Err(bad("not an HdrHistogram V2 encoding")),
    }
}

/// Checks the header against the bytes and every count in the payload (zig-zag LEB128, up
/// to 9 bytes each) for the one value the deserializer cannot negate.
fn check_v2(v2: &[u8]) -> Result<(), HistoError> {
    if v2.len() < V2_HEADER || be_u32(v2, 0) != V2_COOKIE {
        return Err(bad("not an HdrHistogram V2 encoding"));
    }
    let payload = be_u32(v2, 4) as usize;
    if payload != v2.len() - V2_HEADER {
        return Err(bad("payload length disagrees with the data"));
    }
    if be_u32(v2, 12) > 5 {
        return Err(bad("more than 5 significant digits"));
    }
    let mut rest = &v2[V2_HEADER..];
    while !rest.is_empty() {
        let (mut v, mut used) = (0u64, 0usize);
        for (i, &b) in rest.iter().take(9).enumerate() {
            used = i + 1;
            if i == 8 {
                v |= u64::from(b) << 56;
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                break;
            }
        }
        // zig-zag: the encoding of i64::MIN is u64::MAX
        if v == u64::MAX {
            return Err(bad("count out of range"));
        }
        rest = &rest[used..];
    }
    Ok(())
}

/// Decodes what [`encode_histogram`] wrote (or any V2 / V2+DEFLATE histogram), refusing
/// malformed or oversized input with an error, never a panic.
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, HistoError> {
    let s = s.trim();
    if s.len() > MAX_BYTES {
        return Err(bad("longer than 16 MiB"));
    }
    let v2 = inflate(&STANDARD.decode(s)?)?;
    check_v2(&v2)?;
    Deserializer::new().deserialize(&mut v2.as_slice()).map_err(|e| HistoError::Decode(format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{histogram, record};

    #[test]
    fn round_trip_keeps_every_count() {
        let mut h = histogram();
        for v in [1u64, 17, 5_500, 5_600, 32_000, 1_000_000_000] {
            record(&mut h, v);
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back, h);
        assert_eq!(decode_histogram(&encode_histogram(&histogram())).unwrap().len(), 0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_histogram("not base64 !!").is_err());
        assert!(decode_histogram("AAAA").is_err());
        assert!(decode_histogram("").is_err());
    }

    fn v2(payload: &[u8], declared: u32) -> String {
        let mut b = Vec::new();
        b.extend_from_slice(&V2_COOKIE.to_be_bytes());
        b.extend_from_slice(&declared.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(&1u64.to_be_bytes());
        b.extend_from_slice(&3_600_000_000_000u64.to_be_bytes());
        b.extend_from_slice(&1.0f64.to_be_bytes());
        b.extend_from_slice(payload);
        STANDARD.encode(b)
    }

    #[test]
    fn a_huge_declared_payload_is_refused_before_allocating() {
        assert!(decode_histogram(&v2(&[2], u32::MAX)).is_err());
        assert_eq!(decode_histogram(&v2(&[2], 1)).unwrap().len(), 1, "one count of 1 at value 0");
    }

    #[test]
    fn the_count_the_deserializer_cannot_negate_is_refused() {
        // zig-zag u64::MAX = i64::MIN, as 9 bytes of LEB128-64b9B
        let min = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(decode_histogram(&v2(&min, 9)), Err(HistoError::Decode(_))));
    }
}
