//! `wirebench room`: a reference WebSocket room server, the stand-in for the application
//! under `wirebench load`.
//!
//! Protocol: a client connects to `ws://HOST:PORT/rooms/NAME` (any path names a room).
//! Every text or binary message goes to every other member of the room, unchanged. A
//! message whose top-level JSON object says `"req": true` is a request: it is answered to
//! the sender only (the message itself comes back as the reply) and is not relayed. The
//! server costs little per message (it must never be the bottleneck of a load test) and
//! measures its own CPU (getrusage) to show that it was not.
//!
//! Limits (a far end on a real network): a connection cap below the open-file limit, a
//! handshake timeout (and at the cap the oldest unfinished handshake makes room), an idle
//! timeout with pings, a message and frame cap (close 1009 past it), a byte budget per
//! member's queue and for all queues together (a member past it is dropped with close
//! 1013), HTTP 400 or 426 for requests that are not WebSocket upgrades, and a back-off when
//! accept fails for lack of descriptors. The memory budget follows from the limits:
//! [`wirebench_core::room::Limits::budget_bytes`].
//!
//! Runtime: tokio, two worker threads, one task per connection; a room is a list of its
//! members' queues, locked only while a relay is queued.

pub mod accept;
mod conn;
mod refuse;
mod rooms;
mod server;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
pub use server::{Counters, RoomServer};
use wirebench_core::room::Limits;
use wirebench_core::units::{ByteSize, Span};

use crate::ctx::Ctx;
use crate::error::UsageError;

/// Descriptors the room keeps beside its connections (stdio, runtime, evictions in flight).
pub const SPARE_FDS: u64 = 64 + accept::EVICTING;

/// `wirebench room` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080", env = "WIREBENCH_ROOM_LISTEN")]
    pub listen: String,
    /// Print the counters this often while anything happens (0s: only at the end).
    #[arg(long, default_value = "1s")]
    pub interval: Span,
    /// Open connections at most [default: 10000, or the open-file limit less 96].
    #[arg(long)]
    pub max_connections: Option<wirebench_core::units::Count>,
    /// Largest message (and frame) a client may send; larger ones close it with 1009.
    #[arg(long, default_value = "16KiB")]
    pub max_message: ByteSize,
    /// Bytes queued for one member before it is dropped with close 1013.
    #[arg(long, default_value = "256KiB")]
    pub member_backlog: ByteSize,
    /// Bytes queued for all members together; a relay past it drops its receiver (1013).
    #[arg(long, default_value = "64MiB")]
    pub max_backlog: ByteSize,
    /// A connection must finish its WebSocket handshake within this.
    #[arg(long, default_value = "5s")]
    pub handshake_timeout: Span,
    /// A member that sends nothing (not even a pong to the pings after half of it) for this
    /// long is closed with 1001.
    #[arg(long, default_value = "60s")]
    pub idle_timeout: Span,

    // -- wss://
    /// Serve wss://: the certificate chain, PEM (with --tls-key). The TLS handshake counts
    /// against --handshake-timeout.
    #[arg(long, value_name = "FILE.pem", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE.pem", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

/// A validated room configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Print interval (`None`: only at the end).
    pub interval: Option<Duration>,
    /// Connection, message and queue limits.
    pub limits: Limits,
    /// Handshake deadline.
    pub handshake_timeout: Duration,
    /// Idle deadline (pings after half of it).
    pub idle_timeout: Duration,
    /// A write that does not finish in this long closes the member (it does not read).
    pub write_timeout: Duration,
}

/// What TLS adds to a connection's memory at most: rustls's buffer of unsent TLS records
/// (its default limit, 64 KiB), one record being read (16 KiB of data plus its header and
/// tag, about 18 KiB), decrypted data not yet taken (its default limit, 16 KiB) and the
/// session's state (about 4 KiB).
pub const TLS_BYTES_PER_CONNECTION: u64 = (64 + 18 + 16 + 4) << 10;

/// The default connection cap, when the open-file limit allows it.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 10_000;

