//! `wirebench mesh agent`: a serve (the same one `wirebench serve` runs, in-process, with a
//! probe key when a token is set) that also probes its peers ([`super::prober`]), finds them
//! ([`crate::discovery`]), and answers HTTP ([`super::http`]).
//!
//! Threads: serve's own, the prober, a one-worker tokio runtime for HTTP and discovery, and
//! with `--hiccup-interval` a stall meter thread (by default the prober's own send-slot
//! wake-ups are the stall samples, `prober::stalls`: no thread, no wake-ups of their own);
//! the main thread sleeps in [`Agent::wait`] until the stop signal wakes it.
//! SIGINT/SIGTERM set the stop flag: the prober stops sending, serve answers what is in
//! flight and stops, HTTP connections close; the process exits 0 within a second.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use wirebench_core::units::nanos;

use anyhow::Context as _;
use wirebench_core::auth::Key;
use wirebench_core::mesh::api::NodeRef;

use super::config::{AgentArgs, AgentConfig, StallMeter};
use super::http::{self, Api};
use super::prober::{self, Group, ProberConfig, SelfMatch};
use super::state::{HiccupWindow, Shared};
use crate::ctx::Ctx;
use crate::discovery::{self, Options};
use crate::serve::embed::{self, CounterSnapshot, Server};
use crate::shutdown::Shutdown;

/// This host's addresses (every interface).
pub fn local_ips() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    let mut v: Vec<IpAddr> = addrs
        .filter_map(|a| a.address)
        .filter_map(|s| {
            s.as_sockaddr_in().map(|x| IpAddr::V4(x.ip())).or_else(|| s.as_sockaddr_in6().map(|x| IpAddr::V6(x.ip())))
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The agent's serve: its probe port, with the agent's token (streams to an agent need the
/// same as its probes and API) and a quarter of its connections kept for the peers
/// discovery finds (`known`).
fn serve_config(cfg: &AgentConfig, key: Option<&Key>, known: &crate::accept::Known) -> embed::Config {
    embed::Config {
        listen: cfg.listen,
        join: cfg.multicast.into_iter().collect(),
        interface: cfg.interface,
        token: cfg.token.clone(),
        salt: cfg.salt.clone(),
        probe_key: key.cloned(),
        known_sources: Some(known.clone()),
        stamp: cfg.stamp.clone(),
        ..embed::Config::loopback()
    }
}

/// The address this agent advertises (port 0 in the config: serve's port; none given: the
/// address serve listens on, unless unspecified) and the node its peers know it as (that
/// address, or its first IPv4 address that is not loopback).
fn whoami(cfg: &AgentConfig, listen: SocketAddr, local: &[IpAddr]) -> (Option<SocketAddr>, NodeRef) {
    let advertise = cfg
        .advertise
        .map(|a| if a.port() == 0 { SocketAddr::new(a.ip(), listen.port()) } else { a })
        .or_else(|| (!listen.ip().is_unspecified()).then_some(listen));
    let me_addr = advertise.unwrap_or_else(|| {
        let ip = local.iter().find(|ip| ip.is_ipv4() && !ip.is_loopback()).copied().unwrap_or(listen.ip());
        SocketAddr::new(ip, listen.port())
    });
    (advertise, NodeRef { name: Some(cfg.name.clone()), zone: cfg.zone.clone(), ..NodeRef::at(me_addr.to_string()) })
}

/// The prober's settings: this node, how it knows itself, the plan, and its group.
fn prober_config(
    cfg: &AgentConfig,
    me: NodeRef,
    self_match: SelfMatch,
    listen: SocketAddr,
    key: Option<Key>,
) -> ProberConfig {
    ProberConfig {
        me,
        bind: SocketAddr::new(listen.ip(), 0),
        self_match,
        plan: cfg.plan,
        protos: cfg.protos.clone(),
        window: cfg.window,
        timeout: cfg.timeout,
        group: cfg.multicast.map(|group| Group {
            group,
            interface: cfg.interface,
            ttl: cfg.ttl,
            rate: cfg.multicast_rate,
        }),
        key,
        seed: crate::ctx::session_id(),
        stalls: cfg.stall_meter == StallMeter::Prober,
        stamp_key: cfg.stamp_peer_key.clone(),
    }
}

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    server: Option<Server>,
    prober: Option<JoinHandle<()>>,
    http: Option<JoinHandle<()>>,
    hiccup: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
    http_addr: SocketAddr,
    probe_addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Shutdown,
}

impl Agent {
    /// Binds everything (errors here are the user's to fix) and starts probing.
    pub fn start(cfg: &AgentConfig, shutdown: Shutdown, log: &discovery::Log) -> anyhow::Result<Self> {
        // Probes and replies are tagged with the hardened key, never the token itself: a
        // captured tag costs a guesser the full derivation per guess.
        let key = cfg.token.as_deref().map(|t| Key::derive(t.as_bytes(), cfg.salt.as_bytes()));
        // The peers discovery finds: serve keeps a quarter of its connections for them.
        let known = crate::accept::Known::default();
        let server = Server::start(&serve_config(cfg, key.as_ref(), &known), shutdown.clone())?;
        let listen = server.local_addr();
        let probe_socket = prober::bind_shared(SocketAddr::new(listen.ip(), 0))?;
        let local = local_ips();
        let (advertise, me) = whoami(cfg, listen, &local);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mesh-io")
            .enable_all()
            .build()
            .context("cannot start the I/O runtime")?;
        let opts = Options { default_port: listen.port(), refresh: cfg.refresh, kube: cfg.kube.clone() };
        let board = discovery::spawn(cfg.sources.clone(), &opts, &shutdown, runtime.handle(), log);
        board.feed(known);
        let window_ns = nanos(cfg.window);
        let shared = Arc::new(Shared::new(
            me.clone(),
            window_ns,
            server.counters_handle(),
            board.clone(),
            key.clone(),
            cfg.multicast.is_some(),
        ));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(cfg.http))
            .with_context(|| format!("cannot bind http {}", cfg.http))?;
        let http_addr = listener.local_addr()?;
        let pcfg = prober_config(cfg, me, SelfMatch::new(advertise, listen, local), listen, key);
        let prober = prober::spawn(pcfg, probe_socket, shared.clone(), board, shutdown.clone())?;
        let hiccup = match cfg.stall_meter {
            StallMeter::Thread(interval) => Some(spawn_meter(interval, window_ns, shared.clone(), shutdown.clone())?),
            StallMeter::Off | StallMeter::Prober => None,
        };
        let api = Api {
            shared: shared.clone(),
            metrics: Arc::new(super::metrics::Metrics::new(&shared)),
            token_tag: cfg.token.as_deref().map(http::expected_tag),
        };
        let handle = runtime.handle().clone();
        let stop = shutdown.clone();
        let http = std::thread::Builder::new()
            .name("mesh-http".into())
            .spawn(move || handle.block_on(http::serve(listener, api, stop)))?;
        Ok(Self {
            probe_addr: listen,
            server: Some(server),
            prober: Some(prober),
            http: Some(http),
            hiccup,
            runtime: Some(runtime),
            http_addr,
            shared,
            shutdown,
        })
    }

    /// The probe address (serve).
    pub const fn probe_addr(&self) -> SocketAddr {
        self.probe_addr
    }

    /// The HTTP address.
    pub const fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The agent's identity.
    pub fn me(&self) -> &NodeRef {
        &self.shared.me
    }

    /// Stops everything; returns serve's counters.
    pub fn stop(mut self) -> CounterSnapshot {
        self.halt()
    }

    /// Stops the prober, HTTP, discovery and serve, in that order.
    fn halt(&mut self) -> CounterSnapshot {
        self.shutdown.trigger();
        if let Some(p) = self.prober.take() {
            let _ = p.join();
        }
        if let Some(h) = self.http.take() {
            let _ = h.join();
        }
        if let Some(h) = self.hiccup.take() {
            let _ = h.join();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_millis(300));
        }
        self.server.take().map(Server::stop).unwrap_or_default()
    }

    /// Waits for the stop signal (Ctrl-C, SIGTERM), then stops. The wait sleeps until the
    /// signal wakes it (no periodic wake-ups while the agent runs).
    pub fn wait(self) -> CounterSnapshot {
        if let Some(rt) = &self.runtime {
            rt.block_on(self.shutdown.stopped());
        }
        self.stop()
    }
}

