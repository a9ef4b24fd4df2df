//! The receive path's shortcut: a message laid out exactly as [`super::DEFAULT_TEMPLATE`]
//! renders it (the keys in that order, no whitespace, plain strings, decimal integers) is
//! read field by field in one pass, without the serde walk. Anything else, down to one
//! extra space, returns `None` and the caller walks the message with serde. When this
//! returns a result, it is the one [`super::scan`]'s serde walk gives (property-tested
//! against it in `tests.rs`, on rendered messages and on every one-byte change of them).

use std::borrow::Cow;

use super::Scanned;

/// Reads a default-layout message; `None` when `b` is not exactly that layout.
pub(super) fn scan(b: &[u8]) -> Option<Scanned<'_>> {
    let mut r = Reader { b, at: 0 };
    r.lit(br#"{"type":""#)?;
    let kind = r.plain_str()?;
    r.lit(br#","req":"#)?;
    let req = if r.lit(b"true").is_some() {
        true
    } else {
        r.lit(b"false")?;
        false
    };
    r.lit(br#","sender":"#)?;
    let sender = r.uint()?;
    r.lit(br#","room":"#)?;
    r.uint()?;
    r.lit(br#","seq":"#)?;
    let seq = r.uint()?;
    r.lit(br#","ts":"#)?;
    let ts_us = r.uint()?;
    r.lit(br#","it":"#)?;
    let it_us = r.uint()?;
    r.lit(br#","pad":""#)?;
    r.plain_str()?;
    r.lit(b"}")?;
    if r.at != b.len() {
        return None;
    }
    Some(Scanned {
        kind: Some(Cow::Borrowed(kind)),
        sender: Some(sender),
        seq: Some(seq),
        ts_us: Some(ts_us),
        it_us: Some(it_us),
        req: Some(req),
    })
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Takes the bytes `l`.
    fn lit(&mut self, l: &[u8]) -> Option<()> {
        let end = self.at.checked_add(l.len())?;
        (self.b.get(self.at..end)? == l).then(|| self.at = end)
    }

    /// The rest of a string whose opening quote was taken, up to and past its closing
    /// quote: no escapes and no control characters (JSON forbids them raw), valid UTF-8.
    fn plain_str(&mut self) -> Option<&'a str> {
        let rest = self.b.get(self.at..)?;
        let len = rest.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        let s = std::str::from_utf8(&rest[..len]).ok()?;
        self.at += len + 1;
        Some(s)
    }

    /// A JSON integer that fits a u64: digits, no sign, no leading zero, no fraction or
    /// exponent (serde reads those as other types, so the caller's walk decides).
    fn uint(&mut self) -> Option<u64> {
        let rest = self.b.get(self.at..)?;
        let len = rest.iter().position(|c| !c.is_ascii_digit()).unwrap_or(rest.len());
        if len == 0 || (len > 1 && rest[0] == b'0') || matches!(rest.get(len), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let mut v = 0u64;
        for &c in &rest[..len] {
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        }
        self.at += len;
        Some(v)
    }
}
