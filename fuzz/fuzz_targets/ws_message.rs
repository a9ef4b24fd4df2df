//! What the room and the load generator parse from the wire. The first byte picks the
//! decoder, the rest is its input:
//! - 0: a message's JSON as a load client reads it (`load::msg::scan`, `parse`) and as the
//!   room reads it (`is_request`);
//! - 1: the opening bytes of a connection to the room (`room::classify`);
//! - 2: a byte stream of WebSocket frames from a client, read by tungstenite with the room's
//!   limits (frame cap = message cap = 16 KiB), each message asked `is_request`;
//! - 3: the same from a server, with the load client's limits (1 MiB), each message `parse`d.
//!
//! Never panics; an upgrade's head is inside the input and its path a room path; a refusal
//! is a complete HTTP response with its status; no message read is over its cap; a request
//! is a top-level `"req": true`; a parsed message agrees with the scan it came from.

#![no_main]

use std::io::{self, Cursor, Read, Write};

use libfuzzer_sys::fuzz_target;
use tungstenite::protocol::{Role, WebSocket, WebSocketConfig};
use tungstenite::Message;
use wirebench_core::load::msg::{is_request, parse, scan};
use wirebench_core::room::{classify, Head, MAX_PATH};

/// The room's `--max-message` default, and the load client's cap.
const ROOM_CAP: usize = 16 << 10;
const CLIENT_CAP: usize = 1 << 20;

/// Reads the fuzz input, swallows what tungstenite writes (pongs, closes).
struct Stream(Cursor<Vec<u8>>);

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn message(b: &[u8]) {
    let s = scan(b);
    let req = is_request(b);
    if req {
        assert_eq!(s.as_ref().and_then(|s| s.req), Some(true), "a request is a top-level req: true");
    }
    if let Some(p) = parse(b) {
        let s = s.expect("what parses scans");
        assert_eq!((s.kind.as_deref(), s.ts_us), (Some(&*p.kind), Some(p.ts_us)));
        assert_eq!((s.sender, s.seq, s.it_us), (p.sender, p.seq, p.it_us));
    }
}

fn frames(data: &[u8], role: Role, cap: usize, each: impl Fn(&[u8])) {
    let cfg = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(cap))
        .max_frame_size(Some(cap));
    let mut ws = WebSocket::from_raw_socket(Stream(Cursor::new(data.to_vec())), role, Some(cfg));
    // Every message takes at least 2 input bytes: a bounded loop.
    for _ in 0..=data.len() {
        match ws.read() {
            Ok(Message::Text(t)) => {
                assert!(t.len() <= cap);
                each(t.as_bytes());
            }
            Ok(Message::Binary(b)) => {
                assert!(b.len() <= cap);
                each(&b);
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 4 {
        0 => message(rest),
        1 => match classify(rest) {
            Head::Upgrade { path, key, len } => {
                assert!(len <= rest.len() && !key.is_empty());
                assert!(path.starts_with('/') && path.len() <= MAX_PATH);
            }
            Head::Refuse(r) => {
                let text = r.response();
                let mut headers = [httparse::EMPTY_HEADER; 16];
                let mut resp = httparse::Response::new(&mut headers);
                assert!(matches!(resp.parse(text.as_bytes()), Ok(httparse::Status::Complete(_))));
                assert_eq!(resp.code, Some(r.status()));
            }
            Head::Partial => assert!(rest.len() < wirebench_core::room::MAX_HEAD),
        },
        2 => frames(rest, Role::Server, ROOM_CAP, |b| {
            let _ = is_request(b);
        }),
        _ => frames(rest, Role::Client, CLIENT_CAP, message),
    }
});
