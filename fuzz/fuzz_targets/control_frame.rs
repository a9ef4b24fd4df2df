//! Control frames: `wire::control::body_len` on the first 8 bytes and the JSON body as a
//! `Control` message. Never panics; an accepted length is within the limit; an accepted
//! message serialises and loads back equal.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::wire::control::{Control, HEADER_LEN, MAX_BODY, body_len};

fuzz_target!(|data: &[u8]| {
    let Some(h) = data.first_chunk::<HEADER_LEN>() else {
        return;
    };
    if let Ok(len) = body_len(h) {
        assert!(len <= MAX_BODY);
    }
    if let Ok(m) = serde_json::from_slice::<Control>(&data[HEADER_LEN..]) {
        let again = serde_json::to_vec(&m).expect("a parsed message serialises");
        let back: Control = serde_json::from_slice(&again).expect("and loads back");
        // Floats may move by an ulp through serde_json's default parser.
        if !format!("{m:?}").contains('.') {
            assert_eq!(back, m);
        }
    }
});
