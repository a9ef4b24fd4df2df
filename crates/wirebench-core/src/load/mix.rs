//! A weighted mix of event types: `cursor=40,modify=30,save=10` picks `cursor` 40 times in
//! 100 on average. Weights need not add up to 100; they are shares of their sum.

use crate::rng::SplitMix64;

/// Why a mix did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    /// A part was not `NAME=WEIGHT`.
    #[error("mix: '{0}' is not NAME=WEIGHT (e.g. cursor=40)")]
    Part(String),
    /// A weight was negative, not a number, or every weight was zero.
    #[error("mix: '{0}' needs a weight above 0")]
    Weight(String),
    /// The same type twice.
    #[error("mix: '{0}' appears twice")]
    Duplicate(String),
    /// No types at all.
    #[error("mix: no event types")]
    Empty,
    /// A name that cannot go into a message unescaped.
    #[error("mix: event type '{0}' must be letters, digits, '_', '-' or '.'")]
    Name(String),
}

/// One event type of a mix.
#[derive(Debug, Clone, PartialEq)]
pub struct EventType {
    /// Its name, sent as the message's `type`.
    pub name: String,
    /// Its share, in the units the user gave.
    pub weight: f64,
    /// A request: the server answers the sender only (request-to-reply is measured).
    pub request: bool,
    /// Message size in bytes (the JSON is padded up to it).
    pub size: usize,
}

/// A type name goes into messages as it is (templates do no escaping), and `reply` names
/// request-to-reply in thresholds.
fn valid_name(n: &str) -> bool {
    !n.is_empty() && n != "reply" && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The message size of a type nobody gave a size for.
pub const DEFAULT_SIZE: usize = 128;

/// A validated mix: at least one type, weights above zero, names unique.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    types: Vec<EventType>,
    /// Cumulative shares in [0, 1], the last one 1.
    cumulative: Vec<f64>,
}

impl Mix {
    /// A mix of these types.
    pub fn new(types: Vec<EventType>) -> Result<Self, MixError> {
        if types.is_empty() {
            return Err(MixError::Empty);
        }
        for (i, t) in types.iter().enumerate() {
            if !valid_name(&t.name) {
                return Err(MixError::Name(t.name.clone()));
            }
            if !(t.weight.is_finite() && t.weight > 0.0) {
                return Err(MixError::Weight(t.name.clone()));
            }
            if types[..i].iter().any(|u| u.name == t.name) {
                return Err(MixError::Duplicate(t.name.clone()));
            }
        }
        let total: f64 = types.iter().map(|t| t.weight).sum();
        let mut acc = 0.0;
        let mut cumulative: Vec<f64> = types
            .iter()
            .map(|t| {
                acc += t.weight / total;
                acc
            })
            .collect();
        if let Some(last) = cumulative.last_mut() {
            *last = 1.0;
        }
        Ok(Self { types, cumulative })
    }

