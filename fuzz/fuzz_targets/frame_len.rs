//! `frame_len` (TCP framing) on the first 8 bytes of arbitrary input: it must never panic,
//! must return the declared length when it accepts, and must agree with `Probe::parse`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::wire::probe::{MIN_LEN, Probe, frame_len};

fuzz_target!(|data: &[u8]| {
    let Some(header) = data.first_chunk::<8>() else {
        return;
    };
    let framed = frame_len(header);
    if let Ok(len) = framed {
        assert!(len >= MIN_LEN, "a frame shorter than the compact probe is rejected");
        assert_eq!(len, usize::from(u16::from_be_bytes([header[4], header[5]])));
    }
    // Framing and parsing agree: a datagram that parses frames as itself, and a frame
    // that is accepted and complete parses.
    let parsed = Probe::parse(data);
    if parsed.is_ok() {
        assert_eq!(framed, Ok(data.len()));
    }
    if framed == Ok(data.len()) {
        assert!(parsed.is_ok(), "accepted frame of {} bytes does not parse: {parsed:?}", data.len());
    }
});
