//! `wirebench room`: a reference WebSocket room server, the stand-in for the application
//! under `wirebench load`.
//!
//! Protocol: a client connects to `ws://HOST:PORT/rooms/NAME` (any path names a room).
//! Every text or binary message goes to every other member of the room, unchanged. A
//! message that contains `"req":true` is a request: it is answered to the sender only (the
//! message itself comes back as the reply) and is not relayed. Nothing else is parsed, so
//! the server costs little per message: it must never be the bottleneck of a load test,
//! and it measures its own CPU (getrusage) to show that it was not.
//!
//! Runtime: tokio, two worker threads, one task per connection; a room is a tokio
//! broadcast channel, so relaying takes no lock per message.

mod server;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
pub use server::{Counters, RoomServer};

use crate::Ctx;
use crate::error::UsageError;

/// `wirebench room` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080", env = "WIREBENCH_ROOM_LISTEN")]
    pub listen: String,
    /// Print the counters this often (0s: only at the end).
    #[arg(long, default_value = "1s")]
    pub interval: wirebench_core::units::Span,
}

/// A validated room configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Print interval (`None`: only at the end).
    pub interval: Option<Duration>,
}

impl Config {
    /// Args to Config.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        let listen = a
            .listen
            .parse()
            .map_err(|_| UsageError(format!("--listen '{}' is not an address like 0.0.0.0:8080", a.listen)))?;
        Ok(Self { listen, interval: (!a.interval.0.is_zero()).then_some(a.interval.0) })
    }

    /// 127.0.0.1 on an ephemeral port, no printing (tests and the suite).
    pub fn loopback() -> Self {
        Self { listen: SocketAddr::from(([127, 0, 0, 1], 0)), interval: None }
    }
}

/// Runs until Ctrl-C, printing counters each interval; returns the final counters.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<Counters> {
    let cfg = Config::from_args(args)?;
    crate::load::limits::raise_nofile();
    let server = RoomServer::start(&cfg).with_context(|| format!("cannot listen on {}", cfg.listen))?;
    writeln!(ctx.out, "wirebench room: ws://{}/rooms/NAME (Ctrl-C to stop)", server.local_addr())?;
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
            writeln!(ctx.out, "{}", now.rates_since(&last, dt))?;
            (last, last_t) = (now, Instant::now());
        }
    }
    let end = server.stop();
    writeln!(ctx.out, "room: {} over {:.1}s", end.totals(t0.elapsed()), t0.elapsed().as_secs_f64())?;
    Ok(end)
}
