//! The load client's WebSocket frame rules (`wirebench_core::load::ws`) against tungstenite's
//! reader, an independent implementation of the same standard:
//! - `head` on the input as the bytes a server sent: never panics; what it accepts,
//!   tungstenite reads as the same header (final bit, opcode, length, header size), unmasked
//!   and with no reserved bit; an incomplete header is incomplete for both; nothing over the
//!   cap is accepted;
//! - `close_code` on the input as a close frame's payload: an accepted code is one tungstenite
//!   allows too (or 1014, registered after tungstenite's list) and its reason is UTF-8;
//! - `write` of the input as a payload, with a key from its first bytes: tungstenite reads
//!   back a final, masked frame of that opcode and length, and unmasking gives the payload.

#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use tungstenite::protocol::frame::coding::{CloseCode, OpCode};
use tungstenite::protocol::frame::FrameHeader;
use wirebench_core::load::ws::{close_code, head, write, BINARY, TEXT};

/// A cap small enough for the fuzzer to cross it.
const CAP: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor::new(data);
    let theirs = FrameHeader::parse(&mut c);
    match head(data, CAP) {
        Ok(Some(h)) => {
            let (fh, len) = theirs.expect("tungstenite reads it").expect("whole for tungstenite too");
            assert_eq!((fh.is_final, u8::from(fh.opcode), len), (h.fin, h.opcode, h.len as u64));
            assert_eq!(c.position(), h.at as u64, "the same header size");
            assert!(!fh.rsv1 && !fh.rsv2 && !fh.rsv3 && fh.mask.is_none());
            assert!(h.len <= CAP);
            if h.opcode >= 8 {
                assert!(h.fin && h.len <= 125, "control frames are whole and short");
            }
        }
        Ok(None) => assert!(matches!(theirs, Ok(None)), "incomplete for both: {theirs:?}"),
        Err(_) => {}
    }

    if let Ok(Some(code)) = close_code(data) {
        assert!(CloseCode::from(code).is_allowed() || code == 1014, "{code}");
        assert!(std::str::from_utf8(&data[2..]).is_ok());
    }

    let key = match data {
        [a, b, c, d, ..] => [*a, *b, *c, *d],
        _ => [0; 4],
    };
    let opcode = if data.first().is_some_and(|b| b & 1 == 1) { TEXT } else { BINARY };
    let mut out = Vec::new();
    write(&mut out, opcode, data, key);
    let mut c = Cursor::new(&out[..]);
    let (fh, len) = FrameHeader::parse(&mut c).expect("a header").expect("whole");
    assert!(fh.is_final && fh.mask == Some(key));
    assert_eq!(u8::from(fh.opcode), opcode);
    assert!(matches!(fh.opcode, OpCode::Data(_)));
    assert_eq!(len, data.len() as u64);
    let at = usize::try_from(c.position()).unwrap();
    let unmasked: Vec<u8> = out[at..].iter().enumerate().map(|(i, b)| b ^ key[i % 4]).collect();
    assert_eq!(unmasked, data);
});
