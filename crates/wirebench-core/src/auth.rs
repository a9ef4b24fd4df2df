//! Keyed message authentication for everything a token gates: control handshakes, mesh
//! probes and relayed datagrams.
//!
//! HMAC-SHA256 (RFC 2104, FIPS 180-4) keyed by the operator's token, as IRTT keys its
//! packets; never a plain string comparison, so a token is not sent on the wire and a
//! forged message cannot be made without it. Tags are compared in constant time. Datagrams
//! carry a tag truncated to [`TAG_LEN`] bytes (RFC 2104 section 5 allows truncation to no
//! less than half the hash: 128 bits).
//!
//! Replay protection is the caller's: a control handshake mixes a fresh nonce from each side
//! into what it authenticates; a datagram's tag covers its session id and sequence number,
//! which the receiver's sequence window already judges.

use hmac::{Hmac, Mac as _};
use sha2::Sha256;

/// PBKDF2-HMAC-SHA256 rounds of [`Key::derive`]: the work a guess of the token costs
/// whoever holds a tag made with the derived key (a fake serve, a captured handshake).
pub const ITERATIONS: u32 = 600_000;
/// Longest salt accepted (bytes).
pub const MAX_SALT: usize = 64;
/// The salt when the operator gives none.
pub const DEFAULT_SALT: &str = "wirebench";
/// Fewest bits of estimated entropy a token needs without `--weak-token`.
pub const MIN_TOKEN_BITS: f64 = 128.0;

/// Bytes of a truncated tag carried by a datagram.
pub const TAG_LEN: usize = 16;

/// A key derived from a token. `Debug` never shows the key.
#[derive(Clone)]
pub struct Key(Hmac<Sha256>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The key for `token` (any length: HMAC hashes long keys itself).
    pub fn new(token: &[u8]) -> Self {
        Self(Hmac::new_from_slice(token).expect("HMAC takes keys of any length"))
    }

    /// The key for `token` hardened with a work factor: PBKDF2-HMAC-SHA256 (RFC 8018) of
    /// the token with salt `"wirebench token|" | salt` and [`ITERATIONS`] rounds, 32 bytes,
    /// used as the HMAC key. Every tag made with it costs a guesser [`ITERATIONS`] rounds
    /// per guess. Derive once per salt and keep the key: it takes tens of milliseconds.
    pub fn derive(token: &[u8], salt: &[u8]) -> Self {
        Self::new(&derive_bytes(token, salt, ITERATIONS))
    }

    /// The full 32-byte tag over the concatenation of `parts`.
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = self.0.clone();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The tag truncated to [`TAG_LEN`] bytes, for datagrams.
    pub fn short_tag(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let full = self.tag(parts);
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&full[..TAG_LEN]);
        t
    }

    /// Whether `tag` (full or truncated, at least [`TAG_LEN`] bytes) is right for `parts`,
    /// compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        if tag.len() < TAG_LEN || tag.len() > 32 {
            return false;
        }
        let full = self.tag(parts);
        constant_time_eq(&full[..tag.len()], tag)
    }
}

fn derive_bytes(token: &[u8], salt: &[u8], rounds: u32) -> [u8; 32] {
    let mut full = b"wirebench token|".to_vec();
    full.extend_from_slice(salt);
    let mut out = [0u8; 32];
    let rounds = std::num::NonZeroU32::new(rounds).unwrap_or(std::num::NonZeroU32::MIN);
    ring::pbkdf2::derive(ring::pbkdf2::PBKDF2_HMAC_SHA256, rounds, &full, token, &mut out);
    out
}

/// Estimated bits of entropy of a token: its length times, per character, the smaller of
/// log2 of the alphabet its character classes span (lower, upper, digits, other) and one
/// bit more than log2 of its distinct characters. An estimate: it cannot tell a phrase of
/// words from random characters, but it refuses short, repetitive and dictionary-sized
/// tokens (`hunter2`: 27 bits; 43 characters of base64: about 250).
pub fn token_bits(token: &str) -> f64 {
    let chars: Vec<char> = token.chars().collect();
    if chars.is_empty() {
        return 0.0;
    }
    let mut pool = 0u32;
    if chars.iter().any(char::is_ascii_lowercase) {
        pool += 26;
    }
    if chars.iter().any(char::is_ascii_uppercase) {
        pool += 26;
    }
    if chars.iter().any(char::is_ascii_digit) {
        pool += 10;
    }
    if chars.iter().any(|c| !c.is_ascii_alphanumeric()) {
        pool += 33;
    }
    let mut distinct = chars.clone();
    distinct.sort_unstable();
    distinct.dedup();
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let per = f64::from(pool).log2().min((distinct.len() as f64).log2() + 1.0);
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let n = chars.len() as f64;
    per * n
}