    /// Parses `cursor=40,modify=30`; `requests` names the request types, every type gets
    /// [`DEFAULT_SIZE`].
    pub fn parse(s: &str, requests: &[&str]) -> Result<Self, MixError> {
        let mut types = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, w) = part.split_once('=').ok_or_else(|| MixError::Part(part.to_owned()))?;
            let name = name.trim();
            if !valid_name(name) {
                return Err(MixError::Part(part.to_owned()));
            }
            let weight: f64 = w.trim().parse().map_err(|_| MixError::Weight(name.to_owned()))?;
            types.push(EventType {
                name: name.to_owned(),
                weight,
                request: requests.contains(&name),
                size: DEFAULT_SIZE,
            });
        }
        Self::new(types)
    }

    /// The collaborative IDE of the issue: cursor 40, modify 30, save 10, open 10, list 7,
    /// comment 2.5, question 0.5; save, open and list are requests.
    pub fn collab_ide() -> Self {
        Self::parse("cursor=40,modify=30,save=10,open=10,list=7,comment=2.5,question=0.5", &["save", "open", "list"])
            .expect("constant mix is valid")
    }

    /// The types, in the order given.
    pub fn types(&self) -> &[EventType] {
        &self.types
    }

    /// Mutable access for sizes and request marks (weights stay as validated).
    pub fn type_mut(&mut self, name: &str) -> Option<&mut EventType> {
        self.types.iter_mut().find(|t| t.name == name)
    }

    /// The index of the type for a uniform draw `u` in [0, 1).
    pub fn pick_at(&self, u: f64) -> usize {
        self.cumulative.iter().position(|&c| u < c).unwrap_or(self.types.len() - 1)
    }

    /// Draws a type index.
    pub fn pick(&self, rng: &mut SplitMix64) -> usize {
        self.pick_at(rng.next_f64())
    }

    /// The share of type `i` (0..=1).
    pub fn share(&self, i: usize) -> f64 {
        let prev = if i == 0 { 0.0 } else { self.cumulative[i - 1] };
        self.cumulative[i] - prev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let m = Mix::parse("a=1, b=3", &["b"]).unwrap();
        assert_eq!(m.types().len(), 2);
        assert!(m.types()[1].request && !m.types()[0].request);
        assert!((m.share(1) - 0.75).abs() < 1e-12);
        assert_eq!(Mix::parse("a", &[]), Err(MixError::Part("a".into())));
        assert_eq!(Mix::parse("a=0", &[]), Err(MixError::Weight("a".into())));
        assert_eq!(Mix::parse("a=x", &[]), Err(MixError::Weight("a".into())));
        assert_eq!(Mix::parse("a=1,a=2", &[]), Err(MixError::Duplicate("a".into())));
        assert_eq!(Mix::parse("", &[]), Err(MixError::Empty));
        // a scenario file's names go through new(): a quote would break every message
        let t = |name: &str| EventType { name: name.into(), weight: 1.0, request: false, size: 1 };
        assert_eq!(Mix::new(vec![t("a\"b")]), Err(MixError::Name("a\"b".into())));
        assert_eq!(Mix::new(vec![t("reply")]), Err(MixError::Name("reply".into())));
        assert!(Mix::new(vec![t("v1.cursor-move_x")]).is_ok());
    }

    #[test]
    fn picks_follow_the_cumulative_shares() {
        let m = Mix::parse("a=1,b=1", &[]).unwrap();
        assert_eq!(m.pick_at(0.0), 0);
        assert_eq!(m.pick_at(0.499), 0);
        assert_eq!(m.pick_at(0.5), 1);
        assert_eq!(m.pick_at(0.999_999), 1);
    }

    #[test]
    fn a_draw_past_the_last_share_picks_the_last_type() {
        let m = Mix::parse("a=1,b=1,c=2", &[]).unwrap();
        assert_eq!(m.pick_at(1.0), 2);
        assert_eq!(m.pick_at(f64::NAN), 2);
    }

    #[test]
    fn type_mut_changes_only_the_type_named() {
        let mut m = Mix::parse("a=1,b=1", &[]).unwrap();
        let b = m.type_mut("b").unwrap();
        b.size = 9;
        b.request = true;
        assert_eq!(m.types()[1].name, "b");
        assert_eq!((m.types()[1].size, m.types()[1].request), (9, true));
        assert_eq!((m.types()[0].size, m.types()[0].request), (DEFAULT_SIZE, false));
        assert!(m.type_mut("c").is_none());
    }

    /// Over 1,000,000 seeded draws every type's count is within 5 standard deviations of
    /// its binomial mean (a false alarm about once in 3.5 million per type).
    #[test]
    fn proportions_over_many_events() {
        let m = Mix::collab_ide();
        let n = 1_000_000u32;
        for seed in [1u64, 42, 0xdead_beef] {
            let mut rng = SplitMix64::new(seed);
            let mut counts = vec![0u32; m.types().len()];
            for _ in 0..n {
                counts[m.pick(&mut rng)] += 1;
            }
            for (i, &c) in counts.iter().enumerate() {
                let p = m.share(i);
                let mean = f64::from(n) * p;
                let sd = (f64::from(n) * p * (1.0 - p)).sqrt();
                let z = (f64::from(c) - mean) / sd;
                assert!(z.abs() < 5.0, "{} seed {seed}: {c} vs {mean:.0} (z {z:.2})", m.types()[i].name);
            }
        }
        assert!((m.share(6) - 0.005).abs() < 1e-12, "question is 0.5 %");
    }
}
