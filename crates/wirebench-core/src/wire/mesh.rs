//! Authenticated probes: the probe of [`super::probe`] with a keyed tag, for the mesh agents
//! (`wirebench mesh agent --token`).
//!
//! ```text
//! offset size field
//!      0   48 the full probe (header, session, sequence, t1, t2, t3), flags has FLAG_MAC
//!     48   16 tag: HMAC-SHA256 truncated to 16 bytes (core `auth`)
//!     64   .. padding up to the total length
//! ```
//!
//! A probe's tag covers `"wirebench probe v1"` and bytes 0..32 (everything the pinger
//! writes: magic, version, kind, length, flags, session, sequence, t1). The responder checks
//! it, fills t2 and t3 as for any full probe, and replaces the tag with the reply's tag over
//! `"wirebench reply v1"` and bytes 0..48 (the reply kind and both responder times included),
//! so neither side accepts a message made without the token, and a probe cannot pass for a
//! reply or the other way round. A replayed probe is answered again (to whoever sent the
//! copy, never larger than it: a reflection without amplification); a replayed reply is a
//! duplicate to the pinger's sequence accounting.

use super::probe::{FULL_LEN, MAX_LEN};
use crate::auth::{Key, TAG_LEN};

/// Set by the pinger: a tag follows the full probe at [`TAG_OFFSET`].
pub const FLAG_MAC: u8 = 0x08;
// One bit per meaning: the responder's flags and the pinger's share one byte (0x04 was
// given to both FLAG_KERNEL_RX and FLAG_MAC once, by two branches at the same time).
const _: () = assert!(
    FLAG_MAC & (super::probe::FLAG_TIMESTAMPS | super::probe::FLAG_REPLY_GROUP | super::probe::FLAG_KERNEL_RX) == 0,
    "FLAG_MAC overlaps a probe flag"
);
/// Where the tag sits.
pub const TAG_OFFSET: usize = FULL_LEN;
/// The smallest authenticated probe.
pub const MIN_LEN: usize = FULL_LEN + TAG_LEN;

const PROBE_DOMAIN: &[u8] = b"wirebench probe v1";
const REPLY_DOMAIN: &[u8] = b"wirebench reply v1";
/// Bytes of a probe the pinger's tag covers (t2 and t3 are the responder's to write).
const PROBE_COVERED: usize = 32;
const FLAGS_OFFSET: usize = 6;

fn has_room(buf: &[u8]) -> bool {
    (MIN_LEN..=MAX_LEN).contains(&buf.len())
}

/// Marks a probe buffer (already [`super::probe::init`]ed, at least [`MIN_LEN`] bytes) as
/// authenticated. Call once per run, then [`sign_probe`] after each `stamp`.
pub fn mark(buf: &mut [u8]) {
    buf[FLAGS_OFFSET] |= FLAG_MAC;
}

/// Writes the probe's tag (after the sequence number and t1 are stamped).
///
/// # Panics
/// If `buf` is shorter than [`MIN_LEN`]; callers size probes from a validated config.
pub fn sign_probe(key: &Key, buf: &mut [u8]) {
    assert!(has_room(buf), "an authenticated probe needs {MIN_LEN} bytes");
    let tag = key.short_tag(&[PROBE_DOMAIN, &buf[..PROBE_COVERED]]);
    buf[TAG_OFFSET..TAG_OFFSET + TAG_LEN].copy_from_slice(&tag);
}

/// Whether a received probe carries a right tag. False for probes without [`FLAG_MAC`] or
/// too short to carry one: with a token, those are unauthenticated.
pub fn verify_probe(key: &Key, buf: &[u8]) -> bool {
    has_room(buf)
        && buf[FLAGS_OFFSET] & FLAG_MAC != 0
        && key.verify(&[PROBE_DOMAIN, &buf[..PROBE_COVERED]], &buf[TAG_OFFSET..TAG_OFFSET + TAG_LEN])
}

