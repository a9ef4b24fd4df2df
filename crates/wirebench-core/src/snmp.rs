//! The kernel's protocol counters as `/proc/net/snmp` prints them, parsed by name (pure: the
//! caller reads the file). Each protocol is a pair of lines, names then values:
//!
//! ```text
//! Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
//! Udp: 381685 9 2923 384628 2923 0 0 0 0
//! ```
//!
//! Every table and field is kept by name, so a kernel that adds a column is read right and
//! one that lacks a column just lacks it. The counters are **host-wide**: a difference
//! between two snapshots counts every socket on the host, not only the run's.
//!
//! What the UDP fields count (net/ipv4/udp.c): `InDatagrams` datagrams handed to a reader
//! (counted at `recvmsg`, so a GRO run counts once per read); `RcvbufErrors` datagrams (or
//! whole GRO runs) dropped because a socket's receive buffer was full; `InErrors` every
//! receive-side drop including those; `NoPorts` datagrams to a port nobody had open;
//! `SndbufErrors` sends refused for a full send buffer; `MemErrors` drops for memory limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counters by table (`Udp`, `Tcp`, `Ip`, ...) and field (`RcvbufErrors`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Snmp(pub BTreeMap<String, BTreeMap<String, i64>>);

/// Why a text was not `/proc/net/snmp`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnmpError {
    /// A names line without its values line, or the two disagree.
    #[error("line {line}: {what}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
}

/// Fields of `Tcp` that are settings or gauges, not counters: a difference means nothing.
const NOT_COUNTERS: [&str; 5] = ["RtoAlgorithm", "RtoMin", "RtoMax", "MaxConn", "CurrEstab"];

impl Snmp {
    /// Parses the text of `/proc/net/snmp`.
    pub fn parse(text: &str) -> Result<Self, SnmpError> {
        let mut tables: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        while let Some((i, names)) = lines.next() {
            let bad = |what: String| SnmpError::Malformed { line: i + 1, what };
            let (table, fields) = names.split_once(':').ok_or_else(|| bad("no 'Table:' prefix".into()))?;
            let Some((j, values)) = lines.next() else { return Err(bad(format!("{table}: names without values"))) };
            let (table2, vals) =
                values.split_once(':').ok_or_else(|| SnmpError::Malformed { line: j + 1, what: "no prefix".into() })?;
            if table2 != table {
                return Err(SnmpError::Malformed { line: j + 1, what: format!("{table2} values after {table} names") });
            }
            let fields: Vec<&str> = fields.split_whitespace().collect();
            let vals: Vec<&str> = vals.split_whitespace().collect();
            if fields.len() != vals.len() {
                return Err(SnmpError::Malformed {
                    line: j + 1,
                    what: format!("{table}: {} names, {} values", fields.len(), vals.len()),
                });
            }
            let t = tables.entry(table.trim().to_owned()).or_default();
            for (f, v) in fields.into_iter().zip(vals) {
                let v = v.parse::<i64>().map_err(|_| SnmpError::Malformed {
                    line: j + 1,
                    what: format!("{table} {f}: '{v}' is not a number"),
                })?;
                t.insert(f.to_owned(), v);
            }
        }
        Ok(Self(tables))
    }

    /// One counter, e.g. `get("Udp", "RcvbufErrors")`.
    pub fn get(&self, table: &str, field: &str) -> Option<i64> {
        self.0.get(table)?.get(field).copied()
    }

    /// What the counters of `tables` did between `earlier` and `self` (fields present in
    /// both; gauges and settings left out). Counters wrap at 2^64 in the kernel; a decrease
    /// reads as the wrapped difference.
    #[must_use]
    pub fn since(&self, earlier: &Self, tables: &[&str]) -> Self {
        let mut out = BTreeMap::new();
        for &t in tables {
            let (Some(now), Some(then)) = (self.0.get(t), earlier.0.get(t)) else { continue };
            let d: BTreeMap<String, i64> = now
                .iter()
                .filter(|(f, _)| !NOT_COUNTERS.contains(&f.as_str()))
                .filter_map(|(f, &v)| then.get(f).map(|&w| (f.clone(), v.wrapping_sub(w))))
                .collect();
            out.insert(t.to_owned(), d);
        }
        Self(out)
    }

