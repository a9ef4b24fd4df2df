//! The handshake's decoders: the knock datagram (`parse_knock`) and the hex tags and proofs
//! serve checks (`unhex`, `verify_client`, `verify_serve`). The first byte picks which.
//! Never panics; an accepted knock is exactly `knock(secret)`; a tag verifies only when it is
//! the one the key makes for those nonces.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::auth::Key;
use wirebench_core::wire::handshake::{client_tag, knock, parse_knock, serve_proof, unhex, verify_client, verify_serve};

const NC: &str = "00112233445566778899aabbccddeeff";
const NS: &str = "ffeeddccbbaa99887766554433221100";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 0 {
        if let Ok(s) = parse_knock(rest) {
            assert_eq!(knock(&s).as_slice(), rest);
        }
        return;
    }
    let s = String::from_utf8_lossy(rest);
    if let Some(b) = unhex(&s) {
        assert_eq!(b.len() * 2, s.len());
    }
    let k = Key::new(b"fuzz");
    let ok_client = verify_client(&k, NC, NS, &s);
    assert_eq!(ok_client, s.eq_ignore_ascii_case(&client_tag(&k, NC, NS)));
    let ok_serve = verify_serve(&k, NC, NS, &s);
    assert_eq!(ok_serve, s.eq_ignore_ascii_case(&serve_proof(&k, NC, NS)));
    // A nonce of any text never panics either.
    let _ = verify_client(&k, &s, NS, &client_tag(&k, NC, NS));
});
