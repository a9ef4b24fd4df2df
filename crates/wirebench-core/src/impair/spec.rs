//! What the user asked for, per direction: a validated [`Spec`] and the parsers for its
//! human forms (`1%`, `2ms:pareto`, `1%,10%`, `0.5%:2ms`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::units::Span;

/// Why an impairment value did not parse: one line naming the value and the accepted form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn bad(what: &str, input: &str, problem: &str) -> SpecError {
    SpecError(format!("{what}: '{input}' {problem}"))
}

/// A probability written as a percentage: `1%`, `0.5%`, `100%`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
pub struct Percent(f64);

impl Percent {
    /// The probability, in [0, 1].
    pub const fn prob(self) -> f64 {
        self.0
    }

    /// From a probability in [0, 1].
    pub fn from_prob(p: f64) -> Option<Self> {
        (0.0..=1.0).contains(&p).then_some(Self(p))
    }
}

impl FromStr for Percent {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let Some(num) = t.strip_suffix('%') else {
            return Err(bad("percentage", s, "needs a % (e.g. 1%, 0.5%)"));
        };
        let v: f64 = num.trim().parse().map_err(|_| bad("percentage", s, "is not a number with a % (e.g. 1%)"))?;
        if !v.is_finite() || v < 0.0 {
            return Err(bad("percentage", s, "cannot be negative"));
        }
        if v > 100.0 {
            return Err(bad("percentage", s, "is over 100%"));
        }
        Ok(Self(v / 100.0))
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{:.6}", self.0 * 100.0);
        write!(f, "{}%", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// The shape of the delay variation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterDist {
    /// Normal, `jitter` is the standard deviation (cut at ±4 sd).
    Normal,
    /// Uniform on `delay ± jitter` (netem's default shape).
    Uniform,
    /// Pareto with shape 3 (heavy right tail), centred so the mean is `delay`, scaled so the
    /// standard deviation is `jitter`.
    Pareto,
}

impl JitterDist {
    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Uniform => "uniform",
            Self::Pareto => "pareto",
        }
    }
}

/// `--jitter 2ms[:normal|uniform|pareto]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jitter {
    /// The spread, ns (see [`JitterDist`] for what it means per shape).
    pub ns: u64,
    /// The shape; normal unless given.
    pub dist: JitterDist,
}

impl FromStr for Jitter {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (amount, dist) = s.trim().split_once(':').map_or((s.trim(), None), |(a, d)| (a, Some(d)));
        let dist = match dist.map(str::trim) {
            None | Some("normal") => JitterDist::Normal,
            Some("uniform") => JitterDist::Uniform,
            Some("pareto") => JitterDist::Pareto,
            Some(_) => return Err(bad("jitter", s, "has an unknown distribution (use normal, uniform or pareto)")),
        };
        Ok(Self { ns: span_ns("jitter", amount)?, dist })
    }
}

/// `--delay 10ms`: a duration that may be 0 but not negative, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay(pub u64);

impl FromStr for Delay {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        span_ns("delay", s).map(Self)
    }
}

/// Parses a non-negative duration, with a clear word for a negative one.
pub fn span_ns(what: &str, s: &str) -> Result<u64, SpecError> {
    if s.trim().starts_with('-') {
        return Err(bad(what, s, "cannot be negative"));
    }
    let d: Span = s.parse().map_err(|e| SpecError(format!("{what}: {e}")))?;
    Ok(crate::units::nanos(d.0))
}

/// How packets are lost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Loss {
    /// Independent losses with probability `p`.
    Random {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott two-state loss (`--loss-burst P,R`): from good to bad with
    /// probability `p`, back with `r`; every packet in the bad state is lost, none in the
    /// good one (Gilbert's simple model, netem's `gemodel p r`). Mean loss `p / (p + r)`,
    /// mean burst length `1 / r`.
    Burst {
        /// Good to bad.
        p: f64,
        /// Bad to good.
        r: f64,
    },
}

impl Loss {
    /// The long-run loss probability the model asks for.
    pub fn mean(&self) -> f64 {
        match *self {
            Self::Random { p } => p,
            Self::Burst { p, r } if p + r > 0.0 => p / (p + r),
            Self::Burst { .. } => 0.0,
        }
    }
}

