use proptest::prelude::*;
use serde_json::Value;

use super::*;

const F: Fields<'static> = Fields {
    kind: "cursor",
    req: false,
    sender: 7,
    room: 1,
    seq: 3,
    ts_us: 1_700_000_000_000_001,
    it_us: 1_700_000_000_000_000,
};

fn seen(kind: &str, sender: Option<u64>, seq: Option<u64>, ts_us: u64, it_us: Option<u64>) -> Seen<'_> {
    Seen { kind: Cow::Borrowed(kind), sender, seq, ts_us, it_us }
}

#[test]
fn renders_padded_and_parses_back() {
    let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
    let mut s = String::new();
    t.render(&F, 200, &mut s);
    assert_eq!(s.len(), 200);
    let v: Value = serde_json::from_str(&s).unwrap();
    assert_eq!((v["type"].as_str(), v["seq"].as_u64()), (Some("cursor"), Some(3)));
    assert_eq!(parse(s.as_bytes()).unwrap(), seen("cursor", Some(7), Some(3), F.ts_us, Some(F.it_us)));
    assert!(matches!(parse(s.as_bytes()).unwrap().kind, Cow::Borrowed(_)), "nothing allocated");
    // shorter than the fields: no padding, nothing cut
    t.render(&F, 10, &mut s);
    assert!(s.contains(r#""pad":"""#));
}

/// The padding used to stop at 64 KiB, so `--size '*=500000'` sent 64 KiB messages.
#[test]
fn messages_larger_than_the_padding_block_get_their_size() {
    let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
    let mut s = String::new();
    for size in [65_535, 65_536 + 200, 1 << 20] {
        t.render(&F, size, &mut s);
        assert_eq!(s.len(), size);
        assert_eq!(parse(s.as_bytes()).unwrap().ts_us, F.ts_us);
    }
}

/// The hand scanner took the first bytes `"ts":` anywhere, inside strings too.
#[test]
fn keys_inside_strings_are_text() {
    let m = br#"{"type":"a","note":"\"ts\":5, \"sender\":1","ts":9}"#;
    assert_eq!(parse(m).unwrap(), seen("a", None, None, 9, None));
    assert_eq!(parse(br#"{"type":"a","pad":"\"ts\":5"}"#), None, "no ts key: not timed");
    assert_eq!(parse(br#"{"pad":"\"type\":\"x\"","ts":5}"#), None, "no type key");
}

#[test]
fn values_of_the_wrong_type_are_not_taken() {
    assert_eq!(parse(br#"{"type":"a","ts":-5}"#), None);
    assert_eq!(parse(br#"{"type":"a","ts":5.5}"#), None);
    assert_eq!(parse(br#"{"type":"a","ts":"5"}"#), None);
    assert_eq!(parse(br#"{"type":"a","ts":99999999999999999999}"#), None, "past u64");
    assert_eq!(parse(br#"{"type":5,"ts":5}"#), None);
    assert_eq!(parse(br#"{"type":"a","ts":18446744073709551615}"#).unwrap().ts_us, u64::MAX);
}

#[test]
fn not_an_object_is_nothing() {
    for b in [&b""[..], b"[]", b"5", br#""x""#, b"{", b"{}{}", br#"{"type":"a","ts":1} x"#, b"\xff"] {
        assert_eq!(scan(b), None, "{:?}", String::from_utf8_lossy(b));
    }
    assert_eq!(scan(b" {} \n"), Some(Scanned::default()));
}

#[test]
fn escaped_type_names_are_unescaped() {
    let s = parse(br#"{"type":"a\"b","ts":1}"#).unwrap();
    assert_eq!(s.kind, "a\"b");
    assert!(matches!(s.kind, Cow::Owned(_)));
}

#[test]
fn templates_for_other_servers() {
    let t = Template::parse(r#"{"event":{"type":"{type}","ts":{ts}},"x":"{unknown}"}"#).unwrap();
    let mut s = String::new();
    t.render(&F, 0, &mut s);
    assert_eq!(s, r#"{"event":{"type":"cursor","ts":1700000000000001},"x":"{unknown}"}"#);
    assert_eq!(parse(s.as_bytes()).unwrap(), seen("cursor", None, None, F.ts_us, None));
    assert_eq!(Template::parse(r#"{"type":"{type}"}"#), Err(TemplateError::NoTs));
    // renders, but not as JSON a receiver can read
    assert!(matches!(Template::parse(r"type={type} ts={ts}"), Err(TemplateError::Unreadable(_))));
    assert!(matches!(Template::parse(r#"{"t":"{type}","ts":{ts}}"#), Err(TemplateError::Unreadable(_))));
    assert!(matches!(Template::parse(r#"{"type":"{type}","ts":"{ts}"}"#), Err(TemplateError::Unreadable(_))));
    // reads back, but not as the type or the time sent: each alone is refused
    assert!(matches!(Template::parse(r#"{"type":"evt-{type}","ts":{ts}}"#), Err(TemplateError::Unreadable(_))));
    assert!(matches!(Template::parse(r#"{"type":"{type}","ts":{ts}000}"#), Err(TemplateError::Unreadable(_))));
}

/// The room matched the bytes `"req":true`: fooled by text and blind to `"req": true`.
#[test]
fn requests_are_the_top_level_req_field() {
    assert!(is_request(br#"{"type":"save","req":true,"seq":1}"#));
    assert!(is_request(br#"{ "type" : "save", "req" : true }"#), "JSON spacing");
    assert!(!is_request(br#"{"type":"cursor","req":false}"#));
    assert!(!is_request(br#"{"type":"cursor","note":"\"req\":true"}"#), "text in a string");
    assert!(!is_request(br#"{"type":"cursor","x":{"req":true}}"#), "nested");
    assert!(!is_request(br#"{"req":"true"}"#));
    assert!(!is_request(br#"{"req":1}"#));
    assert!(!is_request(br#"{"req":true"#), "not JSON");
    assert!(!is_request(br#"[{"req":true}]"#));
    assert!(!is_request(br#"{"req":true} {}"#), "trailing bytes");
    assert!(!is_request(b""));
    // found by fuzzing: an invalid UTF-8 byte in another string is not JSON
    assert!(!is_request(b"{\"type\":\"s\x98ve\",\"req\":true}"));
    assert!(!is_request(b"{\"x\":[\"\x98\"],\"req\":true}"));
    assert!(!is_request(b"{\"\x98\":1,\"req\":true}"));
    assert_eq!(scan(b"{\"type\":\"a\",\"ts\":1,\"x\":[\"\x98\"]}"), None);
}

/// Finds the first `key` depth-first in `v` (objects only, not arrays), the oracle for
/// [`scan`].
fn first<'v>(v: &'v Value, key: &str, depth: u32) -> Option<&'v Value> {
    let Value::Object(m) = v else { return None };
    if depth >= 16 {
        return None;
    }
    for (k, x) in m {
        if k == key {
            let wanted = match key {
                "type" => x.is_string(),
                _ => x.is_u64(),
            };
            if wanted {
                return Some(x);
            }
        }
        if let Some(f) = first(x, key, depth + 1) {
            return Some(f);
        }
    }
    None
}

fn json_value() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec!["type", "ts", "sender", "seq", "it", "req", "pad", "x"]);
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\:{}]{0,8}".prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::btree_map(key.clone(), inner.clone(), 0..6)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            prop::collection::vec(inner, 0..3).prop_map(Value::Array),
        ]
    })
}

#[test]
fn numbers_are_written_in_decimal_at_the_edges() {
    for v in [0, 1, 9, 10, 99, 100, 1_000_000, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
        let mut s = String::from("x");
        super::write_u64(&mut s, v);
        assert_eq!(s, format!("x{v}"));
    }
}

proptest! {
    /// The digit writer is `format!`'s decimal, appended.
    #[test]
    fn numbers_are_written_as_format_writes_them(v in any::<u64>(), pre in "[a-z{}\":,]{0,8}") {
        let mut s = pre.clone();
        super::write_u64(&mut s, v);
        prop_assert_eq!(s, format!("{pre}{v}"));
    }

    /// Frames from the server are untrusted: any bytes give a verdict, never a panic.
    #[test]
    fn any_bytes_scan_or_not_but_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = scan(&bytes);
        let _ = is_request(&bytes);
    }

    /// Every rendered message reads back with the fields it was rendered with.
    #[test]
    fn rendered_messages_parse_back(
        sender in any::<u64>(), seq in any::<u64>(), ts in any::<u64>(), it in any::<u64>(),
        req in any::<bool>(), size in 0usize..600,
    ) {
        let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
        let mut s = String::new();
        t.render(&Fields { sender, seq, ts_us: ts, it_us: it, req, ..F }, size, &mut s);
        prop_assert_eq!(parse(s.as_bytes()).unwrap(), seen("cursor", Some(sender), Some(seq), ts, Some(it)));
        prop_assert_eq!(is_request(s.as_bytes()), req);
    }

    /// On any JSON object (unique keys, nested objects and arrays, strings that look like
    /// keys), scan finds what a depth-first search of the parsed value finds, and a request
    /// is exactly a top-level `"req": true`.
    #[test]
    fn scan_agrees_with_a_parsed_value(v in json_value()) {
        let text = serde_json::to_string(&v).unwrap();
        let got = scan(text.as_bytes());
        let Value::Object(top) = &v else {
            prop_assert_eq!(got, None);
            return Ok(());
        };
        let got = got.unwrap();
        prop_assert_eq!(got.kind.as_deref(), first(&v, "type", 0).and_then(Value::as_str));
        for (key, field) in [("ts", got.ts_us), ("sender", got.sender), ("seq", got.seq), ("it", got.it_us)] {
            prop_assert_eq!(field, first(&v, key, 0).and_then(Value::as_u64), "{}", key);
        }
        prop_assert_eq!(got.req, top.get("req").and_then(Value::as_bool));
        prop_assert_eq!(is_request(text.as_bytes()), top.get("req") == Some(&Value::Bool(true)));
    }
}

/// The shortcut answers only for the exact default layout; near misses go to the walk.
#[test]
fn the_shortcut_takes_only_the_default_layout() {
    let ok = br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":"xx"}"#;
    let want = Scanned {
        kind: Some(Cow::Borrowed("cursor")),
        sender: Some(7),
        seq: Some(3),
        ts_us: Some(12),
        it_us: Some(11),
        req: Some(false),
    };
    assert_eq!(fast::scan(ok), Some(want.clone()));
    assert_eq!(walk(ok), Some(want));
    for near in [
        // the walk reads these
        &br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":"xx"} "#[..],
        br#"{"type":"cur\u0073or","req":false,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":"xx"}"#,
        br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":18446744073709551616,"it":11,"pad":""}"#,
        br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":12.5,"it":11,"pad":""}"#,
        br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":-12,"it":11,"pad":""}"#,
        br#"{"type":"cursor","req":null,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":""}"#,
        // the walk refuses these
        br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":012,"it":11,"pad":""}"#,
        br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":"a	b"}"#,
        br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":"xx"}}"#,
        b"{\"type\":\"\xff\",\"req\":false,\"sender\":7,\"room\":1,\"seq\":3,\"ts\":12,\"it\":11,\"pad\":\"\"}",
    ] {
        assert_eq!(fast::scan(near), None, "{}", String::from_utf8_lossy(near));
    }
    assert_eq!(
        walk(br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":1e3,"it":11,"pad":""}"#).unwrap().ts_us,
        None
    );
    assert_eq!(scan(br#"{"type":"cursor","req":false,"sender":7,"room":1,"seq":3,"ts":012,"it":11,"pad":""}"#), None);
}

/// Zeros (a room or sequence 0, common in every run) and plain strings with spaces are
/// the default layout too: the shortcut takes them, with the walk's result.
#[test]
fn the_shortcut_takes_zeros_and_spaces() {
    for m in [
        &br#"{"type":"cursor","req":true,"sender":0,"room":0,"seq":0,"ts":0,"it":0,"pad":""}"#[..],
        br#"{"type":"cursor move","req":false,"sender":7,"room":1,"seq":3,"ts":12,"it":11,"pad":"x x"}"#,
    ] {
        let got = fast::scan(m);
        assert!(got.is_some(), "{}", String::from_utf8_lossy(m));
        assert_eq!(got, walk(m));
    }
}

proptest! {
    /// Every message the default template renders takes the shortcut, with the walk's result.
    #[test]
    fn rendered_messages_take_the_shortcut(
        kind in "[a-zA-Z0-9_é-]{1,12}", sender in any::<u64>(), room in any::<u64>(), seq in any::<u64>(),
        ts in any::<u64>(), it in any::<u64>(), req in any::<bool>(), size in 0usize..400,
    ) {
        let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
        let mut s = String::new();
        t.render(&Fields { kind: &kind, sender, room, seq, ts_us: ts, it_us: it, req }, size, &mut s);
        let got = fast::scan(s.as_bytes());
        prop_assert!(got.is_some());
        prop_assert_eq!(got, walk(s.as_bytes()));
    }

    /// Whatever one byte changed, inserted or removed does to a rendered message, the
    /// shortcut either steps aside or gives what the walk gives.
    #[test]
    fn the_shortcut_agrees_with_the_walk_on_every_near_miss(
        ts in any::<u64>(), size in 0usize..200, at in any::<prop::sample::Index>(), byte in any::<u8>(), edit in 0u8..3,
    ) {
        let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
        let mut s = String::new();
        t.render(&Fields { ts_us: ts, ..F }, size, &mut s);
        let mut b = s.into_bytes();
        let i = at.index(b.len());
        match edit {
            0 => b[i] = byte,
            1 => b.insert(i, byte),
            _ => { b.remove(i); }
        }
        if let Some(got) = fast::scan(&b) {
            prop_assert_eq!(Some(got), walk(&b));
        }
    }
}

/// Only the top-level object's `req` is the message's: a `req` in a nested object, even one
/// met first, is someone else's field.
#[test]
fn a_nested_req_is_not_the_messages() {
    let s = scan(br#"{"x":{"req":true},"type":"a","ts":1}"#).unwrap();
    assert_eq!((s.req, s.ts_us), (None, Some(1)));
    let s = scan(br#"{"x":{"y":{"req":true}},"req":false,"type":"a","ts":1}"#).unwrap();
    assert_eq!(s.req, Some(false));
}

/// Keys are looked for in objects nested up to MAX_DEPTH deep, and not below: the object
/// at depth MAX_DEPTH (the top one is depth 0) is skipped unread.
#[test]
fn objects_nested_past_the_depth_limit_are_skipped() {
    let nested = |levels: u32| {
        let n = usize::try_from(levels).unwrap();
        format!(r#"{{"type":"a","ts":1,{}"it":5{}}}"#, r#""x":{"#.repeat(n), "}".repeat(n))
    };
    let at = |levels: u32| scan(nested(levels).as_bytes()).unwrap().it_us;
    assert_eq!(at(MAX_DEPTH - 1), Some(5), "the deepest object read");
    assert_eq!(at(MAX_DEPTH), None, "one deeper: skipped");
    assert!(scan(nested(MAX_DEPTH + 3).as_bytes()).is_some(), "still one JSON object");
}
