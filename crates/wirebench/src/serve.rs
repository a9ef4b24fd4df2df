//! `wirebench serve`: the far end. Echoes latency probes on UDP and TCP on one port.
//!
//! Method: a probe is checked (magic, version, kind, declared length) and turned into its
//! reply in place: the kind byte changes and, for probes of 48 bytes or more, the receive
//! time t2 (taken right after `recvfrom` returns) and the send time t3 (taken right before
//! `sendto`) are written on this host's wall clock. A reply is exactly as long as its probe
//! (no amplification) and goes back to the probe's source, or, when the probe asks for it
//! and the operator configured one, to the reply group. Anything else is counted and dropped.
//!
//! Threads: one per UDP socket (the main port and each group on another port), one TCP
//! acceptor, one per TCP connection. Each blocks in the kernel, or busy-polls with
//! `--spin`; a busy-polling thread that has been idle for 50 ms sleeps in `ppoll` until
//! traffic returns (`serve/spin.rs`), so an idle `serve --spin` does not burn a core.

mod spin;
mod stream;
mod tcp;
mod udp;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use anyhow::Context as _;
use serde::Serialize;
use wirebench_core::units::{Span, StreamRate};
use wirebench_core::wire::DecodeError;
use wirebench_net::multicast;

use crate::Ctx;
use crate::error::UsageError;
use crate::shutdown::Shutdown;

/// Default port for control and data.
pub const DEFAULT_PORT: u16 = 7878;
/// At most this many TCP connections at once; more are closed on accept.
pub const MAX_TCP_CONNECTIONS: u64 = 1024;

/// `wirebench serve` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address for UDP and TCP (both on the same port).
    #[arg(long, default_value = "0.0.0.0:7878", env = "WIREBENCH_LISTEN")]
    pub listen: String,
    /// Join this multicast group:port and answer probes sent to it (repeatable).
    #[arg(long = "join", value_name = "GROUP:PORT")]
    pub join: Vec<SocketAddrV4>,
    /// Interface (name or IPv4 address) for group joins and group replies.
    #[arg(long, env = "WIREBENCH_INTERFACE")]
    pub interface: Option<String>,
    /// Answer probes that ask for it on this group (Aeron's pong channel) instead of unicast.
    #[arg(long, value_name = "GROUP:PORT")]
    pub reply_group: Option<SocketAddrV4>,
    /// Multicast TTL of group replies.
    #[arg(long, default_value_t = 32, env = "WIREBENCH_TTL")]
    pub ttl: u32,
    /// Busy-poll instead of blocking (lowest latency; a core per active socket).
    #[arg(long)]
    pub spin: bool,
    /// Pin the serving threads to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Require this token from stream clients (the probe echo stays open).
    #[arg(long, env = "WIREBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The longest a client may make this serve send (reverse streams).
    #[arg(long, default_value = "10m")]
    pub max_duration: Span,
    /// The fastest a client may make this serve send, e.g. 1gbit or 100k/s [default: no cap].
    #[arg(long)]
    pub max_rate: Option<StreamRate>,
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
    /// Pin.
    pub cpu: Option<usize>,
    /// Token stream clients must present.
    pub token: Option<String>,
    /// Cap on how long serve sends for a client.
    pub max_duration: std::time::Duration,
    /// Cap on how fast serve sends for a client (converted to messages per second at each
    /// request's message size).
    pub max_rate: Option<StreamRate>,
}

