//! The pure parts of `wirebench load`: the weighted event mix, per-client send times
//! (fixed interval with a random phase, or Poisson), the per-client link shaper (token
//! bucket plus an added one-way delay) and thresholds. Nothing here reads a clock or a
//! socket: times are ns on whatever clock the caller keeps, randomness is a seeded
//! [`SplitMix64`](crate::rng::SplitMix64), so every piece is tested on a virtual clock.

pub mod arrivals;
pub mod mix;
pub mod shaper;
pub mod threshold;

pub use arrivals::Arrivals;
pub use mix::{EventType, Mix, MixError};
pub use shaper::{Link, Shaper};
pub use threshold::{Stat, Threshold};
