//! The control handshake (control version 3) and the reverse-UDP knock.
//!
//! ```text
//! client                                   serve
//!   hello {nonce: Nc}              ->
//!                                  <-      challenge {nonce: Ns, auth, salt?}
//!   auth {tag}                     ->      (only with a token)
//!                                  <-      welcome {proof}   (only to a client whose tag verified)
//!   start {..}                     ->
//!                                  <-      knock {port, secret}       (reverse UDP only)
//!   knock datagram (secret) from the data port, to serve's knock port, until ready
//!                                  <-      ready {data_port, rcvbuf, granted}
//! ```
//!
//! With a token both sides prove they know it without sending it, the client first: the
//! key K is PBKDF2-HMAC-SHA256(token, "wirebench token|" | salt, 20,000 rounds)
//! ([`crate::auth::Key::derive`]); the client's tag is
//! HMAC-SHA256(K, "wirebench control v3 client" | Nc | "|" | Ns), serve's proof is
//! HMAC-SHA256(K, "wirebench control v3 serve" | Nc | "|" | Ns) (nonces as hex text). Serve
//! says nothing that depends on the token until the client's tag verified, so saying `hello`
//! gives nothing to test guesses against; a fake serve that collects a client's tag pays the
//! derivation's rounds per guess. Fresh nonces from each side
//! make a recorded tag useless on another connection, and the labels keep one side's answer
//! from serving as the other's. Tags are compared in constant time ([`crate::auth::Key`]).
//!
//! The knock (iperf3's UDP handshake): serve sends reverse data only to the control
//! connection's own address and to the port from which a datagram carrying the session's
//! secret arrived, never to a port the client merely names.
//!
//! ```text
//! knock datagram (20 bytes)
//! offset size field
//!      0    2 magic 0x5742
//!      2    1 control version (2)
//!      3    1 kind (4 control)
//!      4   16 the session's secret (from serve's `knock` message)
//! ```
//!
//! Nonces and secrets come from the OS RNG in the binary; this module only formats and
//! checks them.

use super::control::VERSION;
use super::{DecodeError, Kind, MAGIC};
use crate::auth::Key;

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 16;
/// Hex digits of a nonce.
pub const NONCE_HEX: usize = 2 * NONCE_LEN;
/// Bytes of a session secret.
pub const SECRET_LEN: usize = 16;
/// Hex digits of a secret.
pub const SECRET_HEX: usize = 2 * SECRET_LEN;
/// Hex digits of a full HMAC-SHA256 tag.
pub const TAG_HEX: usize = 64;
/// Length of a knock datagram.
pub const KNOCK_LEN: usize = 4 + SECRET_LEN;

const CLIENT_LABEL: &[u8] = b"wirebench control v3 client";
const SERVE_LABEL: &[u8] = b"wirebench control v3 serve";

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * b.len());
    for x in b {
        s.push(char::from(D[usize::from(x >> 4)]));
        s.push(char::from(D[usize::from(x & 15)]));
    }
    s
}

/// True if `s` is all hex digits (either case).
pub fn is_hex(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// The bytes of hex string `s` (`None` on an odd length or a non-hex digit).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !is_hex(s) {
        return None;
    }
    let v = |c: u8| char::from(c).to_digit(16).map(|d| u8::try_from(d).unwrap_or(0));
    s.as_bytes().chunks_exact(2).map(|p| Some(v(p[0])? << 4 | v(p[1])?)).collect()
}

/// The client's tag for nonces `nc` (client's) and `ns` (serve's), hex.
pub fn client_tag(key: &Key, nc: &str, ns: &str) -> String {
    hex(&key.tag(&[CLIENT_LABEL, nc.as_bytes(), b"|", ns.as_bytes()]))
}

/// Serve's proof for the same nonces, hex.
pub fn serve_proof(key: &Key, nc: &str, ns: &str) -> String {
    hex(&key.tag(&[SERVE_LABEL, nc.as_bytes(), b"|", ns.as_bytes()]))
}

fn verify(key: &Key, label: &[u8], nc: &str, ns: &str, tag_hex: &str) -> bool {
    let Some(tag) = unhex(tag_hex).filter(|t| t.len() == 32) else { return false };
    key.verify(&[label, nc.as_bytes(), b"|", ns.as_bytes()], &tag)
}

/// Checks a client's tag (constant time).
pub fn verify_client(key: &Key, nc: &str, ns: &str, tag_hex: &str) -> bool {
    verify(key, CLIENT_LABEL, nc, ns, tag_hex)
}

/// Checks serve's proof (constant time).
pub fn verify_serve(key: &Key, nc: &str, ns: &str, proof_hex: &str) -> bool {
    verify(key, SERVE_LABEL, nc, ns, proof_hex)
}

/// The knock datagram for `secret`.
pub fn knock(secret: &[u8; SECRET_LEN]) -> [u8; KNOCK_LEN] {
    let mut b = [0u8; KNOCK_LEN];
    b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    b[2] = VERSION;
    b[3] = Kind::Control as u8;
    b[4..].copy_from_slice(secret);
    b
}

