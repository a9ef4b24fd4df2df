//! `mesh agent` and `mesh status` flags, validated into configs (pure apart from reading a
//! token file, the Kubernetes CA and the host name).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;
use wirebench_core::units::nanos;

use wirebench_core::mesh::api::Proto;
use wirebench_core::mesh::peer::check_label;
use wirebench_core::mesh::plan::PlanConfig;
use wirebench_core::mesh::verdict::Thresholds;
use wirebench_core::mesh::window::MAX_TIMEOUT_NS;
use wirebench_core::units::{ByteSize, MsgRate, Span};

use crate::discovery::{self, KubeAccess, Source};
use crate::error::UsageError;

/// The agent's probe port (its serve) by default.
pub const DEFAULT_PORT: u16 = crate::serve::embed::DEFAULT_PORT;
/// The agent's HTTP port (API and metrics) by default.
pub const DEFAULT_HTTP_PORT: u16 = 9878;

/// `wirebench mesh agent` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("ttl", |a| a.default_value(crate::flags::MulticastArgs::LINK_LOCAL)))]
pub struct AgentArgs {
    /// Probe address: the serve this agent runs (UDP and TCP).
    #[arg(long, default_value = "0.0.0.0:7878", env = "WIREBENCH_MESH_LISTEN")]
    pub listen: String,
    /// HTTP address for /metrics, /v1/matrix, /v1/peers, /healthz, /readyz.
    #[arg(long, default_value = "0.0.0.0:9878", env = "WIREBENCH_MESH_HTTP")]
    pub http: String,
    /// This node's probe address as its peers see it (default: --listen when it names an
    /// address, else this host's own addresses are recognised in the peer list).
    #[arg(long, env = "WIREBENCH_MESH_ADVERTISE")]
    pub advertise: Option<String>,
    /// Node name [default: the host name].
    #[arg(long, env = "WIREBENCH_MESH_NAME")]
    pub name: Option<String>,
    /// Zone or rack label.
    #[arg(long, env = "WIREBENCH_MESH_ZONE")]
    pub zone: Option<String>,
    /// Peers: HOST[:PORT] [name=N] [zone=Z], stamp:HOST[:PORT] [name=N] [zone=Z] (a STAMP
    /// reflector, port 862 by default), file:PATH, dns:NAME[:PORT],
    /// k8s:NAMESPACE/SERVICE[:PORT] (comma-separated, repeatable).
    #[arg(long, env = "WIREBENCH_MESH_PEERS", value_name = "SOURCES")]
    pub peers: Vec<String>,
    /// Re-read peer files and re-resolve names this often.
    #[arg(long, default_value = "30s")]
    pub refresh: Span,
    /// Probes per second per peer per transport, before the budget.
    #[arg(long, default_value = "2/s")]
    pub rate: MsgRate,
    /// Most probes per second this agent sends in all (unicast).
    #[arg(long, default_value = "100/s")]
    pub budget: MsgRate,
    /// Transports probed: udp, tcp or both.
    #[arg(long, default_value = "udp,tcp", value_delimiter = ',')]
    pub proto: Vec<String>,
    /// Length of a window (what /v1/matrix and the per-peer metrics cover).
    #[arg(long, default_value = "60s")]
    pub window: Span,
    /// A probe not answered within this is lost.
    #[arg(long, default_value = "1s")]
    pub timeout: Span,
    /// Up to this many nodes everyone probes everyone (Pingmesh level 1).
    #[arg(long, default_value = "200")]
    pub full_mesh_max: wirebench_core::units::Count,
    /// Past that: peers probed in each other zone.
    #[arg(long, default_value = "3")]
    pub inter_zone: wirebench_core::units::Count,
    /// Also probe this multicast group: who hears whom (every agent joins it).
    #[arg(long, value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub multicast: Option<SocketAddrV4>,
    /// Group probes per second.
    #[arg(long, default_value = "1/s")]
    pub multicast_rate: MsgRate,
    /// The interface for the group, and the group probes' TTL (1: the group stays on the link).
    #[command(flatten)]
    pub mcast: crate::flags::MulticastArgs,
    /// Shared secret: probes carry a keyed MAC, the HTTP API needs `Authorization: Bearer`.
    #[command(flatten)]
    pub token: crate::auth::TokenArgs,
    /// The salt of the probes' key: the same on every agent of the fleet.
    #[command(flatten)]
    pub salt: crate::auth::SaltArg,
    /// How to reach the Kubernetes API for k8s: peers.
    #[command(flatten)]
    pub kube: crate::discovery::KubeFlags,
    /// The stall meter beside the probing (per window on /metrics).
    #[command(flatten)]
    pub hiccup: AgentHiccupArgs,
    /// A STAMP reflector beside the probe port, for routers' and other tools' senders.
    #[command(flatten)]
    pub stamp: crate::stamp::StampArgs,
    /// Probe stamp: peers in authenticated mode with this HMAC-SHA-256 key, hex, at least 16
    /// bytes (their reflectors' key); reflections with another HMAC are dropped.
    #[arg(
        long,
        env = "WIREBENCH_MESH_STAMP_PEER_KEY",
        hide_env_values = true,
        conflicts_with = "stamp_peer_key_file",
        help_heading = "STAMP peers"
    )]
    pub stamp_peer_key: Option<String>,
    /// The stamp: peers' key from a file (hex).
    #[arg(long, value_name = "FILE", env = "WIREBENCH_MESH_STAMP_PEER_KEY_FILE", help_heading = "STAMP peers")]
    pub stamp_peer_key_file: Option<PathBuf>,
}

