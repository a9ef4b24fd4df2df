//! `wirebench relay`: multicast where the network has none. One relay per node joins each
//! group on the local interface, forwards what local applications send to the group to its
//! peer relays by unicast (one `sendmmsg` across peers), and re-emits what peers send it
//! into the local group.
//!
//! The rules (`docs/modes/relay.md`):
//! - a datagram this relay re-emitted is never forwarded again: it comes from one of the
//!   relay's own emitting sockets (exact), and as a guard its bytes were re-emitted within
//!   the last few milliseconds;
//! - a peer's datagrams are re-emitted once per (origin relay, sequence);
//! - nothing is sent to an address that is not a peer, and with a token nothing is believed
//!   without its MAC;
//! - rates are capped per group (out) and per peer (in), so a relay never amplifies;
//! - relays that hear each other's probes natively share a segment: the one with the lowest
//!   address carries the group for it, and none forwards to the others;
//! - a group that already reaches every peer natively is refused (`--force` overrides).
//!
//! Re-emitted datagrams come from the relay (one socket per original sender, so receivers
//! can still tell senders apart), not from the original sender: the report lists the
//! original senders.
//!
//! Layout: `config` (flags to a `Config`), `peers` (the mesh's discovery, read by the loop),
//! `engine` (the loop), `stats` (counters and the report).

mod config;
mod engine;
mod peers;
mod stats;

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::time::SystemTime;
use wirebench_core::units::nanos;

use wirebench_core::report::{Outcome, Report, Results};
use wirebench_core::units::{MsgRate, Span};

pub use self::config::{Config, DEFAULT_PORT};
use crate::ctx::Ctx;

/// `wirebench relay` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("ttl", |a| a.default_value(crate::flags::MulticastArgs::LINK_LOCAL)))]
pub struct Args {
    /// A group to carry, `GROUP:PORT`; repeatable.
    #[arg(long, value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub group: Vec<SocketAddrV4>,
    /// The other relays, as the mesh finds its agents: `host[:port],...` (a name gives every
    /// address it resolves to), a file of them (one a line, or `file:PATH`), `dns:NAME[:PORT]`,
    /// `k8s:NAMESPACE/SERVICE[:PORT]`; comma-separated, repeatable; re-read every
    /// --resolve-every (Kubernetes: watched).
    #[arg(long, value_name = "LIST|FILE|NAME")]
    pub peers: Vec<String>,
    /// The interface for the joins and the re-emission, and the re-emitted datagrams' TTL
    /// (1: the groups stay on the link).
    #[command(flatten)]
    pub mcast: crate::flags::MulticastArgs,
    /// The relay port (peers send here).
    #[arg(long, default_value = "0.0.0.0:7880", env = "WIREBENCH_RELAY_LISTEN")]
    pub listen: String,
    /// Authenticate every relayed datagram with an HMAC keyed by a derivation of this token.
    #[command(flatten)]
    pub token: crate::auth::TokenArgs,
    /// The salt of that key: the same on every relay of the group.
    #[command(flatten)]
    pub salt: crate::auth::SaltArg,
    /// Datagrams per second per group (forwarded) and per peer (re-emitted) at most.
    #[arg(long, default_value = "100k/s")]
    pub max_rate: MsgRate,
    /// Original senders with an emitting socket of their own at most.
    #[arg(long, default_value = "256")]
    pub max_senders: wirebench_core::units::Count,
    /// Re-resolve the peers this often.
    #[arg(long, default_value = "10s")]
    pub resolve_every: Span,
    /// A peer out of the list and silent this long leaves the peer table (its counters go
    /// to the retired total, its slot to a new peer).
    #[arg(long, default_value = "60s")]
    pub peer_expiry: Span,
    /// How long to wait for peers' answers to the native check.
    #[arg(long, default_value = "1s")]
    pub check_wait: Span,
    /// Only check whether native multicast reaches the peers, print it and exit.
    #[arg(long)]
    pub check: bool,
    /// Relay groups even where native multicast reaches the peers (they get it twice).
    #[arg(long)]
    pub force: bool,
    /// After a wait that found work, poll the sockets without sleeping for up to this long
    /// (e.g. 200us): lower added latency for a vCPU at 100 % while traffic flows (off by
    /// default).
    #[arg(long, value_name = "DURATION")]
    pub busy_poll: Option<Span>,
    /// Stop after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time")]
    pub duration: Option<Span>,
    /// How to reach the Kubernetes API for k8s: peers.
    #[command(flatten)]
    pub kube: crate::discovery::KubeFlags,
    /// Write the JSON report at the end.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Runs the relay (or its check) until stopped; prints the summary and saves the report.
pub fn run(a: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Report> {
    // An interface that does not exist is the command's mistake (exit 2), as in ping and listen.
    let interface = a.mcast.interface.ipv4()?;
    let cfg = Config::from_args(a, interface)?;
    let started = SystemTime::now();
    let t0 = std::time::Instant::now();
    let results = engine::run(&cfg, ctx)?;
    let report = Report {
        schema_version: wirebench_core::report::SCHEMA_VERSION,
        meta: crate::host::meta(&ctx.argv, started, nanos(t0.elapsed())),
        config: serde_json::json!({
            "groups": cfg.groups.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "listen": cfg.listen.to_string(),
            "interface": cfg.interface.to_string(),
            "max_rate_per_s": cfg.max_rate,
            "max_senders": cfg.max_senders,
            "ttl": cfg.ttl,
            "check": cfg.check,
            "force": cfg.force,
            "busy_poll_ns": nanos(cfg.busy_poll),
            "peer_expiry_ns": nanos(cfg.peer_expiry),
        }),
        outcome: if ctx.shutdown.is_set() { Outcome::Interrupted } else { Outcome::Completed },
        results: Results::Relay(results),
        attribution: None,
    };
    wirebench_report::render_text(&report, ctx.out, wirebench_report::screen::Detail::Normal, false)?;
    ctx.out.flush()?;
    if let Some(p) = &cfg.json {
        crate::output::write_json(p, &report)?;
    }
    Ok(report)
}
