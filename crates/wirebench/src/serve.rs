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
//! acceptor, one per TCP connection. Each blocks in the kernel with no timed wake-ups, so an
//! idle serve never wakes: a UDP thread in its read (the stop shuts its socket for reading,
//! which wakes it: `serve/udp.rs`), the acceptor and a connection's thread in one `ppoll` on
//! their socket and the stop descriptor (`Shutdown::wait_input`); or busy-polls with
//! `--spin`; a busy-polling thread that has been idle for 50 ms sleeps in `ppoll` until
//! traffic returns (`serve/spin.rs`), so an idle `serve --spin` does not burn a core.
//!
//! Safe to leave running (`docs/security.md`): every read, write and wait is bounded by a
//! timeout and the stop flag, so Ctrl-C or SIGTERM ends serve within a second whatever its
//! clients do; connections, sessions, sessions per address, memory and send rates have
//! budgets; streams need a token (an HMAC challenge-response, `serve/session.rs`) or
//! `--open` on a non-loopback address; and reverse data goes only to the control
//! connection's address and the port a datagram with the session's secret came from.

mod config;
mod counters;
mod session;
mod spin;
mod stamp;
mod stream;
mod tcp;
mod udp;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::Context as _;
use wirebench_core::auth::Key;
use wirebench_core::budget::Ledger;
use wirebench_net::multicast;

pub use self::config::{
    ANON_MAX_RATE, Args, Config, FIRST_FRAME_TIMEOUT, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_SOURCE,
    MAX_SESSIONS, MAX_SESSIONS_PER_SOURCE, MEMORY_BUDGET_MIB,
};
pub use self::counters::{CounterSnapshot, Counters};
use crate::ctx::Ctx;
use crate::shutdown::Shutdown;

/// Default port for control and data.
pub const DEFAULT_PORT: u16 = 7878;

/// What the mesh agent needs to run a serve inside itself: the one door into serve from
/// another command, kept to these items so the agent cannot grow into serve's internals.
pub mod embed {
    pub use super::{Config, CounterSnapshot, Counters, DEFAULT_PORT, Server};
}
/// Receive buffer asked for each probe socket: a flood queues here instead of evicting
/// the probes behind it (the kernel grants at most `net.core.rmem_max` without root).
pub const PROBE_RCVBUF: usize = 4 << 20;
/// Open files kept free beside connections: stdio, probe sockets, and sessions' sockets.
const SPARE_FDS: u64 = 64;

/// What every serving thread shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: Config,
    pub(crate) counters: Arc<Counters>,
    pub(crate) shutdown: Shutdown,
    pub(crate) ledger: Mutex<Ledger>,
    pub(crate) key: Option<Key>,
    /// Clones of the UDP probe sockets, which the acceptor shuts for reading once it sees
    /// the stop (their threads block in reads with no timeout: `udp::wake_all`).
    pub(crate) udp_sockets: Vec<UdpSocket>,
}