/// Equal-length comparison whose time does not depend on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2 (HMAC-SHA256, key "Jefe").
    #[test]
    fn matches_rfc_4231() {
        let k = Key::new(b"Jefe");
        let t = k.tag(&[b"what do ya want ", b"for nothing?"]);
        let want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let want: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&want[2 * i..2 * i + 2], 16).unwrap()).collect();
        assert_eq!(t.as_slice(), want.as_slice());
    }

    #[test]
    fn verifies_full_and_short_tags_and_rejects_others() {
        let k = Key::new(b"secret");
        let parts: &[&[u8]] = &[b"session", &7u64.to_be_bytes()];
        assert!(k.verify(parts, &k.tag(parts)));
        assert!(k.verify(parts, &k.short_tag(parts)));
        let mut bad = k.short_tag(parts);
        bad[TAG_LEN - 1] ^= 1;
        assert!(!k.verify(parts, &bad));
        assert!(!k.verify(parts, &k.tag(parts)[..TAG_LEN - 1]), "too short a tag is refused");
        assert!(!Key::new(b"other").verify(parts, &k.short_tag(parts)));
        assert!(!k.verify(&[b"session", &8u64.to_be_bytes()], &k.short_tag(parts)));
    }

    /// Differences in two bytes that would cancel if combined by XOR still refuse the tag.
    #[test]
    fn a_tag_wrong_in_two_bytes_by_the_same_bit_is_refused() {
        let k = Key::new(b"secret");
        let parts: &[&[u8]] = &[b"session"];
        let mut bad = k.short_tag(parts);
        bad[0] ^= 1;
        bad[1] ^= 1;
        assert!(!k.verify(parts, &bad));
    }

    /// RFC 7914 section 11 (PBKDF2-HMAC-SHA256, "passwd", "salt", 1 round), first 32
    /// bytes; our salt is prefixed, so the vector is checked on the primitive.
    #[test]
    fn pbkdf2_matches_rfc_7914_and_derive_depends_on_salt() {
        let mut out = [0u8; 32];
        let one = std::num::NonZeroU32::MIN;
        ring::pbkdf2::derive(ring::pbkdf2::PBKDF2_HMAC_SHA256, one, b"salt", b"passwd", &mut out);
        let want = "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc";
        let want: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&want[2 * i..2 * i + 2], 16).unwrap()).collect();
        assert_eq!(out.as_slice(), want.as_slice());
        assert_ne!(derive_bytes(b"t", b"a", 2), derive_bytes(b"t", b"b", 2));
        assert_ne!(derive_bytes(b"t", b"a", 2), derive_bytes(b"t", b"a", 3));
        let parts: &[&[u8]] = &[b"x"];
        assert!(!Key::derive(b"t", b"a").verify(parts, &Key::new(b"t").tag(parts)), "not the plain key");
    }

    #[test]
    fn token_entropy_estimates() {
        assert!(token_bits("hunter2") < 40.0);
        assert!(token_bits(&"a".repeat(100)) < 128.0, "one character repeated");
        assert!(token_bits("s3cret") < MIN_TOKEN_BITS);
        // `openssl rand -hex 16`, `openssl rand -base64 32`, `wirebench token`.
        assert!(token_bits("9f2c4e1ab07d3865c1e9a4f20b7d6e38") >= MIN_TOKEN_BITS);
        assert!(token_bits("Jq3vX9k2Lr8pT0wZ5mN7bY4cH1dF6gS2aE8uV0iO3xk=") >= MIN_TOKEN_BITS);
        assert!(token_bits("") < 1.0);
    }

    /// Each class adds its size to the alphabet (26 lower, 26 upper, 10 digits, 33 other);
    /// a token of few distinct characters gets one bit more than log2 of their count.
    #[test]
    fn token_bits_per_character_class_and_distinct_count() {
        let close = |t: &str, want: f64| assert!((token_bits(t) - want).abs() < 1e-9, "{t}: {}", token_bits(t));
        close("abcdefghijklmnopqrstuvwxyz", 26.0 * 26f64.log2());
        close("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26.0 * 26f64.log2());
        close("0123456789", 10.0 * 10f64.log2());
        close("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ", 33.0 * 33f64.log2());
        close("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 62.0 * 62f64.log2());
        close(&"ab".repeat(20), 40.0 * 2.0);
    }

    #[test]
    fn debug_hides_the_key() {
        assert_eq!(format!("{:?}", Key::new(b"secret")), "Key(..)");
    }
}