impl Config {
    /// Args to Config; `nofile` is the open-file soft limit (after raising it).
    pub fn from_args(a: &Args, nofile: u64) -> Result<Self, UsageError> {
        // A name resolves, as serve's --listen does (`localhost:8080`).
        let listen = crate::addr::resolve(&a.listen).map_err(|e| UsageError(format!("--listen: {}", e.0)))?;
        let fit = nofile.saturating_sub(SPARE_FDS);
        let max_connections = match a.max_connections.map(|c| c.0) {
            Some(0) => return Err(UsageError("--max-connections must be at least 1".into())),
            Some(n) if n > fit => {
                return Err(UsageError(format!(
                    "--max-connections {n}: this process may open {nofile} files, so at most {fit} connections \
                     ({SPARE_FDS} descriptors stay spare)"
                )));
            }
            Some(n) => n,
            None => DEFAULT_MAX_CONNECTIONS.min(fit).max(1),
        };
        let (max_message, member_backlog, total_backlog) = (a.max_message.0, a.member_backlog.0, a.max_backlog.0);
        if !(16..=(64 << 20)).contains(&max_message) {
            return Err(UsageError("--max-message must be between 16B and 64MiB".into()));
        }
        if member_backlog < max_message || total_backlog < member_backlog {
            return Err(UsageError(
                "--member-backlog must hold one message (at least --max-message) and --max-backlog one member's".into(),
            ));
        }
        let positive = |s: Span, flag: &str| {
            if s.0.is_zero() { Err(UsageError(format!("{flag} must be above 0"))) } else { Ok(s.0) }
        };
        Ok(Self {
            listen,
            interval: (!a.interval.0.is_zero()).then_some(a.interval.0),
            limits: Limits { max_connections, max_message, member_backlog, total_backlog },
            handshake_timeout: positive(a.handshake_timeout, "--handshake-timeout")?,
            idle_timeout: positive(a.idle_timeout, "--idle-timeout")?,
            write_timeout: Duration::from_secs(10),
        })
    }

    /// 127.0.0.1 on an ephemeral port, no printing, the default limits with 4,096
    /// connections (tests and the suite).
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            interval: None,
            limits: Limits {
                max_connections: 4_096,
                max_message: 16 << 10,
                member_backlog: 256 << 10,
                total_backlog: 64 << 20,
            },
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// Runs until Ctrl-C, printing counters each interval; returns the final counters.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Counters> {
    let nofile = crate::limits::raise_nofile();
    let cfg = Config::from_args(args, nofile)?;
    // -- wss://
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::server_config(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "wss" } else { "ws" };
    let server = RoomServer::start_tls(&cfg, tls).with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let l = &cfg.limits;
    writeln!(ctx.out, "wirebench room: {scheme}://{}/rooms/NAME (Ctrl-C to stop)", server.local_addr())?;
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let mb = l.budget_bytes() as f64 / 1e6;
    writeln!(
        ctx.out,
        "limits: {} connections, messages up to {}, {} queued per member, {} in all, handshake {}, idle {}: at most {mb:.0} MB",
        l.max_connections,
        ByteSize(l.max_message),
        ByteSize(l.member_backlog),
        ByteSize(l.total_backlog),
        Span(cfg.handshake_timeout),
        Span(cfg.idle_timeout),
    )?;
    // -- wss://
    if scheme == "wss" {
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let tls_mb = l.max_connections as f64 * TLS_BYTES_PER_CONNECTION as f64 / 1e6;
        writeln!(
            ctx.out,
            "tls: rustls adds up to {} per connection (records being read and sent), {tls_mb:.0} MB more at the cap",
            ByteSize(TLS_BYTES_PER_CONNECTION)
        )?;
    }
    let t0 = Instant::now();
    let mut last = server.counters();
    let mut last_t = t0;
    while !ctx.shutdown.is_set() {
        std::thread::sleep(crate::shutdown::POLL);
        if let Some(every) = cfg.interval
            && last_t.elapsed() >= every
        {
            let now = server.counters();
            let dt = last_t.elapsed().as_secs_f64();
            if now.moved_since(&last) {
                writeln!(ctx.out, "{}", now.rates_since(&last, dt))?;
            }
            (last, last_t) = (now, Instant::now());
        }
    }
    let end = server.stop();
    writeln!(ctx.out, "room: {} over {:.1}s", end.totals(t0.elapsed()), t0.elapsed().as_secs_f64())?;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::{Args, Config};

    #[test]
    fn an_idle_interval_is_not_a_line() {
        use super::server::Counters;
        let idle = Counters { open: 3, rooms: 1, cpu_ns: 1_000, ..Counters::default() };
        assert!(!Counters { cpu_ns: 2_000, ..idle }.moved_since(&idle), "only the CPU clock moved");
        assert!(Counters { received: 1, ..idle }.moved_since(&idle));
        assert!(Counters { open: 2, ..idle }.moved_since(&idle), "a member left");
        assert!(Counters { refused_full: 1, ..idle }.moved_since(&idle));
    }

    #[test]
    fn listen_takes_a_name() {
        let a: Args = crate::flags::parse_mode("room", &["--listen", "localhost:0"]).unwrap();
        let c = Config::from_args(&a, 1024).unwrap();
        assert!(c.listen.ip().is_loopback(), "{}", c.listen);
        let a: Args = crate::flags::parse_mode("room", &["--listen", "8080"]).unwrap();
        assert!(Config::from_args(&a, 1024).unwrap_err().0.contains("expected host:port"));
    }
}
