//! STAMP (`wire::stamp`) on arbitrary bytes, as a reflector and as a sender read them: the
//! first byte picks the mode (bit 0: authenticated with a fixed key; bit 1: stateful
//! sequence; bit 2: the reflector writes PTP), the rest is the datagram. Nothing may panic;
//! whatever a reflector accepts it answers with a reply of exactly the request's length that
//! echoes the sender's fields; a reply never names a sequence it was not given.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::wire::stamp::{ErrorEstimate, Key, Reflector, Reject, Sender, TsFormat, base_len};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, pkt)) = data.split_first() else { return };
    let key = (mode & 1 != 0).then(|| Key::new(&[7u8; 32]).expect("a 32-byte key"));
    let format = if mode & 4 != 0 { TsFormat::Ptp } else { TsFormat::Ntp };
    let refl = Reflector { key: key.clone(), format, error: ErrorEstimate::new(true, TsFormat::Ntp, 1_000) };
    let sender = Sender { key, format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 0 };
    // The sender reads anything without panicking.
    let _ = sender.parse(pkt);
    let Ok(tp) = refl.check(pkt) else { return };
    assert!(pkt.len() >= base_len(mode & 1 != 0));
    let seq = if mode & 2 != 0 { tp.seq.wrapping_mul(31) } else { tp.seq };
    let t2 = 1_795_910_400_000_000_000 + u64::from(tp.seq % 1_000_000);
    let mut out = vec![0u8; pkt.len()];
    let n = refl.reflect(pkt, &mut out, seq, t2, 64, || t2 + 1_000).expect("room for the reply");
    assert_eq!(n, pkt.len(), "a reply is exactly as long as its request");
    match sender.parse(&out) {
        Ok(r) => {
            assert_eq!((r.seq, r.sender_seq, r.ssid, r.ttl), (seq, tp.seq, tp.ssid, 64));
            assert_eq!(r.error.format(), format, "the reflector states its own format");
            assert!(r.t2_unix_ns.abs_diff(t2) <= 1 && r.t3_unix_ns.abs_diff(t2 + 1_000) <= 1);
        }
        // Only the sender's own timestamp, echoed as it came, can fail to be a time.
        Err(e) => assert_eq!(e, Reject::Timestamp),
    }
});
