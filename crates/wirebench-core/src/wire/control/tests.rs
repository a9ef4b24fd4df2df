use super::*;
use proptest::prelude::*;

fn start_json(extra: &str) -> String {
    format!(
        r#"{{"type":"start","session":1,"proto":"udp","size":64,"direction":"reverse","publishers":2,"rate_per_s":1000.0,"duration_ns":1000000000,"count":null,"group":null{extra}}}"#
    )
}

fn with(field: &str, value: &str) -> Result<Control, ControlError> {
    let base = start_json("");
    let re = format!(r#""{field}":"#);
    let at = base.find(&re).expect("field") + re.len();
    let end = at + base[at..].find([',', '}']).expect("end");
    decode(format!("{}{value}{}", &base[..at], &base[end..]).as_bytes())
}

#[test]
fn header_round_trip_and_limits() {
    let h = header(1234);
    assert_eq!(h[2], VERSION);
    assert_eq!(body_len(&h, MAX_BODY), Ok(1234));
    assert_eq!(body_len(&h, MAX_FIRST_BODY), Ok(1234));
    assert!(matches!(body_len(&header(5000), MAX_FIRST_BODY), Err(DecodeError::Length { declared: 5000, .. })));
    let mut big = h;
    big[4..8].copy_from_slice(&(1u32 << 20).to_be_bytes());
    assert!(matches!(body_len(&big, MAX_BODY), Err(DecodeError::Length { .. })));
    assert!(matches!(body_len(&big, usize::MAX), Err(DecodeError::Length { .. })), "never past MAX_BODY");
    let mut probe = h;
    probe[3] = Kind::Probe as u8;
    assert_eq!(body_len(&probe, MAX_BODY), Err(DecodeError::Kind(1)));
    let mut v1 = h;
    v1[2] = LEGACY_VERSION;
    assert_eq!(body_len(&v1, MAX_BODY), Err(DecodeError::Version(1)));
}

#[test]
fn legacy_refusal_is_an_error_frame_of_the_old_version() {
    assert_eq!(&legacy_refusal(2, "upgrade")[0..4], &[0x57, 0x42, 2, 4], "a version 2 client reads it");
    let f = legacy_refusal(1, "upgrade");
    assert_eq!(&f[0..4], &[0x57, 0x42, 1, 4]);
    let len = u32::from_be_bytes([f[4], f[5], f[6], f[7]]) as usize;
    assert_eq!(len, f.len() - HEADER_LEN);
    assert_eq!(decode(&f[HEADER_LEN..]), Ok(Control::Error { message: "upgrade".into() }));
}

#[test]
fn messages_are_tagged_json() {
    let m = Control::Finish { sent: vec![1, 2] };
    let j = serde_json::to_string(&m).unwrap();
    assert_eq!(j, r#"{"type":"finish","sent":[1,2]}"#);
    assert_eq!(decode(j.as_bytes()).unwrap(), m);
}

#[test]
fn a_valid_start_decodes_and_never_carries_the_token_or_a_port() {
    let m = decode(start_json("").as_bytes()).unwrap();
    let Control::Start(r) = &m else { panic!("{m:?}") };
    assert_eq!((r.size, r.publishers, r.rate_per_s), (64, 2, Some(1000.0)));
    let mut r = r.clone();
    r.token = Some("hunter2".into());
    r.client_port = Some(9);
    let j = serde_json::to_string(&Control::Start(r)).unwrap();
    assert!(!j.contains("hunter2") && !j.contains("token") && !j.contains("client_port"), "{j}");
}

/// The rates that would get around `--max-rate` (flat out, or overflowing the schedule),
/// each refused at the decoder.
#[test]
fn hostile_rates_are_refused() {
    for bad in ["0", "-1", "1e-300", "5e-324", "0.0009", "1e11", "-0.0"] {
        assert!(matches!(with("rate_per_s", bad), Err(ControlError::Value(_))), "rate {bad}");
    }
    assert!(matches!(with("rate_per_s", "1e400"), Err(ControlError::Json(_))), "out of f64 range");
    for ok in ["0.001", "1", "1e10", "null"] {
        assert!(with("rate_per_s", ok).is_ok(), "rate {ok}");
    }
}

#[test]
fn hostile_sizes_counts_and_durations_are_refused() {
    for (f, bad) in [
        ("size", "0"),
        ("size", "31"),
        ("size", "65508"),
        ("size", "18446744073709551615"),
        ("publishers", "0"),
        ("publishers", "65"),
        ("publishers", "65535"),
        ("duration_ns", "604800000000001"),
        ("direction", r#""sideways""#),
        ("session", "-1"),
        ("group", r#""10.0.0.1:5000""#),
    ] {
        assert!(with(f, bad).is_err(), "{f} = {bad}");
    }
    assert!(with("publishers", "64").is_ok());
    assert!(with("duration_ns", "604800000000000").is_ok());
    assert!(with("group", r#""239.1.2.3:5000""#).is_ok());
}

#[test]
fn lists_hex_fields_and_messages_are_bounded() {
    let long: Vec<u64> = vec![0; 65];
    assert!(decode(serde_json::to_string(&Control::Finish { sent: long }).unwrap().as_bytes()).is_err());
    assert!(decode(serde_json::to_string(&Control::Finish { sent: vec![0; 64] }).unwrap().as_bytes()).is_ok());
    assert!(decode(br#"{"type":"hello","nonce":"abc"}"#).is_err());
    assert!(decode(br#"{"type":"hello","nonce":"0123456789abcdef0123456789abcdeg"}"#).is_err());
    assert!(decode(br#"{"type":"hello","nonce":"0123456789abcdef0123456789abcdef"}"#).is_ok());
    assert!(decode(br#"{"type":"auth","tag":"00"}"#).is_err());
    assert!(decode(format!(r#"{{"type":"auth","tag":"{}"}}"#, "ab".repeat(32)).as_bytes()).is_ok());
    let msg = "x".repeat(MAX_MESSAGE + 1);
    assert!(decode(serde_json::to_string(&Control::Error { message: msg }).unwrap().as_bytes()).is_err());
    let pc =
        |publisher, jitter_ns| PublisherCounts { publisher, counts: StreamCounts { jitter_ns, ..Default::default() } };
    let iv = |p| serde_json::to_string(&Control::Interval { publishers: vec![p], kernel: None }).unwrap();
    assert!(decode(iv(pc(64, 0.0)).as_bytes()).is_err());
    assert!(decode(iv(pc(63, -1.0)).as_bytes()).is_err());
    assert!(decode(iv(pc(63, 5.0)).as_bytes()).is_ok());
}

#[test]
fn a_result_carries_send_time_foreign_and_kernel_within_bounds() {
    let older = decode(br#"{"type":"result","received":[],"sent":[5]}"#).unwrap();
    let Control::Result { send_ns, foreign, kernel, .. } = older else { panic!("{older:?}") };
    assert_eq!((send_ns, foreign, kernel), (0, 0, None), "an older serve's result still decodes");
    let table = |n: usize| (0..n).map(|i| (format!("F{i}"), -1)).collect::<std::collections::BTreeMap<_, _>>();
    let result = |k: Snmp| {
        let m =
            Control::Result { received: vec![], sent: vec![5], send_ns: 7, foreign: 3, kernel: Some(k), wake: None };
        decode(serde_json::to_string(&m).unwrap().as_bytes())
    };
    let ok = Snmp([("Udp".to_owned(), table(MAX_KERNEL_FIELDS))].into());
    let Ok(Control::Result { send_ns: 7, foreign: 3, kernel: Some(k), .. }) = result(ok.clone()) else { panic!() };
    assert_eq!(k, ok);
    assert!(result(Snmp([("Udp".to_owned(), table(MAX_KERNEL_FIELDS + 1))].into())).is_err());
    let tables = (0..=MAX_KERNEL_TABLES).map(|i| (format!("T{i}"), table(1))).collect();
    assert!(result(Snmp(tables)).is_err());
    assert!(result(Snmp([(String::new(), table(1))].into())).is_err());
    assert!(result(Snmp([("x".repeat(MAX_KERNEL_FIELDS + 1), table(1))].into())).is_err());
    // a receiver's wake-up figures: percentiles out of order are refused
    let wake = |p50_ns, max_ns| {
        let w = crate::stream::wake::WakeDelay {
            available: true,
            stamped: 9,
            p50_ns,
            p99_ns: 5,
            max_ns,
            ..Default::default()
        };
        let m = Control::Result { received: vec![], sent: vec![], send_ns: 0, foreign: 0, kernel: None, wake: Some(w) };
        decode(serde_json::to_string(&m).unwrap().as_bytes())
    };
    assert!(wake(4, 6).is_ok());
    assert!(wake(6, 6).is_err() && wake(4, 4).is_err());
}

#[test]
fn an_intervals_kernel_counters_are_bounded_like_a_results() {
    let older = decode(br#"{"type":"interval","publishers":[]}"#).unwrap();
    assert_eq!(older, Control::Interval { publishers: vec![], kernel: None }, "an older serve's interval decodes");
    let table = |n: usize| (0..n).map(|i| (format!("F{i}"), 1)).collect::<std::collections::BTreeMap<_, _>>();
    let iv = |k: Snmp| {
        decode(serde_json::to_string(&Control::Interval { publishers: vec![], kernel: Some(k) }).unwrap().as_bytes())
    };
    let ok = Snmp([("Udp".to_owned(), table(MAX_KERNEL_FIELDS))].into());
    assert_eq!(iv(ok.clone()).unwrap(), Control::Interval { publishers: vec![], kernel: Some(ok) });
    assert!(iv(Snmp([("Udp".to_owned(), table(MAX_KERNEL_FIELDS + 1))].into())).is_err());
    assert!(iv(Snmp((0..=MAX_KERNEL_TABLES).map(|i| (format!("T{i}"), table(1))).collect())).is_err());
    assert!(iv(Snmp([(String::new(), table(1))].into())).is_err());
}

proptest! {
    /// Whatever the rate a decoded request carries, it is one a schedule can use.
    #[test]
    fn decoded_rates_are_finite_and_in_range(r in any::<f64>()) {
        let j = start_json("").replace("1000.0", &format!("{r:e}"));
        if let Ok(Control::Start(s)) = decode(j.as_bytes()) {
            let got = s.rate_per_s.unwrap();
            prop_assert!(got.is_finite() && (MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&got));
        }
    }

    #[test]
    fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&b);
    }
}

#[test]
fn a_challenge_carries_no_proof_and_a_bounded_salt() {
    let ok = r#"{"type":"challenge","nonce":"000102030405060708090a0b0c0d0e0f","auth":true,"salt":"wirebench"}"#;
    assert!(decode(ok.as_bytes()).is_ok());
    let long = ok.replace("wirebench", &"s".repeat(crate::auth::MAX_SALT + 1));
    assert!(decode(long.as_bytes()).is_err(), "a salt past MAX_SALT is refused");
    let welcome = format!(r#"{{"type":"welcome","proof":"{}"}}"#, "ab".repeat(32));
    assert!(decode(welcome.as_bytes()).is_ok());
    assert!(decode(br#"{"type":"welcome","proof":"abc"}"#).is_err());
}

/// The base request of `start_json`, changed by `f`, sent through JSON and decoded.
fn start_with(f: impl FnOnce(&mut StreamRequest)) -> Result<Control, ControlError> {
    let Ok(Control::Start(mut r)) = decode(start_json("").as_bytes()) else { panic!("the base request decodes") };
    f(&mut r);
    decode(serde_json::to_string(&Control::Start(r)).unwrap().as_bytes())
}

#[test]
fn a_body_of_exactly_the_limit_is_accepted() {
    assert_eq!(body_len(&header(MAX_FIRST_BODY), MAX_FIRST_BODY), Ok(MAX_FIRST_BODY));
    assert_eq!(body_len(&header(MAX_BODY), MAX_BODY), Ok(MAX_BODY));
    assert!(matches!(body_len(&header(MAX_FIRST_BODY + 1), MAX_FIRST_BODY), Err(DecodeError::Length { .. })));
}

/// A refusal's reason is cut so that even four-byte characters stay within MAX_MESSAGE
/// bytes: the old client's decoder takes the frame whatever the reason's length.
#[test]
fn a_legacy_refusal_of_a_long_reason_still_decodes() {
    for reason in ["x".repeat(4 * MAX_MESSAGE), "\u{1d11e}".repeat(MAX_MESSAGE)] {
        let f = legacy_refusal(1, &reason);
        let Ok(Control::Error { message }) = decode(&f[HEADER_LEN..]) else {
            panic!("refusal of {} bytes", reason.len())
        };
        assert!(message.len() <= MAX_MESSAGE && reason.starts_with(&message));
    }
}

#[test]
fn sizes_at_each_transports_bounds() {
    use super::super::stream::{HEADER_LEN as MIN, MAX_UDP_LEN};
    assert!(start_with(|r| r.size = MIN).is_ok(), "the stream header alone is a message");
    assert!(start_with(|r| r.size = MIN - 1).is_err());
    assert!(start_with(|r| r.size = MAX_UDP_LEN).is_ok(), "the largest UDP payload");
    assert!(start_with(|r| r.size = MAX_UDP_LEN + 1).is_err());
    let tcp = |size| {
        start_with(|r| {
            r.proto = StreamProto::Tcp;
            r.size = size;
        })
    };
    assert!(tcp(MIN).is_ok() && tcp(MIN - 1).is_err());
    assert!(tcp(usize::from(u16::MAX)).is_ok() && tcp(usize::from(u16::MAX) + 1).is_err());
}

/// Only TCP refuses both directions at once; UDP runs them, TCP runs either one.
#[test]
fn tcp_takes_one_direction_udp_takes_both() {
    let run = |proto, direction| {
        start_with(|r| {
            r.proto = proto;
            r.direction = direction;
        })
    };
    assert!(matches!(run(StreamProto::Tcp, Direction::Both), Err(ControlError::Value(_))));
    for d in [Direction::Forward, Direction::Reverse, Direction::Both] {
        assert!(run(StreamProto::Udp, d).is_ok(), "UDP {d:?}");
    }
    assert!(run(StreamProto::Tcp, Direction::Forward).is_ok());
    assert!(run(StreamProto::Tcp, Direction::Reverse).is_ok());
}

#[test]
fn receive_buffers_are_one_byte_to_sixteen_mib() {
    assert_eq!(MAX_RCVBUF, 16 * 1024 * 1024, "serve's own default, which a client may ask for");
    for ok in [1, 4096, MAX_RCVBUF] {
        assert!(start_with(|r| r.rcvbuf = Some(ok)).is_ok(), "rcvbuf {ok}");
    }
    for bad in [0, MAX_RCVBUF + 1] {
        assert!(matches!(start_with(|r| r.rcvbuf = Some(bad)), Err(ControlError::Value(_))), "rcvbuf {bad}");
    }
    assert!(start_with(|r| r.rcvbuf = None).is_ok());
}

#[test]
fn a_granted_rate_is_positive_and_finite() {
    let ready = |rate_per_s| Control::Ready {
        data_port: 5000,
        rcvbuf: 1 << 20,
        granted: Granted { rate_per_s, duration_ns: 1_000_000_000 },
    };
    for ok in [None, Some(1000.0), Some(MIN_RATE_PER_S)] {
        let m = ready(ok);
        assert_eq!(decode(serde_json::to_string(&m).unwrap().as_bytes()), Ok(m), "granted {ok:?}");
    }
    for bad in [0.0, -0.0, -1.0] {
        let j = serde_json::to_string(&ready(Some(bad))).unwrap();
        assert!(matches!(decode(j.as_bytes()), Err(ControlError::Value(_))), "granted {bad}");
    }
    // JSON has no infinity or NaN; a message built in memory is checked the same way
    for bad in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        assert!(ready(Some(bad)).check().is_err(), "granted {bad}");
    }
}

/// Each bound is inclusive: a value at the bound is accepted, one past it refused.
#[test]
fn values_at_their_bounds_are_accepted() {
    let iv = |jitter_ns| {
        let counts = StreamCounts { jitter_ns, ..Default::default() };
        let m = Control::Interval { publishers: vec![PublisherCounts { publisher: 0, counts }], kernel: None };
        decode(serde_json::to_string(&m).unwrap().as_bytes())
    };
    assert!(iv(0.0).is_ok(), "no jitter is a jitter");
    let kernel = |k: Snmp| {
        let m = Control::Interval { publishers: vec![], kernel: Some(k) };
        decode(serde_json::to_string(&m).unwrap().as_bytes())
    };
    let one = || [("F".to_owned(), 1)].into_iter().collect::<std::collections::BTreeMap<_, _>>();
    let tables = (0..MAX_KERNEL_TABLES).map(|i| (format!("T{i}"), one())).collect();
    assert!(kernel(Snmp(tables)).is_ok(), "MAX_KERNEL_TABLES tables");
    let long = "n".repeat(MAX_KERNEL_FIELDS);
    assert!(kernel(Snmp([(long.clone(), one())].into())).is_ok(), "a table name of MAX_KERNEL_FIELDS bytes");
    let field = [(long, 1)].into_iter().collect();
    assert!(kernel(Snmp([("Udp".to_owned(), field)].into())).is_ok(), "a field name of MAX_KERNEL_FIELDS bytes");
    let challenge = |salt: &str| {
        decode(
            format!(r#"{{"type":"challenge","nonce":"{}","auth":true,"salt":"{salt}"}}"#, "0f".repeat(16)).as_bytes(),
        )
    };
    assert!(challenge(&"s".repeat(crate::auth::MAX_SALT)).is_ok(), "a salt of MAX_SALT bytes");
    let error = |n| decode(serde_json::to_string(&Control::Error { message: "x".repeat(n) }).unwrap().as_bytes());
    assert!(error(MAX_MESSAGE).is_ok() && error(MAX_MESSAGE + 1).is_err());
}
