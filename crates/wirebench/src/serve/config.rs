//! `serve`'s flags and its validated configuration: where it listens, and the budget it keeps
//! to whatever its clients do (`docs/security.md` lists every figure).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use wirebench_core::auth::Key;
use wirebench_core::budget::{Budget, SendLimits};
use wirebench_core::units::{ByteSize, Count, Span, StreamRate};

use crate::error::UsageError;

/// Default cap on what serve sends for one anonymous session (all publishers together).
pub const ANON_MAX_RATE: &str = "100mbit";
/// Default: sessions at once.
pub const MAX_SESSIONS: u32 = 64;
/// Default: sessions at once from one source address.
pub const MAX_SESSIONS_PER_SOURCE: u32 = 16;
/// Default TCP connections at once from one source address.
pub const MAX_CONNECTIONS_PER_SOURCE: u64 = 64;
/// Default: bytes all sessions together may hold, MiB.
pub const MEMORY_BUDGET_MIB: u64 = 256;
/// Default: TCP connections at once (lowered to fit the open-file limit).
pub const MAX_CONNECTIONS: u64 = 1024;
/// A probe connection that sends no frame for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// A new connection's first frame (and a control connection's `start`) must arrive within this.
pub const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// `wirebench serve` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("spin", |a| a.help("Busy-poll instead of blocking (lowest latency; a core per active socket)")),
    mut_arg("cpu", |a| a.help("Pin the serving threads to this CPU"))
)]
pub struct Args {
    /// Address for UDP and TCP (both on the same port).
    #[arg(long, default_value = "0.0.0.0:7878", env = "WIREBENCH_LISTEN")]
    pub listen: String,
    /// Join this multicast group:port and answer probes sent to it (repeatable).
    #[arg(long = "join", value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub join: Vec<SocketAddrV4>,
    /// Answer probes that ask for it on this group (Aeron's pong channel) instead of unicast.
    #[arg(long, value_name = "GROUP:PORT", value_parser = crate::addr::group_port)]
    pub reply_group: Option<SocketAddrV4>,
    /// The interface for group joins and group replies, and the replies' TTL.
    #[command(flatten)]
    pub mcast: crate::flags::MulticastArgs,
    /// Busy-poll and the CPU the serving threads run on.
    #[command(flatten)]
    pub pin: crate::flags::PinArgs,
    /// Streams need the token, proved by an HMAC challenge-response (never sent); the probe
    /// echo stays open. Clients give it with `--token` or WIREBENCH_TOKEN.
    #[command(flatten)]
    pub token: crate::auth::TokenArgs,
    /// The salt of the token's key, sent to clients in serve's challenge.
    #[command(flatten)]
    pub salt: crate::auth::SaltArg,
    /// Serve streams to anyone (no token) on a non-loopback address; the anonymous limits apply.
    #[arg(long)]
    pub open: bool,
    /// The longest a client may make this serve send (reverse streams).
    #[arg(long, default_value = "10m")]
    pub max_duration: Span,
    /// The fastest this serve sends for one session without a token, all publishers
    /// together, e.g. 1gbit or 100k/s ("max": no cap).
    #[arg(long, default_value = ANON_MAX_RATE)]
    pub max_rate: StreamRate,
    /// The same cap for a session that proved the token [default: no cap].
    #[arg(long)]
    pub max_rate_token: Option<StreamRate>,
    /// Stream sessions at once.
    #[arg(long, default_value_t = Count(MAX_SESSIONS.into()))]
    pub max_sessions: Count,
    /// Stream sessions at once from one source address.
    #[arg(long, default_value_t = Count(MAX_SESSIONS_PER_SOURCE.into()))]
    pub max_sessions_per_source: Count,
    /// Memory all stream sessions together may hold (buffers, accounting windows): 256MiB, 1GiB.
    #[arg(long, default_value_t = ByteSize(MEMORY_BUDGET_MIB << 20), value_name = "SIZE")]
    pub memory_budget: ByteSize,
    /// TCP connections at once (kept below the open-file limit).
    #[arg(long, default_value_t = Count(MAX_CONNECTIONS))]
    pub max_connections: Count,
    /// TCP connections at once from one source address (so one source cannot take the port).
    #[arg(long, default_value_t = Count(MAX_CONNECTIONS_PER_SOURCE))]
    pub max_connections_per_source: Count,
    /// Close a probe connection that sends nothing for this long.
    #[arg(long, default_value = "60s")]
    pub idle_timeout: Span,
    /// No kernel RX timestamps: a full-form probe's receive time is then read after the
    /// read returns, so pingers cannot take serve's own wake-up out of the round trip (off
    /// with --spin too: a busy-polling thread has no wake-up to take out).
    #[arg(long, help_heading = "Attribution")]
    pub no_timestamps: bool,
    /// The STAMP reflector.
    #[command(flatten)]
    pub stamp: crate::stamp::StampArgs,
}

