//! `decode_histogram` (the base64 HdrHistogram V2+DEFLATE strings in saved JSON reports) on
//! arbitrary input: it must never panic or allocate without bound, and whatever it accepts
//! must encode and decode back to the same histogram.
//!
//! The first byte chooses how the rest becomes the `&str` that is decoded:
//! - even: the bytes themselves, as lossy UTF-8 (reaches the base64 and trim handling);
//! - odd: the bytes base64-encoded first, so that mutations land directly on the HdrHistogram
//!   binary encoding (cookie, header fields, DEFLATE stream, varint counts) instead of being
//!   spent on producing valid base64.

#![no_main]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use libfuzzer_sys::fuzz_target;
use wirebench_core::report::{decode_histogram, encode_histogram};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = if mode & 1 == 0 { String::from_utf8_lossy(rest).into_owned() } else { STANDARD.encode(rest) };
    let Ok(h) = decode_histogram(&text) else {
        return;
    };
    let again = decode_histogram(&encode_histogram(&h)).expect("an encoded histogram decodes");
    assert_eq!(again, h, "decode, encode, decode loses nothing");
});
