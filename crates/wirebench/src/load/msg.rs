//! Load messages: JSON with the event type, a request mark, the sender, a sequence number,
//! the send time and the intended send time (wall clock, microseconds since the Unix
//! epoch), padded to the type's size. A template with placeholders replaces the layout for
//! other servers; the receiver finds the fields by their keys, so a template that keeps
//! the keys `type`, `sender`, `ts` (and `it`) is measured the same way.

use std::fmt::Write as _;

/// The default layout, as a template.
pub const DEFAULT_TEMPLATE: &str =
    r#"{"type":"{type}","req":{req},"sender":{sender},"room":{room},"seq":{seq},"ts":{ts},"it":{it},"pad":"{pad}"}"#;

/// One message's fields.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// Event type.
    pub kind: &'a str,
    /// A request?
    pub req: bool,
    /// Client number.
    pub sender: u64,
    /// Room number.
    pub room: u64,
    /// Client's sequence number.
    pub seq: u64,
    /// Send time, µs since the epoch.
    pub ts_us: u64,
    /// Intended send time, µs since the epoch.
    pub it_us: u64,
}

/// A parsed template: literal pieces and placeholders.
#[derive(Debug, Clone)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
enum Part {
    Lit(String),
    Kind,
    Req,
    Sender,
    Room,
    Seq,
    Ts,
    It,
    Pad,
}

impl Template {
    /// Parses `{type} {req} {sender} {room} {seq} {ts} {it} {pad}`; other braces are kept.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = s;
        let mut lit = String::new();
        while let Some(i) = rest.find('{') {
            lit.push_str(&rest[..i]);
            rest = &rest[i..];
            let hole = ["{type}", "{req}", "{sender}", "{room}", "{seq}", "{ts}", "{it}", "{pad}"]
                .iter()
                .position(|h| rest.starts_with(h));
            if let Some(k) = hole {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(
                    [Part::Kind, Part::Req, Part::Sender, Part::Room, Part::Seq, Part::Ts, Part::It, Part::Pad][k]
                        .clone(),
                );
                rest = &rest[rest.find('}').map_or(rest.len(), |e| e + 1)..];
            } else {
                lit.push('{');
                rest = &rest[1..];
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        if !parts.iter().any(|p| matches!(p, Part::Ts)) {
            return Err("the message template needs {ts} (the send time) to measure delay".into());
        }
        Ok(Self { parts })
    }

    /// Writes the message into `out` (cleared first), padded to `size` bytes when `{pad}`
    /// is there and the rest is shorter.
    pub fn render(&self, f: &Fields<'_>, size: usize, out: &mut String) {
        out.clear();
        let mut pad_at = None;
        for p in &self.parts {
            match p {
                Part::Lit(l) => out.push_str(l),
                Part::Kind => out.push_str(f.kind),
                Part::Req => out.push_str(if f.req { "true" } else { "false" }),
                Part::Sender => write_u64(out, f.sender),
                Part::Room => write_u64(out, f.room),
                Part::Seq => write_u64(out, f.seq),
                Part::Ts => write_u64(out, f.ts_us),
                Part::It => write_u64(out, f.it_us),
                Part::Pad => pad_at = Some(out.len()),
            }
        }
        if let Some(at) = pad_at {
            let n = size.saturating_sub(out.len());
            out.insert_str(at, &PADDING[..n.min(PADDING.len())]);
        }
    }
}

const PADDING: &str = include_str!("padding.txt");

fn write_u64(out: &mut String, v: u64) {
    let _ = write!(out, "{v}");
}

/// What a receiver needs from a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen<'a> {
    /// Event type.
    pub kind: &'a str,
    /// Sender (`u64::MAX` when absent).
    pub sender: u64,
    /// Send time, µs.
    pub ts_us: u64,
    /// Intended send time, µs (`None` when absent).
    pub it_us: Option<u64>,
}

/// Finds the fields by key; `None` when `type` or `ts` is missing.
pub fn parse(b: &[u8]) -> Option<Seen<'_>> {
    let kind = string_after(b, b"\"type\":\"")?;
    let ts_us = number_after(b, b"\"ts\":")?;
    Some(Seen {
        kind,
        sender: number_after(b, b"\"sender\":").unwrap_or(u64::MAX),
        ts_us,
        it_us: number_after(b, b"\"it\":"),
    })
}

fn find(b: &[u8], key: &[u8]) -> Option<usize> {
    b.windows(key.len()).position(|w| w == key).map(|i| i + key.len())
}

fn number_after(b: &[u8], key: &[u8]) -> Option<u64> {
    let at = find(b, key)?;
    let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 20 {
        return None;
    }
    b[at..at + digits].iter().try_fold(0u64, |v, &c| v.checked_mul(10)?.checked_add(u64::from(c - b'0')))
}

fn string_after<'a>(b: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = find(b, key)?;
    let len = b[at..].iter().position(|&c| c == b'"')?;
    std::str::from_utf8(&b[at..at + len]).ok()
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn renders_padded_and_parses_back() {
        let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
        let mut s = String::new();
        t.render(&F, 200, &mut s);
        assert_eq!(s.len(), 200);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["type"], "cursor");
        assert_eq!(v["seq"], 3);
        let seen = parse(s.as_bytes()).unwrap();
        assert_eq!(seen, Seen { kind: "cursor", sender: 7, ts_us: F.ts_us, it_us: Some(F.it_us) });
        // shorter than the fields: no padding, nothing cut
        t.render(&F, 10, &mut s);
        assert!(s.contains(r#""pad":"""#));
    }

    proptest::proptest! {
        /// Frames from the server are untrusted: any bytes give a verdict, never a panic,
        /// and a message that parses keeps the fields it was rendered with.
        #[test]
        fn any_bytes_parse_or_not_but_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn rendered_messages_parse_back(sender in 0u64..u64::MAX, ts in 0u64..u64::MAX, size in 0usize..600) {
            let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
            let mut s = String::new();
            t.render(&Fields { sender, ts_us: ts, ..F }, size, &mut s);
            let seen = parse(s.as_bytes()).unwrap();
            proptest::prop_assert_eq!((seen.sender, seen.ts_us), (sender, ts));
        }
    }

    #[test]
    fn templates_for_other_servers() {
        let t = Template::parse(r#"{"event":{"type":"{type}","ts":{ts}},"x":"{unknown}"}"#).unwrap();
        let mut s = String::new();
        t.render(&F, 0, &mut s);
        assert_eq!(s, r#"{"event":{"type":"cursor","ts":1700000000000001},"x":"{unknown}"}"#);
        assert_eq!(parse(s.as_bytes()).unwrap().sender, u64::MAX);
        assert!(Template::parse(r#"{"type":"{type}"}"#).is_err());
        assert_eq!(parse(br#"{"type":"a"}"#), None);
        assert_eq!(parse(br#"{"type":"a","ts":99999999999999999999}"#), None);
    }
}