/// A validated serve configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Groups to join.
    pub join: Vec<SocketAddrV4>,
    /// Interface address for joins and group replies.
    pub interface: Option<Ipv4Addr>,
    /// Reply group.
    pub reply_group: Option<SocketAddrV4>,
    /// TTL of group replies.
    pub ttl: u32,
    /// Busy-poll.
    pub spin: bool,
    /// Kernel RX timestamps on the UDP probe sockets.
    pub timestamps: bool,
    /// Pin.
    pub cpu: Option<usize>,
    /// Token stream clients must prove.
    pub token: Option<String>,
    /// Salt of the token's key ([`Key::derive`]), sent in serve's challenge.
    pub salt: String,
    /// A mesh agent's peers: a quarter of the TCP connections is kept for them, so strangers
    /// cannot take every place.
    pub known_sources: Option<crate::accept::Known>,
    /// Streams without a token even on a non-loopback address.
    pub open: bool,
    /// Cap on how long serve sends for a client.
    pub max_duration: Duration,
    /// Cap on how fast serve sends for one anonymous session (all publishers).
    pub max_rate: Option<StreamRate>,
    /// The same for a session that proved the token.
    pub max_rate_token: Option<StreamRate>,
    /// Sessions, per source, bytes.
    pub budget: Budget,
    /// TCP connections at once.
    pub max_connections: u64,
    /// TCP connections at once from one source address.
    pub max_connections_per_source: u64,
    /// Idle probe connections are closed after this.
    pub idle_timeout: Duration,
    /// A first frame must arrive within this.
    pub first_frame_timeout: Duration,
    /// Mesh agents: answer only probes whose tag this key verifies, and tag the replies
    /// (`wire::mesh`); others are counted `unauthenticated` and dropped.
    pub probe_key: Option<Key>,
    /// The STAMP reflector, when asked for.
    pub stamp: Option<crate::stamp::StampConfig>,
}

fn cap(r: Option<StreamRate>) -> Option<StreamRate> {
    r.filter(|r| *r != StreamRate::Max)
}

