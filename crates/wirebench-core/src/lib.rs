//! wirebench's sans-IO core.
//!
//! Everything here is pure: wire formats, schedules (intended send times), sequence
//! accounting, latency recording, clock-offset estimation, unit parsing and the versioned
//! `Report` model. This crate must not depend on tokio, socket2 or any socket code, and must
//! never read a clock or an unseeded RNG: time comes in as nanoseconds, decisions go out as
//! values (the quinn-proto rule). That keeps every piece testable on a virtual clock.
//!
//! Layout:
//! - [`auth`]: HMAC-SHA256 keyed by a token (control handshakes, mesh probes, relayed datagrams).
//! - [`budget`]: what a far end grants one client, and the ledger of its sessions and bytes.
//! - [`wire`]: the probe, stream and control formats, and the control handshake.
//! - [`schedule`]: `Pacing`, `Stop` and the intended send times of open and closed loops.
//! - [`latency`]: histograms per phase and view (corrected, uncorrected, warm-up), and the
//!   split of a round trip by kernel timestamps (`latency::kernel`).
//! - [`seq`]: a sliding window that tells new, duplicate and too-old sequence numbers apart.
//! - [`stream`]: receive-side accounting of sequenced streams (loss, reordering, gaps).
//! - [`jitter`]: RFC 3550 interarrival jitter.
//! - [`clocksync`]: NTP-style offset and one-way delay with an explicit bound.
//! - [`counters`]: the kernel's drop counters (`/proc/net/snmp`, softnet, interfaces) parsed,
//!   differenced, and a run's losses split among them.
//! - [`hiccup`]: the stall meter's recorder (jHiccup's method) and its verdict on a latency.
//! - [`rng`]: a seeded generator for simulated links.
//! - [`impair`]: impairment decisions (delay, jitter, loss, reorder, duplicate, rate).
//! - [`relay`]: the relay's duplicate window, echo guard, rate caps and segment mates.
//! - [`ratesearch`]: the highest loss-free rate (RFC 2544): geometric descent, then bisection.
//! - [`snmp`]: the kernel's protocol counters (`/proc/net/snmp`) by name, and their differences.
//! - [`load`]: event mix, client schedules, link shaper, thresholds, messages and delivery
//!   accounting of `wirebench load`.
//! - [`room`]: the room's request classification (upgrade, 400, 426) and memory budget.
//! - [`mesh`]: the fleet mesh: peers, pair selection under a budget, paced probes, windows,
//!   the agents' API, the merged matrix and its node/zone/path verdicts.
//! - [`units`]: human units (`10ms`, `50k/s`) as newtypes.
//! - [`report`]: the versioned `Report` and the histogram codec.

pub mod auth;
pub mod budget;
pub mod clocksync;
pub mod counters;
pub mod generator;
pub mod hiccup;
pub mod impair;
pub mod jitter;
pub mod latency;
pub mod load;
pub mod mesh;
pub mod ratesearch;
pub mod reflect;
pub mod relay;
pub mod report;
pub mod rng;
pub mod room;
pub mod schedule;
pub mod seq;
pub mod snmp;
pub mod stream;
pub mod units;
pub mod wire;