/// `--loss-burst P,R`, each a percentage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossBurst {
    /// Good to bad.
    pub p: Percent,
    /// Bad to good.
    pub r: Percent,
}

impl FromStr for LossBurst {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((p, r)) = s.split_once(',') else {
            return Err(bad("loss-burst", s, "needs two percentages P,R (e.g. 1%,25%)"));
        };
        let (p, r): (Percent, Percent) = (p.parse()?, r.parse()?);
        if r.prob() == 0.0 {
            return Err(bad("loss-burst", s, "has R = 0%: a burst would never end"));
        }
        Ok(Self { p, r })
    }
}

/// `--reorder 0.5%[:GAP]`: a reordered packet is held back by an extra `gap` (1 ms unless
/// given), so packets arriving within the gap overtake it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reorder {
    /// Probability a packet is held back.
    pub p: f64,
    /// How long it is held back, ns.
    pub gap_ns: u64,
}

/// The hold-back of a reordered packet unless given.
pub const DEFAULT_REORDER_GAP_NS: u64 = 1_000_000;

impl FromStr for Reorder {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (p, gap) = s.trim().split_once(':').map_or((s.trim(), None), |(p, g)| (p, Some(g)));
        let p: Percent = p.parse()?;
        let gap_ns = gap.map(|g| span_ns("reorder gap", g)).transpose()?.unwrap_or(DEFAULT_REORDER_GAP_NS);
        Ok(Self { p: p.prob(), gap_ns })
    }
}

/// The impairment of one direction, validated: every field holds a usable value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// Fixed added delay, ns.
    pub delay_ns: u64,
    /// Delay variation.
    pub jitter: Option<Jitter>,
    /// Loss model.
    pub loss: Option<Loss>,
    /// Reordering.
    pub reorder: Option<Reorder>,
    /// Probability a packet is sent twice.
    pub duplicate: f64,
    /// Token-bucket rate, bits per second.
    pub rate_bps: Option<u64>,
    /// Token-bucket depth, bytes (a burst at line speed before the rate applies).
    pub burst_bytes: u64,
    /// A packet that would wait in the rate queue longer than this is dropped, ns.
    pub queue_limit_ns: u64,
}

/// The queue limit unless given (tc's tbf examples use 50 to 400 ms).
pub const DEFAULT_QUEUE_LIMIT_NS: u64 = 100_000_000;

impl Default for Spec {
    fn default() -> Self {
        Self {
            delay_ns: 0,
            jitter: None,
            loss: None,
            reorder: None,
            duplicate: 0.0,
            rate_bps: None,
            burst_bytes: 0,
            queue_limit_ns: DEFAULT_QUEUE_LIMIT_NS,
        }
    }
}

impl Spec {
    /// The token-bucket depth for a rate unless given: one millisecond at the rate, at
    /// least one 1514-byte frame (tbf needs at least rate / HZ; HTB picks about this).
    pub fn default_burst(rate_bps: u64) -> u64 {
        (rate_bps / 8 / 1000).max(1514)
    }

