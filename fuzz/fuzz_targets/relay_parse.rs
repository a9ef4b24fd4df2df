//! `wire::relay::decode` on arbitrary bytes: it must never panic; what it accepts must hold
//! the format's rules, encode back to the same bytes, and verify exactly when its MAC is
//! the one the key makes.

#![no_main]

use std::net::{Ipv4Addr, SocketAddrV4};

use libfuzzer_sys::fuzz_target;
use wirebench_core::auth::{Key, TAG_LEN};
use wirebench_core::wire::relay::{self, HEADER_LEN, MAX_PAYLOAD, RelayKind};

fuzz_target!(|data: &[u8]| {
    let Ok(r) = relay::decode(data) else {
        return;
    };
    let h = r.header;
    assert_eq!(data[2], relay::VERSION);
    assert!(r.payload.len() <= MAX_PAYLOAD);
    assert_eq!(data.len(), HEADER_LEN + r.payload.len() + r.tag.map_or(0, <[u8]>::len));
    assert!(r.tag.is_none_or(|t| t.len() == TAG_LEN));
    assert!(h.group.ip().is_multicast() && h.group.port() != 0);
    match h.kind {
        RelayKind::Probe => {
            assert!(r.payload.is_empty());
            assert_eq!(h.sender, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        }
        RelayKind::Seen => assert!(r.payload.is_empty() && h.sender.port() != 0),
        RelayKind::Data => assert!(!h.sender.ip().is_unspecified() && h.sender.port() != 0),
    }
    // Without a tag it is exactly what encode writes for its fields.
    let mut out = vec![0u8; data.len() + TAG_LEN];
    if r.tag.is_none() {
        let n = relay::encode(&mut out, &h, r.payload, None).expect("fits");
        assert_eq!(&out[..n], data);
        assert!(relay::verify(data, &r, None));
        assert!(!relay::verify(data, &r, Some(&Key::new(b"k"))), "no MAC with a key set");
    } else {
        // A tag verifies only if it is the key's; re-signing makes it verify.
        let k = Key::new(b"k");
        let n = relay::encode(&mut out, &h, r.payload, Some(&k)).expect("fits");
        assert_eq!(out[..n - TAG_LEN], data[..data.len() - TAG_LEN]);
        assert_eq!(relay::verify(data, &r, Some(&k)), out[..n] == *data);
        let again = relay::decode(&out[..n]).expect("encode makes what decode takes");
        assert!(relay::verify(&out[..n], &again, Some(&k)));
        assert!(!relay::verify(data, &r, None), "a MAC without a key is not believed");
    }
});