/// The stall meter's flags for an agent. By default the agent has no meter thread: its
/// samples are the lateness of the prober's own timed wake-ups (its send slots, about 20 a
/// second; `mesh::prober::stalls`), which costs no wake-up of its own. An agent runs all the
/// time on every node, and a meter thread's wake-ups were the largest part of its CPU
/// (`bench/mesh.sh cost`: 1.10 % of a core with it, 0.65 % without, at 1,000 peers). `--hiccup-interval` starts the meter thread as before (every other
/// mode's loop, one recording per window).
#[derive(Debug, Clone, clap::Args)]
pub struct AgentHiccupArgs {
    /// A stall meter thread sleeping this interval (10us to 1s, at most a tenth of
    /// --window); without it the prober's own send-slot wake-ups are the samples.
    #[arg(long, value_name = "SPAN", help_heading = "Attribution")]
    pub hiccup_interval: Option<Span>,
    /// No stall meter beside the probing.
    #[arg(long, help_heading = "Attribution")]
    pub no_hiccup: bool,
}

/// A validated agent configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Probe address.
    pub listen: SocketAddr,
    /// HTTP address.
    pub http: SocketAddr,
    /// Advertised probe address, if known.
    pub advertise: Option<SocketAddr>,
    /// Name.
    pub name: String,
    /// Zone.
    pub zone: Option<String>,
    /// Peer sources.
    pub sources: Vec<Source>,
    /// Refresh period.
    pub refresh: Duration,
    /// Kubernetes API access, when a source needs it.
    pub kube: Option<KubeAccess>,
    /// Planning.
    pub plan: PlanConfig,
    /// Unicast transports.
    pub protos: Vec<Proto>,
    /// Window length.
    pub window: Duration,
    /// Probe timeout.
    pub timeout: Duration,
    /// Multicast group.
    pub multicast: Option<SocketAddrV4>,
    /// Group probes per second.
    pub multicast_rate: f64,
    /// Interface for the group.
    pub interface: Option<Ipv4Addr>,
    /// Multicast TTL.
    pub ttl: u32,
    /// Token.
    pub token: Option<String>,
    /// Salt of the token's key.
    pub salt: String,
    /// Where the stall samples come from.
    pub stall_meter: StallMeter,
    /// The STAMP reflector, when asked for.
    pub stamp: Option<crate::stamp::StampConfig>,
    /// The key of `stamp:` peers (authenticated mode).
    pub stamp_peer_key: Option<wirebench_core::wire::stamp::Key>,
}

/// Where an agent's stall samples come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallMeter {
    /// `--no-hiccup`: none.
    Off,
    /// The default: the prober's own send-slot wake-ups.
    Prober,
    /// `--hiccup-interval`: a meter thread sleeping this interval, ns.
    Thread(u64),
}

fn host_name() -> String {
    let raw = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_default();
    let first = raw.split('.').next().unwrap_or("");
    if check_label("name", first).is_ok() { first.to_owned() } else { "agent".to_owned() }
}

