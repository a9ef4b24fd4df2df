//! The fleet mesh's pure parts (`wirebench mesh`): peers and the peer list format, whom to
//! probe and how often (Pingmesh levels under a budget), when (a Poisson process per target, random phases), what each
//! probe became (windows where `sent = received + lost` exactly), the agents' JSON API, the
//! merged matrix and its verdicts (node, zone, path).
//!
//! - [`peer`]: `Peer`, list parsing, merging sources, diffs.
//! - [`endpoints`]: peers from Kubernetes EndpointSlices.
//! - [`lines`]: a watch stream split into its lines, each byte looked at once.
//! - [`plan`]: pair selection and the cost arithmetic of a fleet.
//! - [`pacer`]: due times with a random phase and jitter per target.
//! - [`window`]: per-target accounting in fixed windows.
//! - [`api`]: `/v1/matrix` and `/v1/peers`.
//! - [`exposition`]: the format `/metrics` answers in.
//! - [`matrix`]: rows from agents or Prometheus, checked and merged.
//! - [`native`]: Prometheus native histograms from HdrHistograms.
//! - [`verdict`]: node, zone and path problems.

pub mod api;
pub mod endpoints;
pub mod exposition;
pub mod lines;
pub mod matrix;
pub mod native;
pub mod pacer;
pub mod peer;
pub mod plan;
pub mod schedule;
pub mod verdict;
pub mod window;
