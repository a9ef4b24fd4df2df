//! Histograms travel whole: HdrHistogram V2 + DEFLATE, base64, as HdrHistogram's own
//! tools write them, so runs and hosts can be merged and percentiles computed after the
//! merge, never averaged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// Why an embedded histogram could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoError {
    /// Not base64.
    #[error("histogram is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// Not an HdrHistogram V2 (compressed) encoding.
    #[error("histogram does not decode: {0}")]
    Decode(String),
}

/// Encodes `h` as base64 of its V2+DEFLATE serialization.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serializing to a Vec cannot fail");
    STANDARD.encode(bytes)
}

/// Decodes what [`encode_histogram`] wrote (or any V2 / V2+DEFLATE histogram).
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, HistoError> {
    let bytes = STANDARD.decode(s.trim())?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).map_err(|e| HistoError::Decode(format!("{e:?}")))
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
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_histogram("not base64 !!").is_err());
        assert!(decode_histogram("AAAA").is_err());
    }
}