impl AgentConfig {
    /// Validates `a`.
    pub fn from_args(a: &AgentArgs) -> Result<Self, UsageError> {
        let listen = crate::addr::resolve(&a.listen)?;
        let http = crate::addr::resolve(&a.http)?;
        let advertise = match &a.advertise {
            Some(s) => Some(match s.parse::<std::net::IpAddr>() {
                Ok(ip) => SocketAddr::new(ip, listen.port()),
                Err(_) => s.parse().map_err(|_| UsageError(format!("--advertise '{s}': expected IP or IP:PORT")))?,
            }),
            None => (!listen.ip().is_unspecified() && listen.port() != 0).then_some(listen),
        };
        let name = match &a.name {
            Some(n) => check_label("--name", n).map_err(UsageError)?,
            None => host_name(),
        };
        let zone = a.zone.as_deref().map(|z| check_label("--zone", z)).transpose().map_err(UsageError)?;
        let sources = discovery::parse(&a.peers, listen.port().max(1))?;
        if sources.is_empty() {
            return Err(UsageError("no peers: give --peers (a list, file:, dns: or k8s:)".into()));
        }
        let kube =
            if sources.iter().any(|s| matches!(s, Source::Kubernetes(_))) { Some(a.kube.access()?) } else { None };
        let mut protos = Vec::new();
        for p in &a.proto {
            match Proto::parse(p.trim()) {
                Some(p @ (Proto::Udp | Proto::Tcp)) if !protos.contains(&p) => protos.push(p),
                _ => return Err(UsageError(format!("--proto '{p}': expected udp, tcp or udp,tcp"))),
            }
        }
        let (window, timeout) = (a.window.0, a.timeout.0);
        if timeout < Duration::from_millis(1) || timeout.as_nanos() > u128::from(MAX_TIMEOUT_NS) {
            return Err(UsageError("--timeout must be between 1ms and 4s".into()));
        }
        if window < Duration::from_millis(100) || window < 2 * timeout || window > Duration::from_secs(3600) {
            return Err(UsageError("--window must be at least 100ms and twice --timeout, at most 1h".into()));
        }
        if a.refresh.0 < Duration::from_secs(1) {
            return Err(UsageError("--refresh must be at least 1s".into()));
        }
        if a.full_mesh_max.0 < 2 {
            return Err(UsageError("--full-mesh-max must be at least 2".into()));
        }
        if a.rate.per_sec() > 1000.0 || a.budget.per_sec() > 100_000.0 || a.multicast_rate.per_sec() > 1000.0 {
            return Err(UsageError("--rate and --multicast-rate at most 1000/s, --budget at most 100k/s".into()));
        }
        if a.multicast.is_some_and(|g| !g.ip().is_multicast()) {
            return Err(UsageError("--multicast needs a group in 224.0.0.0/4".into()));
        }
        let interface = a.mcast.interface.ipv4()?;
        let stall_meter = match (a.hiccup.no_hiccup, a.hiccup.hiccup_interval) {
            (true, _) => StallMeter::Off,
            (false, None) => StallMeter::Prober,
            (false, Some(span)) => {
                let i = crate::stall::checked_interval("--hiccup-interval", span)?;
                // The meter records one window at a time: a window must hold its wake-ups.
                if u128::from(i) * 10 > window.as_nanos() {
                    return Err(UsageError("--hiccup-interval must be at most a tenth of --window".into()));
                }
                StallMeter::Thread(i)
            }
        };
        Ok(Self {
            stall_meter,
            listen,
            http,
            advertise,
            name,
            zone,
            sources,
            refresh: a.refresh.0,
            kube,
            plan: PlanConfig {
                rate: a.rate.per_sec(),
                budget: a.budget.per_sec(),
                #[expect(clippy::cast_possible_truncation, reason = "at most 2")]
                transports: protos.len() as u32,
                full_mesh_max: a.full_mesh_max.as_usize(),
                inter_zone: a.inter_zone.as_usize(),
            },
            protos,
            window,
            timeout,
            multicast: a.multicast,
            multicast_rate: a.multicast_rate.per_sec(),
            interface,
            ttl: a.mcast.ttl,
            token: a.token.read()?,
            salt: a.salt.read()?,
            stamp: a.stamp.config(listen.ip())?,
            stamp_peer_key: stamp_peer_key(a)?,
        })
    }
}