impl Config {
    /// Validates `a`.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        let listen = crate::ping::resolve(&a.listen)?;
        if let Some(g) = a.join.iter().chain(a.reply_group.iter()).find(|g| !g.ip().is_multicast()) {
            return Err(UsageError(format!("{g} is not a multicast group (224.0.0.0/4)")));
        }
        let interface = a
            .interface
            .as_deref()
            .map(wirebench_net::iface::ipv4_of)
            .transpose()
            .map_err(|e| UsageError(e.to_string()))?;
        if let Some(c) = a.cpu
            && c >= wirebench_net::pin::cpu_count()
        {
            return Err(UsageError(format!("--cpu {c}: this host has {} CPUs", wirebench_net::pin::cpu_count())));
        }
        Ok(Self {
            listen,
            join: a.join.clone(),
            interface,
            reply_group: a.reply_group,
            ttl: a.ttl,
            spin: a.spin,
            cpu: a.cpu,
            token: a.token.clone(),
            max_duration: a.max_duration.0,
            max_rate: a.max_rate.filter(|r| *r != StreamRate::Max),
        })
    }

    /// A loopback config on an ephemeral port, as tests and the suite use.
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            join: Vec::new(),
            interface: None,
            reply_group: None,
            ttl: 32,
            spin: false,
            cpu: None,
            token: None,
            max_duration: std::time::Duration::from_secs(600),
            max_rate: None,
        }
    }
}

/// What serve counted. Every datagram or frame lands in exactly one field.
#[derive(Debug, Default)]
pub struct Counters {
    /// UDP probes answered.
    pub udp_probes: AtomicU64,
    /// TCP probes answered.
    pub tcp_probes: AtomicU64,
    /// TCP connections accepted.
    pub tcp_connections: AtomicU64,
    /// Too short, or a length field that disagrees.
    pub malformed: AtomicU64,
    /// Not ours (wrong magic).
    pub foreign: AtomicU64,
    /// Ours, another wire version.
    pub bad_version: AtomicU64,
    /// Ours, but not a probe (a reply, or an unknown kind): never answered.
    pub unexpected_kind: AtomicU64,
    /// Replies the kernel would not send.
    pub send_errors: AtomicU64,
    /// Stream sessions served.
    pub streams: AtomicU64,
    /// Control connections refused or broken (bad first frame, bad request, a client gone).
    pub control_errors: AtomicU64,
}

impl Counters {
    fn rejected(&self, e: DecodeError) {
        let c = match e {
            DecodeError::Truncated { .. } | DecodeError::Length { .. } => &self.malformed,
            DecodeError::Foreign(_) => &self.foreign,
            DecodeError::Version(_) => &self.bad_version,
            DecodeError::Kind(_) => &self.unexpected_kind,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A plain copy.
    pub fn snapshot(&self) -> CounterSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            udp_probes: g(&self.udp_probes),
            tcp_probes: g(&self.tcp_probes),
            tcp_connections: g(&self.tcp_connections),
            malformed: g(&self.malformed),
            foreign: g(&self.foreign),
            bad_version: g(&self.bad_version),
            unexpected_kind: g(&self.unexpected_kind),
            send_errors: g(&self.send_errors),
            streams: g(&self.streams),
            control_errors: g(&self.control_errors),
        }
    }
}

/// A copy of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CounterSnapshot {
    /// UDP probes answered.
    pub udp_probes: u64,
    /// TCP probes answered.
    pub tcp_probes: u64,
    /// TCP connections accepted.
    pub tcp_connections: u64,
    /// Too short or inconsistent.
    pub malformed: u64,
    /// Not ours.
    pub foreign: u64,
    /// Another wire version.
    pub bad_version: u64,
    /// Not a probe.
    pub unexpected_kind: u64,
    /// Replies not sent.
    pub send_errors: u64,
    /// Stream sessions.
    pub streams: u64,
    /// Control errors.
    pub control_errors: u64,
}