/// Replaces the tag of a reply (made in place by `make_reply`, so t2 and t3 are written)
/// with the reply's own. Does nothing to a buffer too short for a tag.
pub fn sign_reply(key: &Key, buf: &mut [u8]) {
    if !has_room(buf) {
        return;
    }
    let tag = key.short_tag(&[REPLY_DOMAIN, &buf[..FULL_LEN]]);
    buf[TAG_OFFSET..TAG_OFFSET + TAG_LEN].copy_from_slice(&tag);
}

/// Whether a received reply carries a right tag.
pub fn verify_reply(key: &Key, buf: &[u8]) -> bool {
    has_room(buf)
        && buf[FLAGS_OFFSET] & FLAG_MAC != 0
        && key.verify(&[REPLY_DOMAIN, &buf[..FULL_LEN]], &buf[TAG_OFFSET..TAG_OFFSET + TAG_LEN])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::probe::{self, Probe};
    use proptest::prelude::*;

    fn signed(key: &Key, len: usize, seq: u64) -> Vec<u8> {
        let mut b = vec![0; len];
        probe::init(&mut b, 42, 0);
        mark(&mut b);
        probe::stamp(&mut b, seq, 1_000);
        sign_probe(key, &mut b);
        b
    }

    #[test]
    fn a_signed_probe_verifies_and_its_reply_too() {
        let k = Key::new(b"token");
        let mut b = signed(&k, MIN_LEN, 7);
        assert!(Probe::parse(&b).is_ok(), "still a valid probe for any serve");
        assert!(verify_probe(&k, &b));
        assert!(probe::make_reply(&mut b, 5, || 6));
        assert!(!verify_reply(&k, &b), "the probe's tag is not a reply's");
        sign_reply(&k, &mut b);
        assert!(verify_reply(&k, &b));
        assert!(!verify_probe(&k, &b), "a reply does not pass for a probe");
        assert_eq!(Probe::parse(&b).unwrap().responder_times(), Some((5, 6)));
    }

    #[test]
    fn forged_and_unmarked_probes_fail() {
        let k = Key::new(b"token");
        let b = signed(&Key::new(b"guess"), 64, 1);
        assert!(!verify_probe(&k, &b), "signed with another token");
        let mut plain = vec![0; 64];
        probe::init(&mut plain, 1, 0);
        assert!(!verify_probe(&k, &plain), "no tag at all");
        let mut short = vec![0; 48];
        probe::init(&mut short, 1, FLAG_MAC);
        assert!(!verify_probe(&k, &short), "too short to carry a tag");
        let mut b = signed(&k, 64, 1);
        b[16] ^= 1; // another sequence number under the same tag
        assert!(!verify_probe(&k, &b));
    }

    /// A right tag is not enough: without FLAG_MAC a probe or reply is unauthenticated.
    #[test]
    fn a_right_tag_without_the_flag_does_not_verify() {
        let k = Key::new(b"token");
        let mut b = vec![0; 64];
        probe::init(&mut b, 42, 0);
        probe::stamp(&mut b, 1, 1_000);
        sign_probe(&k, &mut b);
        assert!(!verify_probe(&k, &b));
        assert!(probe::make_reply(&mut b, 5, || 6));
        sign_reply(&k, &mut b);
        assert!(!verify_reply(&k, &b));
        // A buffer too short for a tag is left as it is.
        let mut short = vec![0; 48];
        probe::init(&mut short, 1, FLAG_MAC);
        let before = short.clone();
        sign_reply(&k, &mut short);
        assert_eq!(short, before);
    }

    #[test]
    fn responder_times_are_covered_by_the_reply_tag() {
        let k = Key::new(b"token");
        let mut b = signed(&k, 80, 3);
        probe::make_reply(&mut b, 10, || 20);
        sign_reply(&k, &mut b);
        b[40] ^= 1; // t3 changed in flight
        assert!(!verify_reply(&k, &b));
    }

    proptest! {
        #[test]
        fn any_bytes_never_verify_or_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let k = Key::new(b"token");
            prop_assert!(!verify_probe(&k, &bytes) || bytes.len() >= MIN_LEN);
            let _ = verify_reply(&k, &bytes);
        }
    }
}