impl Config {
    /// Validates `a`.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        let listen = crate::addr::resolve(&a.listen)?;
        if let Some(g) = a.join.iter().chain(a.reply_group.iter()).find(|g| !g.ip().is_multicast()) {
            return Err(UsageError(format!("{g} is not a multicast group (224.0.0.0/4)")));
        }
        let interface = a.mcast.interface.ipv4()?;
        let cpu = a.pin.checked_cpu()?;
        let token = a.token.read()?;
        let salt = a.salt.read()?;
        if a.max_duration.0.is_zero() || a.idle_timeout.0.is_zero() {
            return Err(UsageError("--max-duration and --idle-timeout must be above 0".into()));
        }
        if a.max_sessions.0 == 0
            || a.max_sessions_per_source.0 == 0
            || a.max_connections.0 == 0
            || a.max_connections_per_source.0 == 0
        {
            return Err(UsageError(
                "--max-sessions, --max-sessions-per-source, --max-connections and --max-connections-per-source take 1 or more".into(),
            ));
        }
        if a.memory_budget.0 < 1 << 20 {
            // A bare number is bytes (docs/units.md); this flag once took MiB.
            return Err(UsageError(format!(
                "--memory-budget {} is below 1MiB: write a unit, e.g. {}MiB",
                a.memory_budget, a.memory_budget.0
            )));
        }
        Ok(Self {
            listen,
            join: a.join.clone(),
            interface,
            reply_group: a.reply_group,
            ttl: a.mcast.ttl,
            spin: a.pin.spin,
            timestamps: !a.no_timestamps && !a.pin.spin,
            cpu,
            token,
            salt,
            open: a.open,
            max_duration: a.max_duration.0,
            max_rate: cap(Some(a.max_rate)),
            max_rate_token: cap(a.max_rate_token),
            budget: Budget {
                sessions: u32::try_from(a.max_sessions.0).unwrap_or(u32::MAX),
                per_source: u32::try_from(a.max_sessions_per_source.0).unwrap_or(u32::MAX),
                bytes: a.memory_budget.0,
            },
            max_connections: a.max_connections.0,
            max_connections_per_source: a.max_connections_per_source.0,
            idle_timeout: a.idle_timeout.0,
            first_frame_timeout: FIRST_FRAME_TIMEOUT,
            probe_key: None,
            known_sources: None,
            stamp: a.stamp.config(listen.ip())?,
        })
    }

    /// A loopback config on an ephemeral port, as tests and the suite use: the defaults,
    /// except that the suite's own reverse runs are not rate-capped.
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            join: Vec::new(),
            interface: None,
            reply_group: None,
            ttl: 32,
            spin: false,
            timestamps: true,
            cpu: None,
            token: None,
            salt: wirebench_core::auth::DEFAULT_SALT.to_owned(),
            open: false,
            max_duration: Duration::from_secs(600),
            max_rate: None,
            max_rate_token: None,
            budget: Budget {
                sessions: MAX_SESSIONS,
                per_source: MAX_SESSIONS_PER_SOURCE,
                bytes: MEMORY_BUDGET_MIB << 20,
            },
            max_connections: MAX_CONNECTIONS,
            max_connections_per_source: MAX_CONNECTIONS_PER_SOURCE,
            idle_timeout: IDLE_TIMEOUT,
            first_frame_timeout: FIRST_FRAME_TIMEOUT,
            probe_key: None,
            known_sources: None,
            stamp: None,
        }
    }

    /// Whether stream sessions are served at all: with a token, with `--open`, or on a
    /// loopback address (nobody else can reach it).
    pub fn streams_allowed(&self) -> bool {
        self.token.is_some() || self.open || self.listen.ip().is_loopback()
    }

    /// The key of the token, if any, hardened with serve's salt (derived once, at start).
    pub fn key(&self) -> Option<Key> {
        self.token.as_deref().map(|t| Key::derive(t.as_bytes(), self.salt.as_bytes()))
    }

    /// The send limits of a session, authenticated or not, for messages of `size` bytes.
    pub fn send_limits(&self, authenticated: bool, size: usize) -> SendLimits {
        let rate = if authenticated { self.max_rate_token } else { self.max_rate };
        #[expect(clippy::cast_precision_loss, reason = "sizes are far below 2^52")]
        let bits = rate.and_then(|r| r.per_sec(size)).map(|per_s| per_s * 8.0 * size as f64);
        SendLimits { max_bits_per_s: bits, max_duration: self.max_duration }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Config {
        let a: Args = crate::flags::parse_mode("serve", args).expect("flags parse");
        Config::from_args(&a).expect("a valid config")
    }

    /// Kernel RX timestamps are on unless asked off, and off with busy-poll (a spinning
    /// thread has no wake-up for them to take out, and reading them costs every probe).
    #[test]
    fn kernel_timestamps_are_on_unless_asked_off_or_busy_polling() {
        let l = ["--listen", "127.0.0.1:0"];
        assert!(cfg(&l).timestamps);
        assert!(!cfg(&[&l[..], &["--no-timestamps"]].concat()).timestamps);
        assert!(!cfg(&[&l[..], &["--spin"]].concat()).timestamps);
        assert!(Config::loopback().timestamps);
    }
}