/// The secret a knock datagram carries; never panics.
pub fn parse_knock(buf: &[u8]) -> Result<[u8; SECRET_LEN], DecodeError> {
    if buf.len() < 4 {
        return Err(DecodeError::Truncated { need: KNOCK_LEN, got: buf.len() });
    }
    let magic = u16::from_be_bytes([buf[0], buf[1]]);
    if magic != MAGIC {
        return Err(DecodeError::Foreign(magic));
    }
    if buf[2] != VERSION {
        return Err(DecodeError::Version(buf[2]));
    }
    if buf[3] != Kind::Control as u8 {
        return Err(DecodeError::Kind(buf[3]));
    }
    if buf.len() != KNOCK_LEN {
        return Err(DecodeError::Length { declared: KNOCK_LEN, got: buf.len() });
    }
    let mut s = [0u8; SECRET_LEN];
    s.copy_from_slice(&buf[4..]);
    Ok(s)
}

/// Compares two secrets in constant time.
pub fn same_secret(a: &[u8; SECRET_LEN], b: &[u8; SECRET_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NC: &str = "000102030405060708090a0b0c0d0e0f";
    const NS: &str = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

    #[test]
    fn hex_round_trip_and_refusals() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(unhex("00ABff"), Some(vec![0, 0xab, 0xff]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    /// The hex lengths the control messages check are those of a nonce's and a secret's
    /// hex text, and only hex digits are hex.
    #[test]
    fn hex_lengths_and_digits() {
        assert_eq!(hex(&[0xab; NONCE_LEN]).len(), NONCE_HEX);
        assert_eq!(hex(&[0xab; SECRET_LEN]).len(), SECRET_HEX);
        assert!(is_hex("0123456789abcdefABCDEF") && is_hex(""));
        assert!(!is_hex("0g") && !is_hex("-1") && !is_hex("0x1f"));
    }

    #[test]
    fn tags_bind_token_both_nonces_and_the_side() {
        let k = Key::new(b"s3cret");
        let t = client_tag(&k, NC, NS);
        assert_eq!(t.len(), TAG_HEX);
        assert!(verify_client(&k, NC, NS, &t));
        assert!(!verify_client(&Key::new(b"other"), NC, NS, &t), "another token");
        assert!(!verify_client(&k, NS, NC, &t), "nonces swapped");
        assert!(!verify_client(&k, NC, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfefe", &t), "another serve nonce");
        assert!(!verify_serve(&k, NC, NS, &t), "a client tag is not serve's proof");
        assert!(verify_serve(&k, NC, NS, &serve_proof(&k, NC, NS)));
        assert!(!verify_client(&k, NC, NS, &t[..62]), "short");
        assert!(!verify_client(&k, NC, NS, "not hex"));
    }

    /// The tag is HMAC-SHA256 over label | Nc | "|" | Ns: checked against a tag computed
    /// by hand from the parts (RFC 4231 is checked in `auth`).
    #[test]
    fn tag_is_hmac_of_the_documented_bytes() {
        let k = Key::new(b"k");
        let mut msg = b"wirebench control v3 client".to_vec();
        msg.extend_from_slice(NC.as_bytes());
        msg.push(b'|');
        msg.extend_from_slice(NS.as_bytes());
        assert_eq!(client_tag(&k, NC, NS), hex(&k.tag(&[&msg])));
    }

    #[test]
    fn knock_round_trip_and_refusals() {
        let s = [7u8; SECRET_LEN];
        let k = knock(&s);
        assert_eq!(parse_knock(&k), Ok(s));
        assert!(matches!(parse_knock(&k[..19]), Err(DecodeError::Length { .. })));
        let mut v1 = k;
        v1[2] = 1;
        assert_eq!(parse_knock(&v1), Err(DecodeError::Version(1)));
        let mut stream = k;
        stream[3] = Kind::Stream as u8;
        assert_eq!(parse_knock(&stream), Err(DecodeError::Kind(3)));
        assert!(same_secret(&s, &s));
        assert!(!same_secret(&s, &[8u8; SECRET_LEN]));
    }

    /// Four bytes are enough to read the header: a four-byte datagram is told apart as
    /// foreign, another version, or a knock of the wrong length; only fewer is truncated.
    #[test]
    fn knock_header_is_read_from_four_bytes() {
        let k = knock(&[7u8; SECRET_LEN]);
        assert_eq!(parse_knock(&k[..4]), Err(DecodeError::Length { declared: KNOCK_LEN, got: 4 }));
        assert_eq!(parse_knock(&[0x12, 0x34, VERSION, 4]), Err(DecodeError::Foreign(0x1234)));
        assert_eq!(parse_knock(&k[..3]), Err(DecodeError::Truncated { need: KNOCK_LEN, got: 3 }));
    }

    proptest! {
        #[test]
        fn knock_parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(s) = parse_knock(&b) {
                let k = knock(&s);
                prop_assert_eq!(k.as_slice(), b.as_slice());
            }
        }

        #[test]
        fn unhex_inverts_hex(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(unhex(&hex(&b)), Some(b));
        }
    }
}
