//! Message templates: literal text with placeholders, rendered into a reused buffer.

use super::write_u64;

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
    /// The sender's sequence number of this kind of message (relayed events and requests
    /// are numbered apart, each from 0 without gaps).
    pub seq: u64,
    /// Send time, µs since the epoch.
    pub ts_us: u64,
    /// Intended send time, µs since the epoch.
    pub it_us: u64,
}

/// Why a template was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// No `{ts}`.
    #[error("the message template needs {{ts}} (the send time) to measure delay")]
    NoTs,
    /// The rendered message does not give back its type and send time.
    #[error(
        "the message template must render a JSON object whose \"type\" and \"ts\" keys hold {{type}} and {{ts}} \
         (a receiver reads them back): {0}"
    )]
    Unreadable(String),
}

/// A parsed template: literal pieces and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
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

const HOLES: [(&str, Part); 8] = [
    ("{type}", Part::Kind),
    ("{req}", Part::Req),
    ("{sender}", Part::Sender),
    ("{room}", Part::Room),
    ("{seq}", Part::Seq),
    ("{ts}", Part::Ts),
    ("{it}", Part::It),
    ("{pad}", Part::Pad),
];

/// Padding comes from here, 64 KiB at a time.
const PADDING: &str = include_str!("padding.txt");

impl Template {
    /// Parses `{type} {req} {sender} {room} {seq} {ts} {it} {pad}`; other braces are kept.
    /// The template must render a JSON object from which [`super::parse`] reads the type
    /// and send time back.
    pub fn parse(s: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = s;
        let mut lit = String::new();
        while let Some(i) = rest.find('{') {
            lit.push_str(&rest[..i]);
            rest = &rest[i..];
            if let Some((hole, part)) = HOLES.iter().find(|(h, _)| rest.starts_with(h)) {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(part.clone());
                rest = &rest[hole.len()..];
            } else {
                lit.push('{');
                rest = &rest[1..];
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        if !parts.contains(&Part::Ts) {
            return Err(TemplateError::NoTs);
        }
        let t = Self { parts };
        let probe =
            Fields { kind: "probe-type", req: false, sender: 7, room: 1, seq: 3, ts_us: 1_234_567, it_us: 1_234_500 };
        let mut out = String::new();
        t.render(&probe, 0, &mut out);
        match super::parse(out.as_bytes()) {
            Some(seen) if seen.kind == probe.kind && seen.ts_us == probe.ts_us => Ok(t),
            _ => Err(TemplateError::Unreadable(out)),
        }
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
            let mut n = size.saturating_sub(out.len());
            out.reserve(n);
            while n > 0 {
                let k = n.min(PADDING.len());
                out.insert_str(at, &PADDING[..k]);
                n -= k;
            }
        }
    }
}