/// `--stamp-peer-key` or `--stamp-peer-key-file`.
fn stamp_peer_key(a: &AgentArgs) -> Result<Option<wirebench_core::wire::stamp::Key>, UsageError> {
    crate::stamp::key_of(a.stamp_peer_key.as_deref(), a.stamp_peer_key_file.as_deref(), "stamp-peer-key")
}

/// `wirebench mesh status` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Agents' HTTP URLs (http://HOST:9878) to pull the latest window from.
    #[arg(value_name = "AGENT_URL")]
    pub agents: Vec<String>,
    /// Read the matrix from this Prometheus server (http://HOST:9090) instead.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// Token for the agents' API (or Prometheus, if it wants one).
    #[arg(long, env = "WIREBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the token from this file.
    #[arg(long, env = "WIREBENCH_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// A cell is bad past this loss, in percent.
    #[arg(long, default_value_t = 1.0)]
    pub max_loss: f64,
    /// A cell is bad past this p99.
    #[arg(long, default_value = "10ms")]
    pub max_p99: Span,
    /// Fewer probes than this in a cell: not judged.
    #[arg(long, default_value = "5")]
    pub min_probes: wirebench_core::units::Count,
    /// Save the matrix (a wirebench report: `wirebench report FILE --html` draws it).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Colour the heatmap: auto (on a terminal), always, never.
    #[arg(long, default_value = "auto")]
    pub color: String,
    /// Longest wait for each agent (or Prometheus).
    #[arg(long, default_value = "5s")]
    pub timeout: Span,
    /// Most the merged matrix may hold (each cell's histogram text and its bookkeeping);
    /// agents past it are named skipped.
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub max_matrix: ByteSize,
}

/// A validated status configuration.
#[derive(Debug, Clone)]
pub struct StatusConfig {
    /// Agents' base URLs.
    pub agents: Vec<hyper::Uri>,
    /// Or Prometheus.
    pub prometheus: Option<hyper::Uri>,
    /// Token.
    pub token: Option<String>,
    /// Verdict thresholds.
    pub thresholds: Thresholds,
    /// Output file.
    pub json: Option<PathBuf>,
    /// Colour: `None` for auto.
    pub color: Option<bool>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Bytes the merged matrix may hold.
    pub max_matrix: usize,
}

fn base_url(s: &str) -> Result<hyper::Uri, UsageError> {
    let with_scheme = if s.contains("://") { s.to_owned() } else { format!("http://{s}") };
    let u: hyper::Uri = with_scheme.parse().map_err(|_| UsageError(format!("'{s}' is not a URL")))?;
    if u.scheme_str() != Some("http") || u.host().is_none() {
        return Err(UsageError(format!("'{s}': expected http://HOST:PORT")));
    }
    Ok(u)
}

