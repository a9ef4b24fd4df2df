//! Pass/fail criteria on delays, as k6 writes them: `p96<300ms`, `avg<50ms`,
//! `max<1s`, `med<20ms`, optionally for one event type (`cursor:p99<100ms`) or for
//! request-to-reply (`reply:p99<200ms`). A run whose threshold fails exits 3.

use std::fmt;
use std::str::FromStr;

use crate::units::Span;

/// Which statistic of a delay histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// A percentile, 0..=100.
    Percentile(f64),
    /// The mean.
    Mean,
    /// The largest value.
    Max,
}

/// One criterion: `[SCOPE:]STAT<LIMIT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The text as given (the report shows it).
    pub expr: String,
    /// An event type, `reply` (all request-to-reply), or `None` for every delivery.
    pub scope: Option<String>,
    /// The statistic.
    pub stat: Stat,
    /// It must be below this, ns.
    pub limit_ns: u64,
}

/// Why a threshold did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("threshold '{0}' is not [TYPE:]STAT<LIMIT with STAT one of pNN, avg, med, max (e.g. p96<300ms)")]
pub struct ThresholdError(pub String);

impl FromStr for Threshold {
    type Err = ThresholdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ThresholdError(s.to_owned());
        let (lhs, rhs) = s.split_once('<').ok_or_else(bad)?;
        let (scope, stat) = match lhs.trim().split_once(':') {
            Some((sc, st)) => (Some(sc.trim().to_owned()), st.trim()),
            None => (None, lhs.trim()),
        };
        let stat = match stat {
            "avg" | "mean" => Stat::Mean,
            "max" => Stat::Max,
            "med" | "median" => Stat::Percentile(50.0),
            p => {
                let v: f64 = p.strip_prefix('p').ok_or_else(bad)?.parse().map_err(|_| bad())?;
                if !(0.0..=100.0).contains(&v) {
                    return Err(bad());
                }
                Stat::Percentile(v)
            }
        };
        let limit = rhs.trim().parse::<Span>().map_err(|_| bad())?;
        let limit_ns = u64::try_from(limit.0.as_nanos()).map_err(|_| bad())?;
        Ok(Self { expr: s.trim().to_owned(), scope, stat, limit_ns })
    }
}

impl Threshold {
    /// Does a measured value pass?
    pub fn passes(&self, value_ns: u64) -> bool {
        value_ns < self.limit_ns
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_k6_style() {
        let t: Threshold = "p96<300ms".parse().unwrap();
        assert_eq!((t.scope.as_deref(), t.stat, t.limit_ns), (None, Stat::Percentile(96.0), 300_000_000));
        let t: Threshold = "cursor:p99.9 < 1s".parse().unwrap();
        assert_eq!((t.scope.as_deref(), t.stat, t.limit_ns), (Some("cursor"), Stat::Percentile(99.9), 1_000_000_000));
        assert_eq!("avg<5ms".parse::<Threshold>().unwrap().stat, Stat::Mean);
        assert_eq!("med<5ms".parse::<Threshold>().unwrap().stat, Stat::Percentile(50.0));
        assert_eq!("max<5ms".parse::<Threshold>().unwrap().stat, Stat::Max);
        for bad in ["p96>3ms", "p101<3ms", "q9<3ms", "p96<soon", "p96"] {
            assert!(bad.parse::<Threshold>().is_err(), "{bad}");
        }
        assert!(t.passes(999_999_999) && !t.passes(1_000_000_000));
        // the report shows the criterion as given, trimmed
        assert_eq!(t.to_string(), "cursor:p99.9 < 1s");
        assert_eq!(" avg<5ms ".parse::<Threshold>().unwrap().to_string(), "avg<5ms");
    }
}
