//! Reading a saved report: streamed and bounded, because saved reports come from anywhere.
//!
//! Two passes over the bytes, neither holding the document as a tree:
//! 1. a skim that keeps nothing: the top level must be an object with a `schema_version`
//!    this build reads, the document at most [`MAX_BYTES`] and [`MAX_VALUES`] JSON values
//!    (so the typed report of pass 2 is bounded too: about 100 bytes per value at most);
//! 2. the typed [`Report`], straight from the bytes.
//!
//! Then every embedded histogram is decoded once (the codec bounds precision, range and
//! size), so a report that loads renders without surprises, and every summary is recomputed
//! from its histogram.

use std::cell::Cell;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{LatencyView, Report, Results, SCHEMA_VERSION, decode_histogram};
use crate::latency::Summary;
use crate::mesh::window::RttSummary;

/// Largest report read, bytes (a day of per-second stream intervals is about 30 MB).
pub const MAX_BYTES: u64 = 64 << 20;
/// Most JSON values (numbers, strings, objects, ...) in a report.
pub const MAX_VALUES: u64 = 4_000_000;

/// Why a report could not be read: one line, for the user.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bytes could not be read.
    #[error("cannot read: {0}")]
    Io(io::Error),
    /// Over [`MAX_BYTES`].
    #[error("larger than {} MiB, not a wirebench report", MAX_BYTES >> 20)]
    TooLarge,
    /// Over [`MAX_VALUES`].
    #[error("more than {MAX_VALUES} JSON values, not a wirebench report")]
    TooManyValues,
    /// Not JSON.
    #[error("not JSON ({0})")]
    NotJson(String),
    /// JSON without a schema version.
    #[error("not a wirebench report (no schema_version)")]
    NoVersion,
    /// From a newer wirebench.
    #[error("schema_version {0} is newer than this wirebench reads ({SCHEMA_VERSION}): use a newer wirebench")]
    Newer(u64),
    /// JSON with a version that does not have the report's shape.
    #[error("not a wirebench report ({0})")]
    Shape(String),
    /// An embedded histogram that does not decode.
    #[error("{0}")]
    Histogram(String),
    /// Stopped (Ctrl-C) while reading.
    #[error("stopped by Ctrl-C while reading")]
    Stopped,
}

/// A reader that fails once more than [`MAX_BYTES`] went through it.
struct Capped<'a, R> {
    inner: R,
    left: u64,
    over: &'a Cell<bool>,
    /// Set from outside (Ctrl-C): the next read fails, and the parse with it.
    stop: &'a AtomicBool,
}

impl<R: Read> Read for Capped<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            // Not `Interrupted`: readers retry that kind.
            return Err(io::Error::other("stopped"));
        }
        let n = self.inner.read(buf)?;
        if let Some(left) = self.left.checked_sub(n as u64) {
            self.left = left;
            Ok(n)
        } else {
            self.over.set(true);
            Err(io::Error::other("too large"))
        }
    }
}

/// Counts values, keeps none, and gives up past [`MAX_VALUES`].
#[derive(Clone, Copy)]
struct Skim<'a> {
    values: &'a Cell<u64>,
}

impl Skim<'_> {
    fn bump<E: serde::de::Error>(self) -> Result<(), E> {
        let n = self.values.get() + 1;
        self.values.set(n);
        if n > MAX_VALUES { Err(E::custom("too many values")) } else { Ok(()) }
    }
}

impl<'de> DeserializeSeed<'de> for Skim<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skim<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.bump()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.bump()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.bump()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.bump()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.bump()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.bump()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        self.bump()?;
        while s.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        self.bump()?;
        while m.next_key::<IgnoredAny>()?.is_some() {
            self.bump()?;
            m.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// The value of `schema_version`: an unsigned number is kept; anything else is skimmed like
/// every other value (counted, never held: an array there is as bounded as one elsewhere).
#[derive(Clone, Copy)]
struct Version<'a> {
    skim: Skim<'a>,
}

