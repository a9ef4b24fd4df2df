use proptest::prelude::*;

use super::*;

const GOOD: &[u8] =
    b"GET /rooms/demo-3 HTTP/1.1\r\nHost: h:8080\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

fn refusal(b: &[u8]) -> Refusal {
    match classify(b) {
        Head::Refuse(r) => r,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(b)),
    }
}

#[test]
fn a_websocket_upgrade_names_its_room() {
    let mut b = GOOD.to_vec();
    b.extend_from_slice(b"\x81\x80rest");
    assert_eq!(
        classify(&b),
        Head::Upgrade { path: "/rooms/demo-3", key: b"dGhlIHNhbXBsZSBub25jZQ==", len: GOOD.len() }
    );
    let lower = String::from_utf8_lossy(GOOD).to_lowercase().replace("get ", "GET ").replace("http/1.1", "HTTP/1.1");
    assert!(matches!(classify(lower.as_bytes()), Head::Upgrade { .. }), "header names and tokens in any case");
}

/// `load --tokens` puts per-client values in the query (`/rooms/{room}?user={user}`): the
/// members of one room path must share it whatever their query says.
#[test]
fn the_query_is_not_part_of_the_room() {
    for (target, room) in [("/rooms/0?user=ann", "/rooms/0"), ("/rooms/0?", "/rooms/0"), ("/?a=b?c", "/")] {
        let b = String::from_utf8_lossy(GOOD).replace("/rooms/demo-3", target);
        match classify(b.as_bytes()) {
            Head::Upgrade { path, .. } => assert_eq!(path, room, "{target}"),
            other => panic!("{target}: {other:?}"),
        }
    }
}

