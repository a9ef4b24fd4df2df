//! Load messages: JSON with the event type, a request mark, the sender, a sequence number,
//! the send time and the intended send time (wall clock, microseconds since the Unix
//! epoch), padded to the type's size. A template with placeholders replaces the layout for
//! other servers.
//!
//! Receiving is JSON parsing, not byte matching: [`scan`] walks the message with serde
//! (borrowing, nothing allocated unless a type name holds escapes) and takes the first
//! `type`, `sender`, `seq`, `ts` and `it` it meets as object keys, at the top level or in
//! nested objects, so a template that wraps the fields (`{"event":{"type":..,"ts":..}}`)
//! is measured the same way and a `"ts":` inside a string is only text; the default layout
//! takes a one-pass shortcut to the same result (`fast`). [`is_request`]
//! is what the room asks: does the top-level object say `"req": true`?

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, MapAccess, SeqAccess, Visitor};

mod fast;
mod template;

pub use template::{DEFAULT_TEMPLATE, Fields, Template, TemplateError};

/// What a receiver takes from a message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scanned<'a> {
    /// `type`: the event type (borrowed from the message unless it held escapes).
    pub kind: Option<Cow<'a, str>>,
    /// `sender`: the client number.
    pub sender: Option<u64>,
    /// `seq`: the sender's sequence number of its relayed events (or of its requests).
    pub seq: Option<u64>,
    /// `ts`: the send time, µs since the epoch.
    pub ts_us: Option<u64>,
    /// `it`: the intended send time, µs since the epoch.
    pub it_us: Option<u64>,
    /// `req` at the top level.
    pub req: Option<bool>,
}

/// A message a receiver can time: it has a `type` and a `ts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen<'a> {
    /// Event type.
    pub kind: Cow<'a, str>,
    /// Sender (`None` when absent).
    pub sender: Option<u64>,
    /// Sequence number (`None` when absent).
    pub seq: Option<u64>,
    /// Send time, µs.
    pub ts_us: u64,
    /// Intended send time, µs (`None` when absent).
    pub it_us: Option<u64>,
}

/// Objects nested deeper than this are skipped unread (serde_json refuses past 128).
const MAX_DEPTH: u32 = 16;

/// Walks a JSON object; `None` when the bytes are not one JSON object. A message in the
/// default layout is read in one pass ([`fast`]), with the result the walk would give.
pub fn scan(b: &[u8]) -> Option<Scanned<'_>> {
    fast::scan(b).or_else(|| walk(b))
}

/// The serde walk behind [`scan`].
fn walk(b: &[u8]) -> Option<Scanned<'_>> {
    let mut out = Scanned::default();
    let mut de = serde_json::Deserializer::from_slice(b);
    de.deserialize_map(Walk { out: &mut out, depth: 0 }).ok()?;
    de.end().ok()?;
    Some(out)
}

/// The fields a receiver times by; `None` when `type` or `ts` is missing or the bytes are
/// not a JSON object.
pub fn parse(b: &[u8]) -> Option<Seen<'_>> {
    let s = scan(b)?;
    Some(Seen { kind: s.kind?, sender: s.sender, seq: s.seq, ts_us: s.ts_us?, it_us: s.it_us })
}

/// Does the message's top-level JSON object carry `"req": true`? Anything else (other
/// values, a nested `req`, text inside a string, bytes that are not JSON) is not a request.
pub fn is_request(b: &[u8]) -> bool {
    let mut de = serde_json::Deserializer::from_slice(b);
    matches!(de.deserialize_map(ReqOnly), Ok(true)) && de.end().is_ok()
}

/// The keys [`scan`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Type,
    Sender,
    Seq,
    Ts,
    It,
    Req,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, k: &str) -> Result<Key, E> {
                Ok(match k {
                    "type" => Key::Type,
                    "sender" => Key::Sender,
                    "seq" => Key::Seq,
                    "ts" => Key::Ts,
                    "it" => Key::It,
                    "req" => Key::Req,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Visits one value: an object is walked for the keys, anything else is skipped.
struct Walk<'s, 'a> {
    out: &'s mut Scanned<'a>,
    depth: u32,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, 'de> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// A value under a key [`scan`] wants: kept when its JSON type fits, walked when it is an
/// object, skipped otherwise.
struct Field<'s, 'a> {
    key: Key,
    walk: Walk<'s, 'a>,
}

impl<'de> DeserializeSeed<'de> for Field<'_, 'de> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.depth >= MAX_DEPTH {
            while map.next_entry::<Skip, Skip>()?.is_some() {}
            return Ok(());
        }
        let depth = self.depth + 1;
        let top = self.depth == 0;
        while let Some(key) = map.next_key::<Key>()? {
            let key = if key == Key::Req && !top { Key::Other } else { key };
            map.next_value_seed(Field { key, walk: Walk { out: &mut *self.out, depth } })?;
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for Field<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        if self.key == Key::Req {
            self.walk.out.req.get_or_insert(v);
        }
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        let o = &mut *self.walk.out;
        let slot = match self.key {
            Key::Sender => &mut o.sender,
            Key::Seq => &mut o.seq,
            Key::Ts => &mut o.ts_us,
            Key::It => &mut o.it_us,
            _ => return Ok(()),
        };
        slot.get_or_insert(v);
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<(), E> {
        if self.key == Key::Type {
            self.walk.out.kind.get_or_insert(Cow::Borrowed(v));
        }
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if self.key == Key::Type {
            self.walk.out.kind.get_or_insert_with(|| Cow::Owned(v.to_owned()));
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.walk.visit_map(map)
    }
}

/// The room's question: only the top-level `req` is read, every other value is skipped.
struct ReqOnly;

impl<'de> Visitor<'de> for ReqOnly {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut req = None;
        while let Some(key) = map.next_key::<Key>()? {
            if key == Key::Req && req.is_none() {
                req = Some(map.next_value::<ReqValue>()?.0);
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(req == Some(true))
    }
}

/// `true` exactly for the JSON literal `true`.
struct ReqValue(bool);

impl<'de> de::Deserialize<'de> for ReqValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ReqValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ReqValue, E> {
                Ok(ReqValue(v))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<ReqValue, E> {
                Ok(ReqValue(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<ReqValue, E> {
                Ok(ReqValue(false))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<ReqValue, E> {
                Ok(ReqValue(false))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<ReqValue, E> {
                Ok(ReqValue(false))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ReqValue, E> {
                Ok(ReqValue(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ReqValue, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(ReqValue(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReqValue, A::Error> {
                while map.next_entry::<Skip, Skip>()?.is_some() {}
                Ok(ReqValue(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// A value read and dropped, but read in full: unlike serde's `IgnoredAny`, strings are
/// checked to be UTF-8, so bytes that are not JSON are never half-accepted (found by the
/// `ws_message` fuzz target: a request with an invalid byte in another string).
struct Skip;

impl<'de> de::Deserialize<'de> for Skip {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

/// Appends `v` in decimal, without `core::fmt`: this runs for five fields of every message
/// the load generator sends, and `write!` cost about 1 % of its CPU (a `perf record` of `bench/load-floor.sh`'s run).
fn write_u64(out: &mut String, mut v: u64) {
    let mut digits = [b'0'; 20]; // u64::MAX has 20 digits
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] += u8::try_from(v % 10).unwrap_or(0);
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests;