/// The connection cap that fits the open-file limit `nofile`: half of what is left after
/// the spare, so sessions' own sockets fit beside a full set of connections.
fn connection_cap(asked: u64, nofile: u64) -> u64 {
    asked.min(nofile.saturating_sub(SPARE_FDS) / 2).max(1)
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    shutdown: Shutdown,
    threads: Vec<JoinHandle<()>>,
    /// Shared with the TCP threads.
    shared: Arc<Shared>,
    /// Clones of the probe sockets, to read the kernel's drop count.
    probe_sockets: Vec<UdpSocket>,
    /// The connection cap in force (the asked one, lowered to fit the open-file limit).
    max_connections: u64,
    /// The STAMP reflector's bound address.
    stamp_addr: Option<SocketAddr>,
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
        let mut probe_sockets = Vec::new();
        for s in &sockets {
            wirebench_net::batch::size_buffers(s, PROBE_RCVBUF);
            probe_sockets.push(s.try_clone()?);
        }
        let max_connections = connection_cap(cfg.max_connections, crate::limits::raise_nofile());
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
        let mut stamp_addr = None;
        if let Some(sc) = &cfg.stamp {
            let sock = stamp::bind(sc)?;
            stamp_addr = Some(sock.local_addr()?);
            probe_sockets.push(sock.try_clone()?);
            let r = stamp::Reflector {
                sock,
                cfg: sc.clone(),
                spin: cfg.spin,
                timestamps: cfg.timestamps,
                counters: counters.clone(),
                shutdown: shutdown.clone(),
            };
            threads.push(std::thread::Builder::new().name("serve-stamp".into()).spawn(move || r.run())?);
        }
        let shared = Arc::new(Shared {
            cfg: cfg.clone(),
            counters: counters.clone(),
            shutdown: shutdown.clone(),
            ledger: Mutex::new(Ledger::new(cfg.budget)),
            key: cfg.key(),
            udp_sockets: probe_sockets.iter().map(UdpSocket::try_clone).collect::<Result<_, _>>()?,
        });
        let acc = tcp::Acceptor {
            listener: tcp,
            shared: shared.clone(),
            max: max_connections,
            per_source: cfg.max_connections_per_source,
            known: cfg.known_sources.clone().map(|k| (k, max_connections / 4)),
        };
        threads.push(std::thread::Builder::new().name("serve-tcp".into()).spawn(move || acc.run())?);
        Ok(Self { addr, counters, shutdown, threads, shared, probe_sockets, max_connections, stamp_addr })
    }

    /// The bound address (with the real port when the config asked for port 0).
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The STAMP reflector's address (with the real port when the config asked for 0).
    pub const fn stamp_addr(&self) -> Option<SocketAddr> {
        self.stamp_addr
    }

    /// The TCP connection cap in force.
    pub const fn max_connections(&self) -> u64 {
        self.max_connections
    }

    /// The live counters, for a mesh agent's metrics.
    pub fn counters_handle(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// The counters so far, with the kernel's drops on the probe sockets.
    pub fn counters(&self) -> CounterSnapshot {
        let mut c = self.counters.snapshot();
        c.kernel_drops = self.probe_sockets.iter().filter_map(wirebench_net::drops::udp_drops).sum();
        c
    }

    /// Stops every thread and returns the final counters. Every thread sleeps on the stop
    /// descriptor the trigger signals, or in a read the stop wakes, or (a busy write to a
    /// client that does not read) looks at the flag within [`crate::shutdown::POLL`], so
    /// this returns within about that.
    pub fn stop(mut self) -> CounterSnapshot {
        self.shutdown.trigger();
        udp::wake_all(&self.shared.udp_sockets);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.counters()
    }

    /// Waits until the shutdown signal is set elsewhere (Ctrl-C), then stops. Asleep on the
    /// stop descriptor until then (no wake-ups).
    pub fn wait(self) -> CounterSnapshot {
        self.shutdown.wait();
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
        "wirebench serve: listening on udp+tcp {}{}{}{} (Ctrl-C to stop)",
        server.local_addr(),
        if groups.is_empty() { String::new() } else { format!(", groups {}", groups.join(", ")) },
        if cfg.spin { ", busy-poll" } else { "" },
        match (cfg.timestamps, cfg.spin) {
            (true, _) => "",
            (false, true) => " (no kernel timestamps: a spinning thread has no wake-up to take out)",
            (false, false) => ", no kernel timestamps (its wake-up stays in pingers' stack to stack)",
        }
    )?;
    let streams = if cfg.token.is_some() {
        "streams need the token".to_string()
    } else if cfg.streams_allowed() {
        format!("streams open (anonymous cap {})", cfg.max_rate.map_or("none".into(), |r| r.to_string()))
    } else {
        "probe echo only: streams need --token or --open on a non-loopback address".to_string()
    };
    writeln!(ctx.out, "wirebench serve: {streams}; at most {} connections", server.max_connections())?;
    if let Some(sc) = &cfg.stamp {
        writeln!(
            ctx.out,
            "wirebench serve: STAMP reflector on udp {} ({}, {}, {} timestamps, {}, {})",
            server.stamp_addr().unwrap_or(sc.addr),
            if sc.key.is_some() { "authenticated" } else { "unauthenticated" },
            if sc.stateful { "stateful" } else { "stateless" },
            sc.format.name(),
            if sc.allow.is_empty() {
                "any source".to_string()
            } else {
                format!("sources {}", sc.allow.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
            },
            sc.max_rate
                .and_then(wirebench_core::units::MsgRate::new)
                .map_or("no rate cap".to_string(), |r| format!("at most {r} per source")),
        )?;
    }
    ctx.out.flush()?;
    let c = server.wait();
    writeln!(ctx.out, "wirebench serve: {c}")?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A trigger alone (Ctrl-C, before anyone calls `stop`) ends every serve thread, the UDP
    /// ones blocked in reads with no timeout included: the acceptor wakes them at the stop.
    #[test]
    fn a_trigger_alone_ends_every_serve_thread() {
        let stop = Shutdown::new();
        let server = Server::start(&Config::loopback(), stop.clone()).unwrap();
        stop.trigger();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.threads.iter().all(JoinHandle::is_finished) {
            assert!(Instant::now() < deadline, "a serve thread did not end at the trigger");
            std::thread::park_timeout(Duration::from_millis(1));
        }
        server.stop();
    }
}