impl StatusConfig {
    /// Validates `a`.
    pub fn from_args(a: &StatusArgs) -> Result<Self, UsageError> {
        if a.agents.is_empty() == a.prometheus.is_none() {
            return Err(UsageError("give agent URLs or --prometheus URL (one of the two)".into()));
        }
        if a.agents.len() > wirebench_core::mesh::peer::MAX_PEERS {
            return Err(UsageError("too many agents".into()));
        }
        if !(0.0..=100.0).contains(&a.max_loss) {
            return Err(UsageError("--max-loss is a percentage, 0 to 100".into()));
        }
        let color = match a.color.as_str() {
            "auto" => None,
            "always" => Some(true),
            "never" => Some(false),
            o => return Err(UsageError(format!("--color '{o}': auto, always or never"))),
        };
        if a.timeout.0 < Duration::from_millis(1) || a.timeout.0 > Duration::from_secs(300) {
            return Err(UsageError("--timeout must be between 1ms and 5m".into()));
        }
        let max_matrix = usize::try_from(a.max_matrix.0).unwrap_or(usize::MAX);
        if max_matrix < 1024 {
            return Err(UsageError("--max-matrix must be at least 1KiB".into()));
        }
        Ok(Self {
            agents: a.agents.iter().map(|s| base_url(s)).collect::<Result<_, _>>()?,
            prometheus: a.prometheus.as_deref().map(base_url).transpose()?,
            token: crate::auth::read(a.token.as_ref(), a.token_file.as_ref())?,
            thresholds: Thresholds {
                max_loss: a.max_loss / 100.0,
                max_p99_ns: nanos(a.max_p99.0),
                min_probes: a.min_probes.0,
            },
            json: a.json.clone(),
            color,
            timeout: a.timeout.0,
            max_matrix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(args: &[&str]) -> Result<AgentConfig, UsageError> {
        AgentConfig::from_args(&crate::flags::parse_mode::<AgentArgs>("agent", args).unwrap())
    }

    #[test]
    fn agent_defaults_and_derived_values() {
        let c = agent(&["--peers", "10.0.0.1,10.0.0.2:7000", "--listen", "10.0.0.9:7878", "--name", "n9"]).unwrap();
        assert_eq!(c.advertise, Some("10.0.0.9:7878".parse().unwrap()));
        assert_eq!(c.protos, vec![Proto::Udp, Proto::Tcp]);
        assert_eq!(c.plan, PlanConfig { rate: 2.0, budget: 100.0, transports: 2, full_mesh_max: 200, inter_zone: 3 });
        assert_eq!((c.window, c.timeout), (Duration::from_secs(60), Duration::from_secs(1)));
        assert_eq!(c.name, "n9");
        // an always-on agent's stall samples are its prober's own wake-ups (no meter thread)
        assert_eq!(c.stall_meter, StallMeter::Prober);
        assert!(c.token.is_none() && c.kube.is_none());
        let c = agent(&["--peers", "a.example", "--proto", "tcp", "--advertise", "10.1.1.1"]).unwrap();
        assert_eq!((c.protos.as_slice(), c.plan.transports), ([Proto::Tcp].as_slice(), 1));
        assert_eq!(c.advertise, Some("10.1.1.1:7878".parse().unwrap()));
    }

    #[test]
    fn an_explicit_hiccup_interval_keeps_the_meter_thread_and_no_hiccup_wins() {
        let c = agent(&["--peers", "x", "--hiccup-interval", "10ms"]).unwrap();
        assert_eq!(c.stall_meter, StallMeter::Thread(10_000_000));
        let c = agent(&["--peers", "x", "--hiccup-interval", "2ms", "--no-hiccup"]).unwrap();
        assert_eq!(c.stall_meter, StallMeter::Off);
        assert!(agent(&["--peers", "x", "--hiccup-interval", "5us"]).is_err(), "below 10us");
    }

    #[test]
    fn agent_refuses_bad_settings() {
        for args in [
            &["--listen", "10.0.0.1:7878"][..],
            &["--peers", "x", "--proto", "sctp"],
            &["--peers", "x", "--window", "1s", "--timeout", "800ms"],
            &["--peers", "x", "--timeout", "5s", "--window", "1m"],
            &["--peers", "x", "--multicast", "10.0.0.1:5000"],
            &["--peers", "x", "--name", "bad name"],
            &["--peers", "x", "--token", ""],
            &["--peers", "x", "--rate", "5000/s"],
            &["--peers", "k8s:ns/svc", "--k8s-api", "http://insecure"],
            // a stall-meter interval that a window cannot hold (its thread would find no
            // wake-up in a window, over and over)
            &["--peers", "x", "--window", "500ms", "--timeout", "100ms", "--hiccup-interval", "100ms"],
        ] {
            assert!(agent(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn status_needs_one_source() {
        let st =
            |args: &[&str]| StatusConfig::from_args(&crate::flags::parse_mode::<StatusArgs>("status", args).unwrap());
        assert!(st(&[]).is_err());
        assert!(st(&["http://a:1", "--prometheus", "http://p:9090"]).is_err());
        let c = st(&["10.0.0.1:9878", "--max-loss", "2", "--max-p99", "5ms"]).unwrap();
        assert_eq!(c.agents[0].to_string(), "http://10.0.0.1:9878/");
        assert!((c.thresholds.max_loss - 0.02).abs() < 1e-12 && c.thresholds.max_p99_ns == 5_000_000);
        assert!(st(&["https://a:1"]).is_err(), "agents speak plain HTTP");
        assert!(st(&["a:1", "--color", "sometimes"]).is_err());
    }
}
