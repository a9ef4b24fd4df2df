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
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};

/// HdrHistogram's V2 cookies (uncompressed, and compressed with DEFLATE).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// Header of an uncompressed V2 histogram: cookie, payload length, normalizing offset,
/// significant digits, lowest, highest, integer-to-double ratio.
const V2_HEADER: usize = 40;
/// Largest encoded histogram accepted (base64 text, and decompressed bytes). A wirebench
/// histogram (3 digits over 1 ns .. 1 h) is at most about 350 KB uncompressed.
const MAX_BYTES: usize = 4 << 20;
/// Most significant digits accepted: wirebench writes 3 (HdrHistogram's usual). Each digit
/// more multiplies the counts array by 10, and 5 digits over 1..2^63 is 6 million counts
/// (8 s to render one report before this bound).
pub const MAX_SIGFIG: u32 = 3;
/// Highest trackable value accepted: 2^48 ns, 78 hours (wirebench writes 1 hour).
pub const MAX_HIGHEST: u64 = 1 << 48;

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

fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
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
                return Err(bad("decompresses to more than 4 MiB"));
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
    let sigfig = be_u32(v2, 12);
    if !(1..=MAX_SIGFIG).contains(&sigfig) {
        return Err(HistoError::Decode(format!("{sigfig} significant digits (1 to {MAX_SIGFIG} accepted)")));
    }
    let (lowest, highest) = (be_u64(v2, 16), be_u64(v2, 24));
    if lowest == 0 || highest > MAX_HIGHEST || highest < lowest.saturating_mul(2) {
        return Err(HistoError::Decode(format!(
            "range {lowest}..{highest} (1 <= lowest, 2 * lowest <= highest <= 2^48 accepted)"
        )));
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

/// Encodes `h` as base64 of its plain V2 serialization (no DEFLATE), which
/// [`decode_histogram`] reads as well. For histograms made by the hundred with a few samples
/// each (the mesh agent's cells, every window): DEFLATE allocates and zeroes a fresh
/// compressor of about 200 KiB per call, and on a sparse histogram (the V2 payload is
/// already run-length encoded) it saves nothing.
pub fn encode_histogram_plain(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new().serialize(h, &mut bytes).expect("serializing to a Vec cannot fail");
    STANDARD.encode(bytes)
}

/// Decodes what [`encode_histogram`] wrote (or any V2 / V2+DEFLATE histogram), refusing
/// malformed or oversized input with an error, never a panic.
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, HistoError> {
    let s = s.trim();
    if s.len() > MAX_BYTES {
        return Err(bad("longer than 4 MiB"));
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
    fn the_plain_encoding_round_trips_and_is_not_larger_for_a_sparse_histogram() {
        let mut h = histogram();
        for v in [31_000u64, 32_500, 1_000_000_000] {
            record(&mut h, v);
        }
        let plain = encode_histogram_plain(&h);
        let raw = STANDARD.decode(&plain).unwrap();
        assert_eq!(be_u32(&raw, 0), V2_COOKIE, "uncompressed V2");
        assert_eq!(decode_histogram(&plain).unwrap(), h);
        assert!(plain.len() <= encode_histogram(&h).len(), "{} vs {}", plain.len(), encode_histogram(&h).len());
        assert_eq!(decode_histogram(&encode_histogram_plain(&histogram())).unwrap().len(), 0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_histogram("not base64 !!").is_err());
        assert!(decode_histogram("AAAA").is_err());
        assert!(decode_histogram("").is_err());
    }

    fn v2(payload: &[u8], declared: u32) -> String {
        v2_with(payload, declared, 3, 1, 3_600_000_000_000)
    }

    fn v2_with(payload: &[u8], declared: u32, sigfig: u32, lowest: u64, highest: u64) -> String {
        let mut b = Vec::new();
        b.extend_from_slice(&V2_COOKIE.to_be_bytes());
        b.extend_from_slice(&declared.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&sigfig.to_be_bytes());
        b.extend_from_slice(&lowest.to_be_bytes());
        b.extend_from_slice(&highest.to_be_bytes());
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

    /// `raw` behind the compressed cookie, DEFLATE-compressed, base64.
    fn compressed(raw: &[u8]) -> String {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(raw).unwrap();
        let body = z.finish().unwrap();
        let mut b = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        b.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        b.extend_from_slice(&body);
        STANDARD.encode(b)
    }

    /// A small bomb (8 MiB of zeros behind a V2 header) is refused for its size, having
    /// inflated at most one byte past the bound.
    #[test]
    fn a_compressed_bomb_is_refused_for_its_size() {
        let mut raw = STANDARD.decode(v2(&[], 0)).unwrap();
        raw.resize(2 * MAX_BYTES, 0);
        let e = decode_histogram(&compressed(&raw)).unwrap_err().to_string();
        assert!(e.contains("more than 4 MiB"), "{e}");
        // the same framing around a real histogram decodes
        let raw = STANDARD.decode(v2(&[2], 1)).unwrap();
        assert_eq!(decode_histogram(&compressed(&raw)).unwrap().len(), 1);
    }

    #[test]
    fn text_past_the_bound_is_refused_before_base64() {
        let e = decode_histogram(&"A".repeat(MAX_BYTES + 1)).unwrap_err();
        assert!(matches!(&e, HistoError::Decode(why) if why.contains("longer than 4 MiB")), "{e}");
    }

    #[test]
    fn a_header_cut_short_is_an_error_not_a_panic() {
        for n in [8, 16, 24, 39] {
            let b = &STANDARD.decode(v2(&[], 0)).unwrap()[..n];
            let e = decode_histogram(&STANDARD.encode(b)).unwrap_err().to_string();
            assert!(e.contains("not an HdrHistogram V2"), "{n} bytes: {e}");
        }
    }

    /// A whole header and no counts is an empty histogram (nothing is cut off).
    #[test]
    fn a_header_with_an_empty_payload_is_an_empty_histogram() {
        assert_eq!(decode_histogram(&v2(&[], 0)).unwrap().len(), 0);
    }

    /// The bounds are inclusive: the widest range and the narrowest HdrHistogram takes.
    #[test]
    fn the_range_bounds_are_accepted() {
        let one = [2u8];
        assert!(decode_histogram(&v2_with(&one, 1, 3, 1, MAX_HIGHEST)).is_ok(), "highest 2^48");
        assert!(decode_histogram(&v2_with(&one, 1, 3, 100, 200)).is_ok(), "highest = 2 * lowest");
        assert!(decode_histogram(&v2_with(&one, 1, 3, 1, MAX_HIGHEST + 1)).is_err());
        assert!(decode_histogram(&v2_with(&one, 1, 3, 100, 199)).is_err());
    }

    /// The scan reads each count by its own length: an `i64::MIN` after a one-byte count
    /// is still found, and a nine-byte count whose last byte is 0xff but whose other
    /// bytes carry no value bits is not taken for it.
    #[test]
    fn counts_are_scanned_one_encoding_at_a_time() {
        let mut after = vec![2u8];
        after.extend_from_slice(&[0xff; 9]);
        let e = decode_histogram(&v2(&after, 10)).unwrap_err().to_string();
        assert!(e.contains("count out of range"), "{e}");
        let mut high = vec![0x80u8; 8];
        high.push(0xff);
        assert!(check_v2(&STANDARD.decode(v2(&high, 9)).unwrap()).is_ok());
    }

    /// Rendering cost grows with the counts array: 5 digits over 1..2^63 took seconds per
    /// histogram. Refused before the deserializer allocates it.
    #[test]
    fn precision_and_range_are_bounded() {
        let one = [2u8];
        assert!(decode_histogram(&v2_with(&one, 1, 3, 1_000, 3_600_000_000_000)).is_ok(), "load's bounds");
        for (sigfig, lowest, highest, why) in [
            (5, 1, i64::MAX as u64, "significant digits"),
            (4, 1, 3_600_000_000_000, "significant digits"),
            (0, 1, 3_600_000_000_000, "significant digits"),
            (3, 1, 1 << 60, "range"),
            (3, 0, 3_600_000_000_000, "range"),
            (3, 100, 150, "range"),
        ] {
            let e = decode_histogram(&v2_with(&one, 1, sigfig, lowest, highest)).unwrap_err().to_string();
            assert!(e.contains(why), "{sigfig} {lowest} {highest}: {e}");
        }
    }
}