impl std::fmt::Display for CounterSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "answered {} udp + {} tcp probes on {} tcp connections; dropped {} malformed, {} foreign, {} other-version, {} not-a-probe; {} send errors; {} streams, {} control errors",
            self.udp_probes,
            self.tcp_probes,
            self.tcp_connections,
            self.malformed,
            self.foreign,
            self.bad_version,
            self.unexpected_kind,
            self.send_errors,
            self.streams,
            self.control_errors
        )
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    shutdown: Shutdown,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Binds every socket (errors here are the user's to fix) and starts the threads.
    pub fn start(cfg: &Config, shutdown: Shutdown) -> anyhow::Result<Self> {
        let (udp, tcp) = bind_pair(cfg.listen)?;
        let addr = udp.local_addr()?;
        let counters = Arc::new(Counters::default());
        let mut sockets = vec![udp];
        for g in &cfg.join {
            if g.port() == addr.port() && addr.ip().is_unspecified() {
                multicast::join(&sockets[0], *g, cfg.interface)?;
            } else {
                sockets.push(multicast::group_receiver(*g, cfg.interface)?);
            }
        }
        if let Some(rg) = cfg.reply_group {
            let opts = multicast::SenderOpts { interface: cfg.interface, ttl: cfg.ttl, loopback: true };
            for s in &sockets {
                multicast::set_sender(s, rg.into(), &opts)?;
            }
        }
        let unicast = sockets[0].try_clone()?;
        let mut threads = Vec::new();
        for (i, s) in sockets.into_iter().enumerate() {
            // Group sockets (all but the first) answer from the unicast socket.
            let reply_from = if i == 0 { None } else { Some(unicast.try_clone()?) };
            let w = udp::Worker {
                sock: s,
                reply_from,
                cfg: cfg.clone(),
                counters: counters.clone(),
                shutdown: shutdown.clone(),
            };
            threads.push(std::thread::Builder::new().name("serve-udp".into()).spawn(move || w.run())?);
        }
        let acc =
            tcp::Acceptor { listener: tcp, cfg: cfg.clone(), counters: counters.clone(), shutdown: shutdown.clone() };
        threads.push(std::thread::Builder::new().name("serve-tcp".into()).spawn(move || acc.run())?);
        Ok(Self { addr, counters, shutdown, threads })
    }

    /// The bound address (with the real port when the config asked for port 0).
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters so far.
    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// Stops every thread and returns the final counters.
    pub fn stop(mut self) -> CounterSnapshot {
        self.shutdown.trigger();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.counters.snapshot()
    }

    /// Waits until the shutdown signal is set elsewhere (Ctrl-C), then stops.
    pub fn wait(self) -> CounterSnapshot {
        while !self.shutdown.is_set() {
            std::thread::park_timeout(crate::shutdown::POLL);
        }
        self.stop()
    }
}

/// Binds UDP and TCP on the same port. With port 0 the kernel picks the UDP port, which a
/// TCP socket (a busy host's outgoing connection) may already hold: then try another.
fn bind_pair(listen: SocketAddr) -> anyhow::Result<(UdpSocket, TcpListener)> {
    const TRIES: usize = 32;
    for _ in 0..TRIES {
        let udp = UdpSocket::bind(listen).with_context(|| format!("cannot bind udp {listen}"))?;
        let addr = udp.local_addr()?;
        match TcpListener::bind(addr) {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if listen.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse => {}
            Err(e) => return Err(e).with_context(|| format!("cannot bind tcp {addr}")),
        }
    }
    anyhow::bail!("no port free for both udp and tcp on {} after {TRIES} tries", listen.ip())
}

/// `wirebench serve`: runs until Ctrl-C, then prints the counters.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<CounterSnapshot> {
    let cfg = Config::from_args(args)?;
    let server = Server::start(&cfg, ctx.shutdown.clone())?;
    let groups: Vec<String> = cfg.join.iter().map(ToString::to_string).collect();
    writeln!(
        ctx.out,
        "wirebench serve: listening on udp+tcp {}{}{} (Ctrl-C to stop)",
        server.local_addr(),
        if groups.is_empty() { String::new() } else { format!(", groups {}", groups.join(", ")) },
        if cfg.spin { ", busy-poll" } else { "" }
    )?;
    ctx.out.flush()?;
    let c = server.wait();
    writeln!(ctx.out, "wirebench serve: {c}")?;
    Ok(c)
}
