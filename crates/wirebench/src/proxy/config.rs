//! `proxy` settings: `Args` become a validated `Config` in one pure function (STYLE C5).
//! Per-direction flags override the symmetric ones field by field.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use wirebench_core::units::nanos;

use serde::Serialize;
use wirebench_core::impair::spec::{DEFAULT_QUEUE_LIMIT_NS, Delay};
use wirebench_core::impair::{Jitter, Loss, LossBurst, Percent, Reorder, Spec};
use wirebench_core::units::{BitRate, Span};

use super::Args;
use crate::addr::{Proto, resolve};
use crate::error::UsageError;

/// `--max-held`'s default: 64 MiB of delayed packets.
pub const DEFAULT_MAX_HELD: usize = 64 << 20;

/// A validated proxy configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// Where traffic goes.
    pub upstream: SocketAddr,
    /// Transport.
    pub proto: Proto,
    /// Client to upstream.
    pub up: Spec,
    /// Upstream to client.
    pub down: Spec,
    /// Seed of the decisions.
    pub seed: u64,
    /// Interval of the requested-vs-achieved lines.
    pub interval: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Busy-poll while traffic flows.
    pub spin: bool,
    /// UDP flow idle timeout.
    pub idle_timeout: Duration,
    /// Flow / connection limit.
    pub max_flows: usize,
    /// Bytes of delayed packets held at once.
    pub max_held: usize,
    /// JSON report.
    pub json: Option<PathBuf>,
    /// Final report only.
    pub quiet: bool,
    /// Every detail.
    pub verbose: bool,
}

/// One direction's flags, symmetric value already folded in.
struct Side {
    delay: Option<Delay>,
    jitter: Option<Jitter>,
    loss: Option<Percent>,
    loss_burst: Option<LossBurst>,
    reorder: Option<Reorder>,
    duplicate: Option<Percent>,
    rate: Option<BitRate>,
    queue_limit: Option<Span>,
}

fn side(name: &str, s: &Side, proto: Proto) -> Result<Spec, UsageError> {
    let loss = match (s.loss, s.loss_burst) {
        (Some(_), Some(_)) => {
            return Err(UsageError(format!("{name}: --loss and --loss-burst are two loss models: pick one")));
        }
        (Some(p), None) => Some(Loss::Random { p: p.prob() }),
        (None, Some(b)) => Some(Loss::Burst { p: b.p.prob(), r: b.r.prob() }),
        (None, None) => None,
    };
    let spec = Spec {
        delay_ns: s.delay.map_or(0, |d| d.0),
        jitter: s.jitter,
        loss,
        reorder: s.reorder,
        duplicate: s.duplicate.map_or(0.0, Percent::prob),
        rate_bps: s.rate.map(BitRate::bps),
        burst_bytes: s.rate.map_or(0, |r| Spec::default_burst(r.bps())),
        queue_limit_ns: s.queue_limit.map_or(DEFAULT_QUEUE_LIMIT_NS, |q| nanos(q.0)),
    };
    if spec.queue_limit_ns == 0 {
        return Err(UsageError(format!("{name}: --queue-limit must be above 0")));
    }
    if proto == Proto::Tcp && (spec.loss.is_some() || spec.reorder.is_some() || spec.duplicate > 0.0) {
        return Err(UsageError(format!(
            "{name}: loss, reorder and duplicate need --proto udp (the TCP proxy relays a byte stream; \
             for packet loss under TCP use `wirebench shape`)"
        )));
    }
    Ok(spec)
}

impl Config {
    /// Validates `a`; `fallback_seed` is used when no `--seed` is given.
    pub fn from_args(a: &Args, fallback_seed: u64) -> Result<Self, UsageError> {
        let listen = resolve(&a.listen)?;
        let upstream = resolve(&a.upstream)?;
        if upstream.port() == 0 {
            return Err(UsageError(format!("bad upstream '{}': port 0", a.upstream)));
        }
        if a.interval.0 < Duration::from_millis(10) {
            return Err(UsageError(format!("--interval {} is too short (at least 10ms)", a.interval)));
        }
        if a.max_held.0 == 0 {
            return Err(UsageError("--max-held must be above 0".into()));
        }
        if a.max_flows.0 == 0 {
            return Err(UsageError("--max-flows must be at least 1".into()));
        }
        let up = Side {
            delay: a.up_delay.or(a.delay),
            jitter: a.up_jitter.or(a.jitter),
            loss: a.up_loss.or(a.loss),
            loss_burst: a.up_loss_burst.or(a.loss_burst),
            reorder: a.up_reorder.or(a.reorder),
            duplicate: a.up_duplicate.or(a.duplicate),
            rate: a.up_rate.or(a.rate),
            queue_limit: a.up_queue_limit.or(a.queue_limit),
        };
        let down = Side {
            delay: a.down_delay.or(a.delay),
            jitter: a.down_jitter.or(a.jitter),
            loss: a.down_loss.or(a.loss),
            loss_burst: a.down_loss_burst.or(a.loss_burst),
            reorder: a.down_reorder.or(a.reorder),
            duplicate: a.down_duplicate.or(a.duplicate),
            rate: a.down_rate.or(a.rate),
            queue_limit: a.down_queue_limit.or(a.queue_limit),
        };
        // STAMP is UDP on the wire: a proxy in front of a reflector relays datagrams.
        let proto = if a.proto == Proto::Stamp { Proto::Udp } else { a.proto };
        Ok(Self {
            listen,
            upstream,
            proto,
            up: side("up", &up, proto)?,
            down: side("down", &down, proto)?,
            seed: a.seed.unwrap_or(fallback_seed),
            interval: a.interval.0,
            duration: a.duration.map(|d| d.0),
            spin: a.spin,
            idle_timeout: a.idle_timeout.0,
            max_flows: a.max_flows.as_usize(),
            max_held: usize::try_from(a.max_held.0).unwrap_or(usize::MAX),
            json: a.output.json.clone(),
            quiet: a.output.quiet,
            verbose: a.output.verbose,
        })
    }