    /// Does this direction change anything?
    pub fn is_passthrough(&self) -> bool {
        self.delay_ns == 0
            && self.jitter.is_none_or(|j| j.ns == 0)
            && self.loss.is_none_or(|l| l.mean() == 0.0)
            && self.reorder.is_none_or(|r| r.p == 0.0)
            && self.duplicate == 0.0
            && self.rate_bps.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!("1%".parse::<Percent>().map(Percent::prob), Ok(0.01));
        assert_eq!("100%".parse::<Percent>().map(Percent::prob), Ok(1.0));
        assert_eq!("0.5%".parse::<Percent>().unwrap().to_string(), "0.5%");
        assert_eq!("0%".parse::<Percent>().map(Percent::prob), Ok(0.0), "no loss is a percentage too");
        assert_eq!(Percent::from_prob(0.25).map(Percent::prob), Some(0.25));
        assert_eq!(Percent::from_prob(1.0).map(Percent::prob), Some(1.0));
        for p in [-0.01, 1.01, f64::NAN] {
            assert_eq!(Percent::from_prob(p), None, "{p}");
        }
        for (bad, why) in [("150%", "over 100%"), ("-1%", "negative"), ("1", "needs a %"), ("x%", "not a number")] {
            let e = bad.parse::<Percent>().unwrap_err().0;
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn jitter_forms() {
        let j = |s: &str| s.parse::<Jitter>();
        assert_eq!(j("2ms"), Ok(Jitter { ns: 2_000_000, dist: JitterDist::Normal }));
        assert_eq!(j("250us:uniform"), Ok(Jitter { ns: 250_000, dist: JitterDist::Uniform }));
        assert_eq!(j("1ms:pareto").map(|j| j.dist), Ok(JitterDist::Pareto));
        assert!(j("2ms:cauchy").unwrap_err().0.contains("unknown distribution"));
        assert_eq!(j("2ms: normal").map(|j| j.dist), Ok(JitterDist::Normal));
        for d in [JitterDist::Normal, JitterDist::Uniform, JitterDist::Pareto] {
            assert_eq!(j(&format!("1ms:{}", d.name())).map(|j| j.dist), Ok(d), "a name parses back");
        }
        assert!(j("-2ms").unwrap_err().0.contains("negative"));
        assert!(j("2").unwrap_err().0.contains("needs a unit"));
        assert!("-5ms".parse::<Delay>().unwrap_err().0.contains("delay: '-5ms' cannot be negative"));
        assert_eq!("10ms".parse::<Delay>(), Ok(Delay(10_000_000)));
    }

    #[test]
    fn loss_burst_and_reorder() {
        let b: LossBurst = "1%,25%".parse().unwrap();
        assert_eq!((b.p.prob(), b.r.prob()), (0.01, 0.25));
        assert!("1%".parse::<LossBurst>().is_err());
        assert!("1%,0%".parse::<LossBurst>().unwrap_err().0.contains("never end"));
        assert!((Loss::Burst { p: 0.01, r: 0.25 }.mean() - 0.01 / 0.26).abs() < 1e-12);
        assert!(Loss::Burst { p: 0.0, r: 0.0 }.mean().abs() < 1e-12, "never lossy, not 0/0");
        assert!((Loss::Burst { p: 0.5, r: 0.0 }.mean() - 1.0).abs() < 1e-12, "a burst that never ends loses all");
        assert!((Loss::Random { p: 0.03 }.mean() - 0.03).abs() < 1e-12);
        assert_eq!("0.5%".parse::<Reorder>(), Ok(Reorder { p: 0.005, gap_ns: DEFAULT_REORDER_GAP_NS }));
        assert_eq!("2%:3ms".parse::<Reorder>(), Ok(Reorder { p: 0.02, gap_ns: 3_000_000 }));
    }

    #[test]
    fn passthrough() {
        assert!(Spec::default().is_passthrough());
        assert!(!Spec { delay_ns: 1, ..Spec::default() }.is_passthrough());
        // Each part at zero changes nothing; any part above it does.
        let jitter = |ns| Some(Jitter { ns, dist: JitterDist::Normal });
        let zero = Spec {
            jitter: jitter(0),
            loss: Some(Loss::Burst { p: 0.0, r: 0.5 }),
            reorder: Some(Reorder { p: 0.0, gap_ns: DEFAULT_REORDER_GAP_NS }),
            ..Spec::default()
        };
        assert!(zero.is_passthrough());
        for changed in [
            Spec { jitter: jitter(1), ..zero },
            Spec { loss: Some(Loss::Random { p: 0.01 }), ..zero },
            Spec { reorder: Some(Reorder { p: 0.01, gap_ns: 0 }), ..zero },
            Spec { duplicate: 0.01, ..zero },
            Spec { rate_bps: Some(1_000_000), ..zero },
        ] {
            assert!(!changed.is_passthrough(), "{changed:?}");
        }
        assert_eq!(Spec::default_burst(60_760_000), 7_595);
        assert_eq!(Spec::default_burst(1_000_000), 1514);
    }
}
