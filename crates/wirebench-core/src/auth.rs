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

    #[test]
    fn debug_hides_the_key() {
        assert_eq!(format!("{:?}", Key::new(b"secret")), "Key(..)");
    }
}