#[test]
fn everything_else_is_refused_with_a_reason() {
    let sub = |from: &str, to: &str| String::from_utf8_lossy(GOOD).replace(from, to).into_bytes();
    assert_eq!(refusal(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").status(), 426, "a browser's plain GET");
    assert_eq!(refusal(&sub("Upgrade: websocket\r\n", "")).status(), 426);
    assert_eq!(refusal(&sub("keep-alive, Upgrade", "keep-alive")).status(), 426);
    assert_eq!(refusal(&sub("Version: 13", "Version: 8")), Refusal::UpgradeRequired("WebSocket version 13 only"));
    assert_eq!(refusal(&sub("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "")).status(), 400);
    assert_eq!(refusal(&sub("GET ", "POST ")), Refusal::BadRequest("only GET opens a WebSocket"));
    assert_eq!(refusal(&sub("HTTP/1.1", "HTTP/1.0")).status(), 400);
    assert_eq!(refusal(&sub("/rooms/demo-3", "rooms")).status(), 400);
    assert_eq!(refusal(&sub("/rooms/demo-3", &format!("/{}", "r".repeat(300)))).status(), 400);
    assert_eq!(refusal(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03").status(), 400, "TLS to a ws:// port");
    assert_eq!(refusal(b"SSH-2.0-OpenSSH_9.2\r\n").status(), 400);
    let many = "X-n: y\r\n".repeat(40);
    assert_eq!(refusal(&sub("Host: h:8080\r\n", &many)), Refusal::BadRequest("more than 32 headers"));
    // a head that never ends
    assert_eq!(classify(b"GET / HTTP/1.1\r\nX: y\r\n"), Head::Partial);
    let endless = format!("GET / HTTP/1.1\r\nX: {}\r\n", "y".repeat(MAX_HEAD));
    assert_eq!(refusal(endless.as_bytes()), Refusal::BadRequest("request head over 8 KiB"));
}

#[test]
fn refusals_are_http_responses_with_their_status() {
    for r in [Refusal::BadRequest("x"), Refusal::UpgradeRequired("y")] {
        let text = r.response();
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(text.as_bytes()).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial: {text}"),
        };
        assert_eq!(resp.code, Some(r.status()));
        let len: usize = resp
            .headers
            .iter()
            .find(|h| h.name == "Content-Length")
            .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
            .unwrap();
        assert_eq!(len, text.len() - n, "the body is as long as it says");
        if r.status() == 426 {
            assert!(text.contains("Upgrade: websocket\r\n") && text.contains("Sec-WebSocket-Version: 13\r\n"));
        }
    }
}

#[test]
fn the_budget_by_hand() {
    let l = Limits { max_connections: 1_000, max_message: 16 * 1024, member_backlog: 1 << 20, total_backlog: 64 << 20 };
    // 1,000 x (3 x 16 KiB + 4 KiB + 8 KiB + 2 KiB) + 64 MiB
    assert_eq!(l.budget_bytes(), 1_000 * 62 * 1024 + (64 << 20));
}

proptest! {
    /// Any bytes: a verdict, never a panic, and an upgrade's head length is within the input.
    #[test]
    fn any_bytes_classify(b in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Head::Upgrade { len, path, .. } = classify(&b) {
            prop_assert!(len <= b.len() && path.starts_with('/'));
        }
    }

    /// Every proper prefix of a good head asks for more; the whole head is an upgrade.
    #[test]
    fn prefixes_of_a_head_are_partial(cut in 0usize..GOOD.len()) {
        prop_assert_eq!(classify(&GOOD[..cut]), Head::Partial);
    }
}

#[test]
fn a_response_head_ends_at_its_blank_line() {
    let head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    let mut b = head.to_vec();
    assert_eq!(response_head_len(&b), Some(head.len()));
    b.extend_from_slice(b"\x81\x02hi");
    assert_eq!(response_head_len(&b), Some(head.len()), "a frame after the head is not part of it");
    assert_eq!(response_head_len(&head[..head.len() - 1]), None, "not yet whole");
    assert_eq!(response_head_len(GOOD), None, "a request is not a response");
}

/// GOOD with an `X-Pad` header that makes the head `len` bytes long.
fn head_of(len: usize) -> Vec<u8> {
    let bare = GOOD.len() + "X-Pad: \r\n".len();
    let pad = format!("X-Pad: {}\r\n", "y".repeat(len - bare));
    String::from_utf8_lossy(GOOD).replace("Host: h:8080\r\n", &format!("Host: h:8080\r\n{pad}")).into_bytes()
}

/// The limits hold at their values: a head, a path and a key as long as allowed pass, one
/// byte more is refused; a head cut short at the cap will never be whole.
#[test]
fn heads_paths_and_keys_at_their_limits() {
    let exact = head_of(MAX_HEAD);
    assert_eq!(exact.len(), MAX_HEAD);
    assert!(matches!(classify(&exact), Head::Upgrade { len: MAX_HEAD, .. }));
    assert_eq!(refusal(&head_of(MAX_HEAD + 1)), Refusal::BadRequest("request head over 8 KiB"));
    assert_eq!(classify(&exact[..MAX_HEAD - 1]), Head::Partial);
    let cut = head_of(MAX_HEAD + 10);
    assert_eq!(refusal(&cut[..MAX_HEAD]), Refusal::BadRequest("request head over 8 KiB"));
    let with_path =
        |n: usize| String::from_utf8_lossy(GOOD).replace("/rooms/demo-3", &format!("/{}", "r".repeat(n - 1)));
    assert!(matches!(classify(with_path(MAX_PATH).as_bytes()), Head::Upgrade { .. }));
    assert_eq!(refusal(with_path(MAX_PATH + 1).as_bytes()).status(), 400);
    let with_key = |k: &str| String::from_utf8_lossy(GOOD).replace("dGhlIHNhbXBsZSBub25jZQ==", k).into_bytes();
    assert!(matches!(classify(&with_key(&"k".repeat(64))), Head::Upgrade { .. }));
    for bad in [String::new(), "k".repeat(65)] {
        assert_eq!(refusal(&with_key(&bad)), Refusal::BadRequest("no Sec-WebSocket-Key"), "{bad:?}");
    }
}