    /// A loopback UDP proxy to `upstream` with `spec` both ways (tests and the suite).
    pub fn loopback(upstream: SocketAddr, spec: Spec) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            upstream,
            proto: Proto::Udp,
            up: spec,
            down: spec,
            seed: 1,
            interval: Duration::from_secs(1),
            duration: None,
            spin: false,
            idle_timeout: Duration::from_secs(60),
            max_flows: 1024,
            max_held: DEFAULT_MAX_HELD,
            json: None,
            quiet: true,
            verbose: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use wirebench_core::impair::JitterDist;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn cfg(args: &[&str]) -> Result<Config, String> {
        let base = ["proxy", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:7878"];
        let t = T::try_parse_from(base.iter().chain(args.iter()).copied()).map_err(|e| e.to_string())?;
        Config::from_args(&t.a, 42).map_err(|e| e.0)
    }

    #[test]
    fn defaults_pass_everything_through() {
        let c = cfg(&[]).unwrap();
        assert!(c.up.is_passthrough() && c.down.is_passthrough());
        assert_eq!((c.proto, c.seed, c.interval), (Proto::Udp, 42, Duration::from_secs(1)));
        assert_eq!(c.up.queue_limit_ns, DEFAULT_QUEUE_LIMIT_NS);
        assert_eq!(c.max_held, DEFAULT_MAX_HELD);
        assert_eq!(cfg(&["--max-held", "512KiB"]).unwrap().max_held, 512 << 10);
    }

    #[test]
    fn per_direction_flags_override_the_symmetric_ones() {
        let c = cfg(&[
            "--delay",
            "10ms",
            "--down-delay",
            "30ms",
            "--jitter",
            "2ms:pareto",
            "--up-loss",
            "1%",
            "--down-loss-burst",
            "1%,25%",
            "--rate",
            "60.76mbit",
            "--up-rate",
            "1gbit",
            "--seed",
            "7",
        ])
        .unwrap();
        assert_eq!((c.up.delay_ns, c.down.delay_ns), (10_000_000, 30_000_000));
        assert_eq!(c.down.jitter.map(|j| j.dist), Some(JitterDist::Pareto));
        assert_eq!(c.up.loss, Some(Loss::Random { p: 0.01 }));
        assert_eq!(c.down.loss, Some(Loss::Burst { p: 0.01, r: 0.25 }));
        assert_eq!((c.up.rate_bps, c.down.rate_bps), (Some(1_000_000_000), Some(60_760_000)));
        assert_eq!(c.down.burst_bytes, 7_595);
        assert_eq!(c.seed, 7);
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["--delay", "-5ms"], "cannot be negative"),
            (&["--delay=-5ms"], "cannot be negative"),
            (&["--loss", "150%"], "over 100%"),
            (&["--loss", "1"], "needs a %"),
            (&["--jitter", "2ms:cauchy"], "unknown distribution"),
            (&["--loss", "1%", "--loss-burst", "1%,10%"], "pick one"),
            (&["--proto", "tcp", "--loss", "1%"], "need --proto udp"),
            (&["--rate", "10k/s"], "is a message rate"),
            (&["--queue-limit", "0s"], "above 0"),
            (&["--interval", "1ms"], "too short"),
            (&["--max-held", "0"], "above 0"),
            (&["--max-held", "lots"], "not a size"),
        ];
        for (args, want) in cases {
            let e = cfg(args).expect_err(&format!("{args:?} should fail"));
            assert!(e.contains(want), "{args:?}: '{e}' should mention '{want}'");
        }
    }
}
