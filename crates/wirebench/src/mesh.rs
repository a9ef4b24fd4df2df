//! `wirebench mesh`: the fleet view. An agent on every node answers probes (it runs `serve`)
//! and probes its peers over UDP and TCP at a low rate (Poisson sampling) within a budget (Pingmesh
//! levels past a few hundred nodes); `mesh status` merges every agent's latest window into
//! the node-to-node matrix and names node, zone and path problems.
//!
//! Method: a cell is one agent probing one peer over one transport in one window. The
//! round trip is timed on the prober's monotonic clock from just before `send` to just after
//! the reply's readiness wait returns; a probe with no reply within `--timeout` is lost; a
//! window is published once all its probes are decided, so `sent = received + lost`. Cells
//! travel as HdrHistograms, so merged percentiles are exact; Prometheus gets the same
//! window's p50/p99/min/max and counts. Pure parts (planning, pacing, windows, the matrix
//! and its verdicts) are in core `mesh`.
//!
//! Layout: [`config`] (flags), [`agent`] (serve + prober + discovery + HTTP), [`prober`]
//! (the probe loop), [`state`] (what the threads share), [`http`] and [`metrics`] (the API),
//! [`status`] and [`promql`] (the matrix from agents or from Prometheus).

pub mod agent;
pub mod config;
pub mod http;
pub mod metrics;
pub mod prober;
pub mod promql;
pub mod state;
pub mod status;

pub use config::{AgentArgs, AgentConfig, StatusArgs, StatusConfig};

use crate::ctx::Ctx;

/// `wirebench mesh` subcommands.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Agent or status.
    #[command(subcommand)]
    pub command: MeshCommand,
}

/// The two halves of the mesh.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum MeshCommand {
    /// Run an agent on this node: answer probes, probe the peers, serve /metrics and /v1/*.
    Agent(Box<AgentArgs>),
    /// Pull every agent's latest window (or Prometheus's), print the matrix and the verdicts.
    Status(StatusArgs),
}

/// Runs a mesh subcommand; returns the exit code.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<u8> {
    match &args.command {
        MeshCommand::Agent(a) => agent::run(a, ctx).map(|()| 0),
        MeshCommand::Status(s) => status::run(s, ctx),
    }
}
