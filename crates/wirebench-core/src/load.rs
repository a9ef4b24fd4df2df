//! The pure parts of `wirebench load` and `wirebench room`: the weighted event mix,
//! per-client send times (fixed interval with a random phase, or Poisson), the per-client
//! link shaper (token bucket plus an added one-way delay), thresholds, the messages
//! (templates, and the JSON fields a receiver and the room read back), the load client's
//! WebSocket frames. Nothing here reads a clock or a socket: times are ns on whatever clock
//! the caller keeps, randomness is a seeded [`SplitMix64`](crate::rng::SplitMix64), so every
//! piece is tested on a virtual clock.

pub mod arrivals;
pub mod client;
pub mod delivery;
pub mod mix;
pub mod msg;
pub mod record;
pub mod results;
pub mod shaper;
pub mod shard;
pub mod threshold;
pub mod vars;
pub mod ws;

pub use arrivals::Arrivals;
pub use mix::{EventType, Mix, MixError};
pub use shaper::{Link, Shaper};
pub use threshold::{Stat, Threshold};