    /// Adds another difference (for totals over several runs).
    pub fn add(&mut self, o: &Self) {
        for (t, fields) in &o.0 {
            let mine = self.0.entry(t.clone()).or_default();
            for (f, v) in fields {
                *mine.entry(f.clone()).or_default() += v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From this lab machine's kernel (6.18).
    const SAMPLE: &str = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 1212 0 0 0 0 0 1212 1217 0 0 0 0 0 0 0 0 0 1217
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs OutMsgs OutErrors OutRateLimitGlobal OutRateLimitHost OutDestUnreachs
Icmp: 9 0 0 9 9 0 0 0 9
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 15 8 7 0 1 846 853 0 0 7 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 381685 9 2923 384628 2923 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn every_field_by_name() {
        let s = Snmp::parse(SAMPLE).unwrap();
        assert_eq!(s.get("Udp", "RcvbufErrors"), Some(2923));
        assert_eq!(s.get("Udp", "InDatagrams"), Some(381_685));
        assert_eq!(s.get("Tcp", "MaxConn"), Some(-1));
        assert_eq!(s.get("Tcp", "RetransSegs"), Some(0));
        assert_eq!(s.get("Ip", "OutTransmits"), Some(1217));
        assert_eq!(s.0.len(), 5);
        assert_eq!(s.0["Udp"].len(), 9);
        assert_eq!(s.get("Udp", "Nope"), None);
    }

    #[test]
    fn a_difference_of_counters() {
        let a = Snmp::parse(SAMPLE).unwrap();
        let later = SAMPLE
            .replace("Udp: 381685 9 2923 384628 2923", "Udp: 481685 9 3378 484628 3378")
            .replace("-1 15 8 7 0 1 846", "-1 15 8 7 0 4 900");
        let b = Snmp::parse(&later).unwrap();
        let d = b.since(&a, &["Udp", "Tcp", "Missing"]);
        assert_eq!(d.get("Udp", "RcvbufErrors"), Some(455));
        assert_eq!(d.get("Udp", "InDatagrams"), Some(100_000));
        assert_eq!(d.get("Udp", "NoPorts"), Some(0));
        assert_eq!(d.get("Tcp", "InSegs"), Some(54));
        assert_eq!(d.get("Tcp", "CurrEstab"), None, "a gauge, not a counter");
        assert_eq!(d.0.len(), 2, "only the tables asked for, when present");
        let mut t = d.clone();
        t.add(&d);
        assert_eq!(t.get("Udp", "RcvbufErrors"), Some(910));
    }

    #[test]
    fn a_column_more_or_less_is_read_by_name() {
        let s = Snmp::parse("Udp: InDatagrams NewThing\nUdp: 5 7\n").unwrap();
        assert_eq!((s.get("Udp", "NewThing"), s.get("Udp", "RcvbufErrors")), (Some(7), None));
    }

    #[test]
    fn malformed_text_is_refused_with_the_line() {
        let e = |t: &str| Snmp::parse(t).unwrap_err().to_string();
        assert_eq!(e("Udp: A B\n"), "line 1: Udp: names without values");
        assert_eq!(e("Udp: A B\nUdp: 1\n"), "line 2: Udp: 2 names, 1 values");
        assert_eq!(e("Udp: A\nTcp: 1\n"), "line 2: Tcp values after Udp names");
        assert_eq!(e("Udp: A\nUdp: x\n"), "line 2: Udp A: 'x' is not a number");
        assert_eq!(e("nonsense\n"), "line 1: no 'Table:' prefix");
    }

    #[test]
    fn a_values_line_without_prefix_is_refused_at_its_own_line() {
        assert_eq!(Snmp::parse("\nUdp: A\n1\n").unwrap_err().to_string(), "line 3: no prefix");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "[A-Za-z: 0-9\\-\\n]{0,300}") {
            let _ = Snmp::parse(&text);
        }
    }
}
