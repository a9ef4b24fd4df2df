//! `wire::stream::{parse_datagram, parse_header}` on arbitrary bytes: never panics; an
//! accepted datagram's declared length is its own and at least the header; the header
//! parse agrees with the datagram parse.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::wire::stream::{HEADER_LEN, parse_datagram, parse_header};

fuzz_target!(|data: &[u8]| {
    let d = parse_datagram(data);
    let h = parse_header(data);
    if let Ok(d) = d {
        assert_eq!(d.len, data.len());
        assert!(d.len >= HEADER_LEN);
        assert_eq!(h, Ok(d), "a datagram's header parses the same");
    }
    if let Ok(h) = h {
        assert!(h.len >= HEADER_LEN);
        assert_eq!(d.is_ok(), h.len == data.len());
    }
});