impl<'de> DeserializeSeed<'de> for Version<'_> {
    type Value = Option<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Version<'_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a schema version")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<u64>, E> {
        self.skim.bump().map(|()| Some(v))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Option<u64>, E> {
        self.skim.bump().map(|()| None)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Option<u64>, E> {
        self.skim.bump().map(|()| None)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Option<u64>, E> {
        self.skim.bump().map(|()| None)
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Option<u64>, E> {
        self.skim.bump().map(|()| None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
        self.skim.bump().map(|()| None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Option<u64>, A::Error> {
        self.skim.visit_seq(s).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Option<u64>, A::Error> {
        self.skim.visit_map(m).map(|()| None)
    }
}

/// The top level: an object, its `schema_version` kept (when it is an unsigned number).
struct Top<'a> {
    skim: Skim<'a>,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Option<u64>, A::Error> {
        let mut version = None;
        while let Some(key) = m.next_key::<String>()? {
            self.skim.bump()?;
            if key == "schema_version" {
                version = m.next_value_seed(Version { skim: self.skim })?;
            } else {
                m.next_value_seed(self.skim)?;
            }
        }
        Ok(version)
    }
    // Anything else is JSON but not a report: skimmed for its size, no version.
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Option<u64>, A::Error> {
        self.skim.visit_seq(s).map(|()| None)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Pass 1: the version, within the limits.
fn skim<R: Read>(r: R, stop: &AtomicBool) -> Result<Option<u64>, ReadError> {
    let (over, values) = (Cell::new(false), Cell::new(0));
    let capped = Capped { inner: r, left: MAX_BYTES, over: &over, stop };
    let mut de = serde_json::Deserializer::from_reader(BufReader::new(capped));
    let top = Top { skim: Skim { values: &values } };
    let version = de.deserialize_any(top).and_then(|v| de.end().map(|()| v));
    match version {
        Ok(v) => Ok(v),
        Err(_) if stop.load(Ordering::Relaxed) => Err(ReadError::Stopped),
        Err(_) if over.get() => Err(ReadError::TooLarge),
        Err(_) if values.get() > MAX_VALUES => Err(ReadError::TooManyValues),
        Err(e) if e.is_io() => Err(ReadError::Io(e.into())),
        Err(e) => Err(ReadError::NotJson(one_line(&e.to_string()))),
    }
}

/// Every embedded histogram, named for the messages.
fn views_mut(report: &mut Report) -> Vec<(String, &mut LatencyView)> {
    let mut v: Vec<(String, &mut LatencyView)> = Vec::new();
    match &mut report.results {
        Results::Ping(p) => {
            for r in &mut p.responders {
                let name = format!("responder {}", r.addr);
                let views = [
                    Some(&mut r.latency),
                    r.uncorrected.as_mut(),
                    Some(&mut r.warmup),
                    r.network.as_mut(),
                    r.dwell.as_mut(),
                ];
                v.extend(views.into_iter().flatten().map(|x| (name.clone(), x)));
                if let Some(k) = r.kernel.as_mut() {
                    let split = [k.stack.as_mut(), k.hosts.as_mut()];
                    v.extend(split.into_iter().flatten().map(|x| (format!("{name} kernel timestamps"), x)));
                }
            }
            v.extend(p.combined.iter_mut().map(|x| ("combined".to_owned(), x)));
        }
        Results::Stream(_) | Results::Hiccup => {}
        Results::Mesh(m) => {
            v.extend(m.combined.iter_mut().map(|c| (format!("fleet {}", c.proto), &mut c.latency)));
        }
        Results::Proxy(p) => {
            for (name, a) in [("up", &mut p.up.achieved), ("down", &mut p.down.achieved)] {
                let views = [Some(&mut a.added_delay), a.queue_delay.as_mut(), a.path_delay.as_mut()];
                v.extend(views.into_iter().flatten().map(|x| (name.to_owned(), x)));
            }
        }
        Results::Load(l) => {
            v.push(("connections".to_owned(), &mut l.connections.connect_time));
            for t in std::iter::once(&mut l.overall).chain(&mut l.types) {
                let name = format!("type {}", t.name);
                let views = [Some(&mut t.delay), Some(&mut t.delay_intended), t.reply.as_mut()];
                v.extend(views.into_iter().flatten().map(|x| (name.clone(), x)));
            }
            for (name, link) in [("link up", &mut l.link_up), ("link down", &mut l.link_down)] {
                v.extend(link.iter_mut().map(|k| (name.to_owned(), &mut k.hold)));
            }
        }
        Results::Relay(r) => {
            for p in &mut r.peers {
                let name = format!("relay peer {}", p.addr);
                v.extend(p.added_delay.as_mut().map(|x| (name, x)));
            }
            v.extend(r.retired.added_delay.as_mut().map(|x| ("relay retired peers".to_owned(), x)));
        }
    }
    if let Some(h) = report.attribution.as_mut().and_then(|a| a.hiccup.as_mut()) {
        v.push(("stall meter".to_owned(), &mut h.lateness));
    }
    v
}

/// Reads a report from the bytes `open` yields (called once per pass, each time from the
/// start), within the limits, and checks that every histogram in it decodes. Every summary
/// is then recomputed from its histogram at the percentiles it lists (one pass per
/// histogram, however many), so files from older versions show the figures of the one
/// percentile definition (`latency::percentile`) in every view.
pub fn read_report<R: Read>(open: impl FnMut() -> io::Result<R>) -> Result<Report, ReadError> {
    read_report_until(open, &AtomicBool::new(false))
}

/// [`read_report`], given up as soon as `stop` is set (Ctrl-C): between reads of the bytes
/// and between histograms.
pub fn read_report_until<R: Read>(
    mut open: impl FnMut() -> io::Result<R>,
    stop: &AtomicBool,
) -> Result<Report, ReadError> {
    match skim(open().map_err(ReadError::Io)?, stop)? {
        None | Some(0) => return Err(ReadError::NoVersion),
        Some(n) if n > u64::from(SCHEMA_VERSION) => return Err(ReadError::Newer(n)),
        Some(_) => {}
    }
    let over = Cell::new(false);
    let capped = Capped { inner: open().map_err(ReadError::Io)?, left: MAX_BYTES, over: &over, stop };
    let mut report: Report = serde_json::from_reader(BufReader::new(capped)).map_err(|e| match e {
        _ if stop.load(Ordering::Relaxed) => ReadError::Stopped,
        _ if over.get() => ReadError::TooLarge,
        e if e.is_io() => ReadError::Io(e.into()),
        e => ReadError::Shape(one_line(&e.to_string())),
    })?;
    for (name, view) in views_mut(&mut report) {
        if stop.load(Ordering::Relaxed) {
            return Err(ReadError::Stopped);
        }
        let h = decode_histogram(&view.histogram).map_err(|e| ReadError::Histogram(format!("{name}: {e}")))?;
        let ps: Vec<f64> = view.summary.percentiles.iter().map(|q| q.p).collect();
        view.summary = Summary::of(&h, &ps);
    }
    // A mesh cell's figures, from its histogram too.
    if let Results::Mesh(m) = &mut report.results {
        for c in &mut m.cells {
            if stop.load(Ordering::Relaxed) {
                return Err(ReadError::Stopped);
            }
            let Some(text) = &c.histogram else { continue };
            let h = decode_histogram(text)
                .map_err(|e| ReadError::Histogram(format!("cell {} -> {} {}: {e}", c.src, c.dst, c.proto)))?;
            c.rtt = RttSummary::of(&h);
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Report, ReadError> {
        read_report(|| Ok(text.as_bytes()))
    }

    /// Sets the stop at its first read (Ctrl-C while the bytes are read).
    struct SetsStop<'a>(&'a AtomicBool, &'a [u8]);

    impl Read for SetsStop<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.store(true, Ordering::Relaxed);
            let n = self.1.len().min(buf.len()).min(4);
            buf[..n].copy_from_slice(&self.1[..n]);
            self.1 = &self.1[n..];
            Ok(n)
        }
    }

    /// A stop set before or during the read ends it with `Stopped`, whatever the input.
    #[test]
    fn a_stop_ends_the_read() {
        let stop = AtomicBool::new(true);
        let r = read_report_until(|| Ok(r#"{"schema_version": 1}"#.as_bytes()), &stop);
        assert!(matches!(r, Err(ReadError::Stopped)), "{:?}", r.err());
        let stop = AtomicBool::new(false);
        let text = r#"{"schema_version": 1, "meta": {}}"#.as_bytes();
        let r = read_report_until(|| Ok(SetsStop(&stop, text)), &stop);
        assert!(matches!(r, Err(ReadError::Stopped)), "{:?}", r.err());
    }

    #[test]
    fn bad_input_is_named_in_one_line() {
        let cases = [
            ("{", "not JSON (EOF while parsing an object at line 1 column 1)"),
            ("[1, 2]", "not a wirebench report (no schema_version)"),
            ("7", "not a wirebench report (no schema_version)"),
            (r#"{"hello": 1}"#, "not a wirebench report (no schema_version)"),
            (r#"{"schema_version": "1"}"#, "not a wirebench report (no schema_version)"),
            (
                r#"{"schema_version": 2}"#,
                "schema_version 2 is newer than this wirebench reads (1): use a newer wirebench",
            ),
            (r#"{"schema_version": 1} x"#, "not JSON (trailing characters at line 1 column 23)"),
        ];
        for (text, want) in cases {
            assert_eq!(read(text).unwrap_err().to_string(), want, "{text}");
        }
        let e = read(r#"{"schema_version": 1, "meta": {}}"#).unwrap_err().to_string();
        assert!(e.starts_with("not a wirebench report (missing field"), "{e}");
        // The value cap holds for schema_version's own value: an array there was held whole.
        let mut huge = String::from(r#"{"schema_version": ["#);
        huge.push_str(&"0,".repeat(usize::try_from(MAX_VALUES).unwrap()));
        huge.push_str("0]}");
        assert!(matches!(read(&huge), Err(ReadError::TooManyValues)), "{:?}", read(&huge).err());
        assert!(matches!(read(r#"{"schema_version": {"a": [1]}}"#), Err(ReadError::NoVersion)));
    }

    /// A report the first release wrote (`fuzz/seeds/report_load/`), as JSON to edit.
    fn seed(name: &str) -> serde_json::Value {
        let path = format!("{}/../../fuzz/seeds/report_load/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// A histogram finer and wider than wirebench writes (5 digits over 1..2^63).
    fn too_fine() -> String {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, u64::MAX >> 1, 5).unwrap();
        h.record(1_000).unwrap();
        crate::report::encode_histogram(&h)
    }

    #[test]
    fn the_proxys_split_delay_histograms_are_checked_too() {
        // queue_delay and path_delay went unchecked: rendered at any precision and range.
        for key in ["queue_delay", "path_delay"] {
            let mut v = seed("report-proxy.json");
            let mut view = v["results"]["down"]["achieved"]["added_delay"].clone();
            view["histogram"] = too_fine().into();
            v["results"]["down"]["achieved"][key] = view;
            let e = read(&v.to_string()).unwrap_err().to_string();
            assert!(e.starts_with("down: ") && e.contains("5 significant digits"), "{key}: {e}");
        }
    }

    #[test]
    fn summaries_are_recomputed_from_the_histograms() {
        // As an older wirebench wrote it: p99.9 of 1..=1000 ns one rank high (the maximum),
        // in a ping view and in the proxy's; and 200,000 percentiles in one view (each looked
        // up alone, that was 2 x 10^8 steps through the histogram).
        let mut h = crate::latency::histogram();
        for x in 1..=1_000 {
            crate::latency::record(&mut h, x);
        }
        let mut old = Summary::of(&h, &[50.0, 99.9]);
        old.percentiles[1].ns = 1_000;
        let many: Vec<f64> = (0..200_000u32).map(|i| f64::from(i % 10_001) / 100.0).collect();
        let mut lots = Summary::of(&h, &many);
        lots.percentiles.iter_mut().for_each(|q| q.ns = 7);
        let hist = crate::report::encode_histogram(&h);
        let mut ping = seed("report-ping-full.json");
        ping["results"]["responders"][0]["latency"]["summary"] = serde_json::to_value(&old).unwrap();
        ping["results"]["responders"][0]["latency"]["histogram"] = hist.clone().into();
        ping["results"]["responders"][0]["warmup"]["summary"] = serde_json::to_value(&lots).unwrap();
        ping["results"]["responders"][0]["warmup"]["histogram"] = hist.clone().into();
        let loaded = read(&ping.to_string()).unwrap();
        let Results::Ping(p) = &loaded.results else { panic!("a ping report") };
        let main = &p.responders[0].latency.summary;
        assert_eq!((main.at(50.0), main.at(99.9), main.count), (Some(500), Some(999), 1_000));
        let w = &p.responders[0].warmup.summary;
        assert_eq!(w.percentiles.len(), many.len());
        for (i, q) in w.percentiles.iter().enumerate() {
            let want =
                if i < 10_001 { crate::latency::value_at_percentile(&h, q.p) } else { w.percentiles[i % 10_001].ns };
            assert_eq!(q.ns, want, "p{}", q.p);
        }
        let mut proxy = seed("report-proxy.json");
        proxy["results"]["up"]["achieved"]["added_delay"]["summary"] = serde_json::to_value(&old).unwrap();
        proxy["results"]["up"]["achieved"]["added_delay"]["histogram"] = hist.into();
        let loaded = read(&proxy.to_string()).unwrap();
        let Results::Proxy(p) = &loaded.results else { panic!("a proxy report") };
        assert_eq!(p.up.achieved.added_delay.summary.at(99.9), Some(999));
    }

    /// The skim's count of `text` from `start`, and what it made of the top level.
    fn skimmed(text: &str, start: u64) -> (Result<Option<u64>, serde_json::Error>, u64) {
        let values = Cell::new(start);
        let mut de = serde_json::Deserializer::from_str(text);
        let top = (&mut de).deserialize_any(Top { skim: Skim { values: &values } });
        (top, values.get())
    }

    /// Every kind of JSON value counts once, wherever it is: in the skim, as the version's
    /// value, and as an object's key.
    #[test]
    fn every_value_counts_once_toward_the_cap() {
        // A key plus its value's values: [ {} true -1 0.5 "s" null 7 {k: []} ] is 10.
        let (v, n) = skimmed(r#"{"x": [true, -1, 0.5, "s", null, 7, {"k": []}]}"#, 0);
        assert_eq!((v.unwrap(), n), (None, 1 + 10));
        for (value, version, count) in [
            ("2", Some(2), 1),
            ("true", None, 1),
            ("-1", None, 1),
            ("0.5", None, 1),
            (r#""1""#, None, 1),
            ("null", None, 1),
            ("[1, [2]]", None, 4),
            (r#"{"a": 1}"#, None, 3),
        ] {
            let (v, n) = skimmed(&format!(r#"{{"schema_version": {value}}}"#), 0);
            assert_eq!((v.unwrap(), n), (version, 1 + count), "{value}");
        }
        // JSON that is not an object has no version, whatever it holds.
        for text in ["true", "-1", "0.5", "2", r#""1""#, "null", "[1, 2]"] {
            assert_eq!(skimmed(text, 0).0.unwrap(), None, "{text}");
        }
        // The cap itself is allowed, one more is not.
        assert!(skimmed(r#"{"a": 1}"#, MAX_VALUES - 2).0.is_ok());
        assert!(skimmed(r#"{"a": 1}"#, MAX_VALUES - 1).0.is_err());
    }

    #[test]
    fn too_many_values_are_refused_while_skimming() {
        // 4,000,001 values in 8 MB: refused without building them.
        let mut text = String::from(r#"{"schema_version": 1, "config": ["#);
        text.push_str(&"0,".repeat(usize::try_from(MAX_VALUES).unwrap()));
        text.push_str("0]}");
        assert!(matches!(read(&text), Err(ReadError::TooManyValues)));
    }

    /// Exactly the cap of values and then junk is bad JSON, not too many values.
    #[test]
    fn junk_after_exactly_the_cap_of_values_is_not_json() {
        // The key and the array are two values, its elements the rest.
        let mut text = String::from(r#"{"a": ["#);
        text.push_str(&"0,".repeat(usize::try_from(MAX_VALUES - 3).unwrap()));
        text.push_str("0]} x");
        let r = read(&text);
        assert!(matches!(r, Err(ReadError::NotJson(_))), "{:?}", r.err());
    }

    /// Fails every read: a disk or a pipe that broke.
    struct Broken;

    impl Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("broken"))
        }
    }

    /// Blanks without end: a file past every cap.
    struct Endless;

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            buf.fill(b' ');
            Ok(buf.len())
        }
    }

    /// Reads `first` in the skim and `then` in the typed pass (a file that changed, broke or
    /// was stopped between the two).
    fn two_passes<'a>(first: &'a str, then: Box<dyn Read + 'a>, stop: &AtomicBool) -> Result<Report, ReadError> {
        let mut passes: Vec<Box<dyn Read + 'a>> = vec![then, Box::new(first.as_bytes())];
        read_report_until(|| Ok(passes.pop().expect("two passes")), stop)
    }

    /// A read that fails is a read error in either pass, not bad JSON; a stop or a file
    /// grown past the cap in the typed pass is named as in the skim.
    #[test]
    fn the_typed_pass_names_its_errors_as_the_skim_does() {
        let r = read_report(|| Ok(Broken));
        assert!(matches!(r, Err(ReadError::Io(_))), "{:?}", r.err());
        let (version, no) = (r#"{"schema_version": 1}"#, AtomicBool::new(false));
        let r = two_passes(version, Box::new(Broken), &no);
        assert!(matches!(r, Err(ReadError::Io(_))), "{:?}", r.err());
        let r = two_passes(version, Box::new(Endless), &no);
        assert!(matches!(r, Err(ReadError::TooLarge)), "{:?}", r.err());
        let stop = AtomicBool::new(false);
        let r = two_passes(version, Box::new(SetsStop(&stop, version.as_bytes())), &stop);
        assert!(matches!(r, Err(ReadError::Stopped)), "{:?}", r.err());
    }

    #[test]
    fn too_many_bytes_are_refused_while_skimming() {
        assert!(matches!(read_report(|| Ok(Endless)), Err(ReadError::TooLarge)));
    }
}
