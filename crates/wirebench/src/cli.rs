//! The command line: one subcommand per mode, each with its own `Args` (STYLE C4).

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

/// wirebench: a network performance lab in one binary.
#[derive(Debug, Parser)]
#[command(name = "wirebench", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The modes.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The far end: echo latency probes on UDP and TCP (one port, default 7878).
    Serve(crate::serve::Args),
    /// Round-trip latency to a serve (UDP unicast or multicast, TCP), closed or open loop.
    Ping(crate::ping::Args),
    /// Throughput and loss of a sequenced UDP or TCP stream to one or more serves.
    Stream(crate::stream::Args),
    /// A standalone receiver: DatagramTest's Now/Lifetime reports per publisher.
    Listen(crate::listen::Args),
    /// The main job with no setup: serve in-process on loopback and a short tour of every
    /// measurement, saved to wirebench-report/.
    Suite(crate::suite::Args),
    /// Render saved reports: text, one self-contained HTML page with charts, or runs side by
    /// side with ratios (--compare).
    Report(crate::report::Args),
    /// Check this host for what skews or breaks measurements (socket buffers, MTU and path
    /// MTU, multicast routes, CPUs, clocksource) and print the fix; changes nothing.
    Doctor(crate::doctor::Args),
    /// UDP/TCP impairment proxy: delay, jitter, loss (random, bursty), reorder, duplicate,
    /// rate; reports requested vs achieved.
    Proxy(Box<crate::proxy::Args>),
    /// Print (or apply, or clear) tc/iptables scripts that shape clients' links.
    Shape(crate::shape::Args),
    /// A reference WebSocket room server: relays each message to the room's other members,
    /// answers requests; counts msgs/s and its own CPU.
    Room(crate::room::Args),
    /// Application load over WebSocket: clients in rooms, an open-loop event mix, delay from
    /// departure to arrival at every receiver, per-client link shaping, thresholds.
    Load(Box<crate::load::Args>),
    /// The fleet view: an agent on every node probing its peers (UDP, TCP, multicast), and
    /// the node-to-node matrix with node, zone and path verdicts (`mesh agent`, `mesh status`).
    Mesh(crate::mesh::Args),
    /// How late this host wakes a sleeping thread (jHiccup's stall meter), on its own: the
    /// platform's own stalls, which every measurement on it also suffers.
    Hiccup(crate::hiccup::Args),
    /// Carry multicast groups between nodes over unicast where the network has none: one
    /// relay per node, forwarding to its peer relays and re-emitting what they send.
    Relay(Box<crate::relay::Args>),
}

impl Command {
    /// The files this command writes, with their flags: checked before a run starts (a
    /// path that cannot be written is exit 2, not a lost run), and `-` (standard output)
    /// sends the command's text to standard error.
    pub fn outputs(&self) -> Vec<(&'static str, &Path)> {
        fn add<'a>(v: &mut Vec<(&'static str, &'a Path)>, flag: &'static str, p: Option<&'a PathBuf>) {
            v.extend(p.map(|p| (flag, p.as_path())));
        }
        let mut v = Vec::new();
        match self {
            Self::Ping(a) => {
                add(&mut v, "--json", a.json.as_ref());
                add(&mut v, "--hgrm", a.hgrm.as_ref());
                add(&mut v, "--hlog", a.hlog.as_ref());
            }
            Self::Stream(a) => {
                add(&mut v, "--json", a.json.as_ref());
                add(&mut v, "--log", a.log.as_ref());
            }
            Self::Listen(a) => {
                add(&mut v, "--json", a.json.as_ref());
                add(&mut v, "--log", a.log.as_ref());
            }
            Self::Proxy(a) => add(&mut v, "--json", a.json.as_ref()),
            Self::Relay(a) => add(&mut v, "--json", a.json.as_ref()),
            Self::Load(a) => {
                add(&mut v, "--json", a.json.as_ref());
                add(&mut v, "--series", a.series.as_ref());
            }
            Self::Doctor(a) => add(&mut v, "--json", a.json.as_ref()),
            Self::Report(a) => {
                add(&mut v, "--html", a.html.as_ref());
                add(&mut v, "--json", a.json.as_ref());
            }
            Self::Mesh(a) => {
                if let crate::mesh::MeshCommand::Status(s) = &a.command {
                    add(&mut v, "--json", s.json.as_ref());
                }
            }
            Self::Hiccup(a) => add(&mut v, "--json", a.json.as_ref()),
            Self::Serve(_) | Self::Suite(_) | Self::Shape(_) | Self::Room(_) => {}
        }
        v
    }
}

/// Parses one mode's flags as its subcommand would (for the suite, and for tests of a mode's
/// `Config`).
pub fn parse_mode<A: clap::Args>(name: &str, args: &[&str]) -> Result<A, clap::Error> {
    #[derive(Parser)]
    struct One<A: clap::Args> {
        #[command(flatten)]
        a: A,
    }
    Ok(One::<A>::try_parse_from(std::iter::once(name).chain(args.iter().copied()))?.a)
}