/// The stall meter thread beside the probing (`--hiccup-interval`): `crate::stall`'s loop, one recording per window,
/// whose p99 and max replace the last window's in `shared` (for `/metrics`). Stops within
/// one interval of the stop signal.
fn spawn_meter(
    interval_ns: u64,
    window_ns: u64,
    shared: Arc<Shared>,
    stop: Shutdown,
) -> anyhow::Result<JoinHandle<()>> {
    let thread = std::thread::Builder::new().name("hiccup".into()).spawn(move || {
        while !stop.is_set() {
            let until = wirebench_net::timer::mono_now_ns().saturating_add(window_ns);
            let h = crate::stall::record_until(interval_ns, stop.flag(), until).finish();
            if h.wakeups == 0 {
                // Only when stopped: config keeps the interval within a tenth of the window.
                continue;
            }
            let w = HiccupWindow {
                interval_ns,
                wakeups: h.wakeups,
                corrected: h.corrected,
                p99_ns: wirebench_core::latency::value_at_percentile(&h.histogram, 99.0),
                max_ns: h.histogram.max(),
            };
            *shared.hiccup.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(w);
        }
    });
    thread.context("cannot start the stall meter")
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.halt();
    }
}

/// `wirebench mesh agent`: runs until Ctrl-C or SIGTERM.
pub fn run(args: &AgentArgs, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let cfg = AgentConfig::from_args(args)?;
    let log: discovery::Log = Arc::new(|line| eprintln!("wirebench mesh agent: {line}"));
    let agent = Agent::start(&cfg, ctx.shutdown.clone(), &log)?;
    let sources: Vec<String> = cfg.sources.iter().map(discovery::Source::describe).collect();
    writeln!(
        ctx.out,
        "wirebench mesh agent {}: listening on udp+tcp {} (as {}), http {}; peers from {}; window {}{}{}{} (Ctrl-C to stop)",
        cfg.name,
        agent.probe_addr(),
        agent.me().addr,
        agent.http_addr(),
        sources.join(", "),
        humantime::format_duration(cfg.window),
        cfg.multicast.map_or_else(String::new, |g| format!(", multicast {g}")),
        if cfg.token.is_some() { ", token required" } else { "" },
        cfg.stamp.as_ref().map_or_else(String::new, |s| format!(", STAMP reflector on udp {}", s.addr)),
    )?;
    ctx.out.flush()?;
    let c = agent.wait();
    writeln!(ctx.out, "wirebench mesh agent: stopped; serve {c}")?;
    Ok(())
}
