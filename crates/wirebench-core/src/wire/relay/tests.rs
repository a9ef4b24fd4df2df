use std::net::{Ipv4Addr, SocketAddrV4};

use proptest::prelude::*;

use super::*;

fn group() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(239, 1, 2, 3), 5000)
}

fn data() -> Header {
    Header {
        kind: RelayKind::Data,
        origin: 0x0102_0304_0506_0708,
        seq: 42,
        wall_ns: 1_700_000_000_000_000_000,
        group: group(),
        sender: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 7), 40_001),
    }
}

fn enc(h: &Header, payload: &[u8], key: Option<&Key>) -> Vec<u8> {
    let mut b = vec![0u8; MAX_UDP_LEN];
    let n = encode(&mut b, h, payload, key).unwrap();
    b.truncate(n);
    b
}

/// The layout, byte for byte, as docs/wire-format.md draws it.
#[test]
fn layout_is_the_documented_one() {
    let b = enc(&data(), b"hi", None);
    assert_eq!(b.len(), HEADER_LEN + 2);
    assert_eq!(&b[..8], &[0x57, 0x42, 2, 5, 1, 0, 0, 2]);
    assert_eq!(&b[24..32], &1_700_000_000_000_000_000u64.to_be_bytes());
    assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&b[16..24], &42u64.to_be_bytes());
    assert_eq!(&b[32..38], &[239, 1, 2, 3, 0x13, 0x88]);
    assert_eq!(&b[38..44], &[10, 0, 0, 7, 0x9c, 0x41]);
    assert_eq!(&b[44..], b"hi");
}

#[test]
fn round_trips_with_and_without_a_mac() {
    let k = Key::new(b"token");
    for key in [None, Some(&k)] {
        let b = enc(&data(), b"payload", key);
        let r = decode(&b).unwrap();
        assert_eq!(r.header, data());
        assert_eq!(r.payload, b"payload");
        assert_eq!(r.tag.is_some(), key.is_some());
        assert!(verify(&b, &r, key));
    }
}

#[test]
fn a_wrong_or_missing_or_unexpected_mac_fails() {
    let k = Key::new(b"token");
    let good = enc(&data(), b"x", Some(&k));
    let r = decode(&good).unwrap();
    assert!(!verify(&good, &r, Some(&Key::new(b"other"))), "wrong key");
    assert!(!verify(&good, &r, None), "a MAC we cannot check is not believed");
    let mut flipped = good.clone();
    flipped[20] ^= 1;
    let r = decode(&flipped).unwrap();
    assert!(!verify(&flipped, &r, Some(&k)), "a changed header");
    let plain = enc(&data(), b"x", None);
    assert!(!verify(&plain, &decode(&plain).unwrap(), Some(&k)), "no MAC with a key set");
}

#[test]
fn every_field_is_checked() {
    let good = enc(&data(), b"abc", None);
    let bad = |at: usize, v: u8| {
        let mut b = good.clone();
        b[at] = v;
        decode(&b).unwrap_err()
    };
    assert_eq!(bad(0, 0), DecodeError::Foreign(0x0042));
    assert_eq!(bad(2, 9), DecodeError::Version(9));
    assert_eq!(bad(3, 3), DecodeError::Kind(3));
    assert_eq!(bad(4, 0), DecodeError::Kind(0));
    assert_eq!(bad(4, 4), DecodeError::Kind(4));
    assert_eq!(bad(5, 2), DecodeError::Field("relay flags"));
    assert_eq!(bad(5, 1), DecodeError::Length { declared: HEADER_LEN + 3 + TAG_LEN, got: HEADER_LEN + 3 });
    assert_eq!(bad(7, 4), DecodeError::Length { declared: HEADER_LEN + 4, got: HEADER_LEN + 3 });
    let mut b = good.clone();
    b[6..8].fill(0xff);
    assert_eq!(decode(&b).unwrap_err(), DecodeError::Field("relay payload length"));
    assert_eq!(bad(32, 10), DecodeError::Field("relay group"));
    let mut b = good.clone();
    b[36..38].fill(0);
    assert_eq!(decode(&b).unwrap_err(), DecodeError::Field("relay group"));
    let mut b = good.clone();
    b[38..42].fill(0);
    assert_eq!(decode(&b).unwrap_err(), DecodeError::Field("relay sender"));
    let mut b = good.clone();
    b[42..44].fill(0);
    assert_eq!(decode(&b).unwrap_err(), DecodeError::Field("relay sender"));
    assert_eq!(bad(38, 224), DecodeError::Field("relay sender"));
    assert_eq!(decode(&good[..3]).unwrap_err(), DecodeError::Truncated { need: HEADER_LEN, got: 3 });
    assert_eq!(decode(&good[..40]).unwrap_err(), DecodeError::Truncated { need: HEADER_LEN, got: 40 });
}

