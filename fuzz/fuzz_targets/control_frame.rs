//! Control frames (version 2): `wire::control::body_len` on the first 8 bytes, under both
//! caps, and the rest as a body through `wire::control::decode`. Never panics; an accepted
//! length is within its cap; an accepted message passes its own checks (every rate of a
//! `start` is finite and within range, lists at most 64 long), serialises and decodes back
//! to the same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::wire::control::{
    Control, HEADER_LEN, MAX_BODY, MAX_FIRST_BODY, MAX_PUBLISHERS, MAX_RATE_PER_S, MIN_RATE_PER_S, body_len, decode,
};

fuzz_target!(|data: &[u8]| {
    let Some(h) = data.first_chunk::<HEADER_LEN>() else {
        return;
    };
    if let Ok(len) = body_len(h, MAX_BODY) {
        assert!(len <= MAX_BODY);
        assert_eq!(body_len(h, MAX_FIRST_BODY).is_ok(), len <= MAX_FIRST_BODY);
    }
    if let Ok(m) = decode(&data[HEADER_LEN..]) {
        assert_eq!(m.check(), Ok(()));
        match &m {
            Control::Start(r) => {
                assert!((1..=MAX_PUBLISHERS).contains(&r.publishers));
                if let Some(rate) = r.rate_per_s {
                    assert!(rate.is_finite() && (MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&rate));
                }
                assert!(r.token.is_none() && r.client_port.is_none(), "never read from the wire");
            }
            Control::Finish { sent } => assert!(sent.len() <= usize::from(MAX_PUBLISHERS)),
            _ => {}
        }
        let again = serde_json::to_vec(&m).expect("a decoded message serialises");
        let back = decode(&again).expect("and decodes again");
        // Floats may move by an ulp through serde_json's default parser.
        if !format!("{m:?}").contains('.') {
            assert_eq!(back, m);
        }
    }
});
