//! `Probe::parse` on arbitrary bytes: it must never panic, and whatever it accepts must be
//! safe to read through every accessor and to answer with `make_reply`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirebench_core::wire::Kind;
use wirebench_core::wire::probe::{FLAG_TIMESTAMPS, FULL_LEN, MIN_LEN, Probe, make_reply};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Probe::parse(data) else {
        return;
    };
    // Every accessor of an accepted probe, none of which may panic.
    let kind = p.kind();
    let flags = p.flags();
    let (session, seq, t1) = (p.session(), p.seq(), p.t1());
    let times = p.responder_times();
    assert_eq!(p.len(), data.len(), "a probe is a view of the whole datagram");
    assert!((MIN_LEN..=usize::from(u16::MAX)).contains(&p.len()));
    assert!(!p.is_empty());
    assert_eq!(times.is_some(), flags & FLAG_TIMESTAMPS != 0 && p.len() >= FULL_LEN);

    // Answer it, on a copy, with responder times taken from the input so they vary.
    let (t2, t3) = (t1.rotate_left(7) ^ seq, session.wrapping_mul(3));
    let mut reply = data.to_vec();
    let replied = make_reply(&mut reply, t2, || t3);
    assert_eq!(replied, kind == Kind::Probe, "only probes are answered");
    if !replied {
        assert_eq!(reply, data, "a refused reply leaves the buffer alone");
        return;
    }
    let r = Probe::parse(&reply).expect("the reply to a parsed probe parses");
    assert_eq!(r.len(), p.len(), "a reply is exactly as long as its probe");
    assert_eq!(r.kind(), Kind::Reply);
    assert_eq!((r.session(), r.seq(), r.t1()), (session, seq, t1), "t1, session and seq are echoed untouched");
    if p.len() >= FULL_LEN {
        assert_eq!(r.responder_times(), Some((t2, t3)));
        assert_eq!(r.flags(), flags | FLAG_TIMESTAMPS);
        assert_eq!(reply[FULL_LEN..], data[FULL_LEN..], "padding is echoed untouched");
    } else {
        assert_eq!(r.responder_times(), None);
        assert_eq!(r.flags(), flags);
        assert_eq!(reply[4..], data[4..]);
    }
    assert_eq!(reply[..3], data[..3]);

    // A reply is never answered (that would loop).
    let mut again = reply.clone();
    assert!(!make_reply(&mut again, 0, || 0));
    assert_eq!(again, reply);
});