#[test]
fn probes_and_answers_carry_a_time_and_no_payload() {
    let probe = Header { kind: RelayKind::Probe, sender: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), ..data() };
    let b = enc(&probe, b"", None);
    assert_eq!(decode(&b).unwrap().header, probe);
    assert_eq!(decode(&b).unwrap().header.wall_ns, 1_700_000_000_000_000_000);
    let mut with_sender = b.clone();
    with_sender[43] = 1;
    assert_eq!(decode(&with_sender).unwrap_err(), DecodeError::Field("relay sender"));
    let mut b = vec![0u8; 100];
    assert_eq!(
        encode(&mut b, &probe, b"x", None).map(|n| decode(&b[..n]).unwrap_err()),
        Some(DecodeError::Field("relay payload length"))
    );
    let seen = Header { kind: RelayKind::Seen, ..data() };
    assert_eq!(decode(&enc(&seen, b"", None)).unwrap().header, seen);
}

/// Version 1 (no time on probes and seen) is refused by its version, so the relay can
/// name it; the other kinds stay at version 1.
#[test]
fn version_one_is_refused_by_name() {
    let mut b = enc(&data(), b"hi", None);
    b[2] = 1;
    assert_eq!(decode(&b).unwrap_err(), DecodeError::Version(1));
    assert_eq!(VERSION, 2);
    assert_eq!(crate::wire::VERSION, 1);
    assert_eq!(other_version(&b), Some(1));
    b[2] = VERSION;
    assert_eq!(other_version(&b), None, "ours");
    b[2] = 1;
    b[3] = 3;
    assert_eq!(other_version(&b), None, "a stream message is no relay's");
    assert_eq!(other_version(&b[..3]), None);
}

#[test]
fn refuses_what_does_not_fit() {
    let mut b = vec![0u8; MAX_UDP_LEN];
    assert!(encode(&mut b, &data(), &vec![0u8; MAX_PAYLOAD + 1], None).is_none());
    assert_eq!(encode(&mut b, &data(), &vec![0u8; MAX_PAYLOAD], Some(&Key::new(b"k"))), Some(MAX_UDP_LEN));
    // the largest payload also decodes (the length check admits MAX_PAYLOAD itself)
    let key = Key::new(b"k");
    let r = decode(&b).unwrap();
    assert!(verify(&b, &r, Some(&key)));
    assert_eq!(r.payload.len(), MAX_PAYLOAD);
    let mut small = [0u8; HEADER_LEN + 1];
    assert!(encode(&mut small, &data(), b"xy", None).is_none());
}

proptest! {
    #[test]
    fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&b);
    }

    #[test]
    fn any_valid_header_round_trips(origin: u64, seq: u64, t: u64, g in 0u32..0x0fff_ffff, gp in 1u16.., s in 1u32..0xdfff_ffff, sp in 1u16.., len in 0usize..300, mac: bool) {
        let h = Header {
            kind: RelayKind::Data,
            origin,
            seq,
            wall_ns: t,
            group: SocketAddrV4::new(Ipv4Addr::from(0xe000_0000 | g), gp),
            sender: SocketAddrV4::new(Ipv4Addr::from(s), sp),
        };
        let k = Key::new(b"p");
        let key = mac.then_some(&k);
        let payload = vec![7u8; len];
        let b = enc(&h, &payload, key);
        let r = decode(&b).unwrap();
        prop_assert_eq!(r.header, h);
        prop_assert_eq!(r.payload, &payload[..]);
        prop_assert!(verify(&b, &r, key));
    }
}
