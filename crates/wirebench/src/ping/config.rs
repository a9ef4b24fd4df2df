//! `ping` settings: parsed `Args` become a validated `Config` in one pure function, so a
//! `Config` cannot hold a bad value and the rules are tested with tables (STYLE C5).

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;
use wirebench_core::units::nanos;

use serde::Serialize;
use wirebench_core::latency::DEFAULT_PERCENTILES;
use wirebench_core::schedule::{Pacing, Stop};
use wirebench_core::units::{CountOrSpan, MsgRate, Span};
use wirebench_core::wire::probe;
use wirebench_core::wire::stamp::{self, Key, TsFormat};

use super::Args;
use crate::addr::{Proto, resolve};
use crate::error::UsageError;
use crate::stamp::FormatArg;

/// Where probes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "addr", rename_all = "lowercase")]
pub enum Target {
    /// One responder.
    Unicast(SocketAddr),
    /// Every responder that joined the group.
    Multicast(SocketAddrV4),
}

impl Target {
    /// The address as given.
    pub fn addr(&self) -> SocketAddr {
        match *self {
            Self::Unicast(a) => a,
            Self::Multicast(g) => SocketAddr::V4(g),
        }
    }
}

/// A validated ping configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Where probes go.
    pub target: Target,
    /// Transport.
    pub proto: Proto,
    /// Probe size in bytes.
    pub size: usize,
    /// Measurement bounds.
    #[serde(skip)]
    pub stop: Stop,
    /// Warm-up bounds.
    #[serde(skip)]
    pub warmup: Stop,
    /// Closed loop or a rate.
    #[serde(skip)]
    pub pacing: Pacing,
    /// Probe timeout.
    pub timeout: Duration,
    /// Give up after this long with nothing back.
    pub give_up_after: Duration,
    /// Busy-poll.
    pub spin: bool,
    /// Pin the measuring thread.
    pub cpu: Option<usize>,
    /// Multicast TTL.
    pub ttl: u32,
    /// Multicast interface (name or address, as given).
    pub interface: Option<String>,
    /// Multicast loopback.
    pub multicast_loop: bool,
    /// Multicast: the group replies come back on.
    pub reply_group: Option<SocketAddrV4>,
    /// Multicast: stop discovery once this many responders answered.
    pub responders: Option<usize>,
    /// Percentiles shown in summaries.
    pub percentiles: Vec<f64>,
    /// Output files.
    pub hgrm: Option<PathBuf>,
    /// Interval log.
    pub hlog: Option<PathBuf>,
    /// JSON report.
    pub json: Option<PathBuf>,
    /// The full distribution table.
    pub table: bool,
    /// Only the summary.
    pub quiet: bool,
    /// The details too.
    pub verbose: bool,
    /// No kernel timestamps in this run (asked for, or busy-poll without `--timestamps`).
    pub no_timestamps: bool,
    /// The stall meter (off in this run when asked, or busy-poll without `--hiccup`).
    #[serde(skip)]
    pub hiccup: crate::stall::HiccupArgs,
    /// What busy-poll turned off by default, for the report's notes.
    #[serde(skip)]
    pub spin_off: SpinOff,
    /// STAMP's settings, with `--proto stamp`.
    pub stamp: Option<StampCfg>,
}

/// A STAMP session-sender's settings.
#[derive(Debug, Clone, Serialize)]
pub struct StampCfg {
    /// Authenticated mode's key.
    #[serde(skip)]
    pub key: Option<Key>,
    /// Authenticated mode.
    pub authenticated: bool,
    /// The format of T1.
    pub format: FormatArg,
    /// The session id (SSID).
    pub session_id: u16,
}

impl StampCfg {
    /// The engine's sender: its error estimate says the clock is unsynchronised unless the
    /// kernel says otherwise, with the kernel's error bound.
    pub fn sender(&self) -> stamp::Sender {
        let format = TsFormat::from(self.format);
        let error = crate::stamp::own_error(format);
        stamp::Sender { key: self.key.clone(), format, error, ssid: self.session_id }
    }
}

/// What `--spin` turns off unless asked to keep it: instrumentation that costs the busy-poll
/// round trip more than it tells (a system call per probe; a thread that takes a spinning
/// thread's CPU).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinOff {
    /// Kernel timestamps (`--timestamps` keeps them).
    pub timestamps: bool,
    /// The stall meter (`--hiccup` keeps it).
    pub meter: bool,
}

impl SpinOff {
    /// The report's notes on what was not measured, and why.
    pub fn notes(self) -> Vec<String> {
        let mut v = Vec::new();
        if self.timestamps {
            v.push(
                "busy-poll: kernel timestamps off (a TX stamp is a system call per round trip, and a spinning thread \
                 has no wake-up to take out): the round trip is not split; --timestamps keeps them"
                    .into(),
            );
        }
        if self.meter {
            v.push(
                "busy-poll: the stall meter off (its wake-ups take a spinning thread's CPU and show in the tail it \
                 measures): host stalls are not measured; --hiccup keeps it"
                    .into(),
            );
        }
        v
    }
}

/// Default measured probes in closed loop (Aeron's Ping measures 100,000).
pub const DEFAULT_COUNT: u64 = 100_000;
/// Default length of an open-loop run.
pub const DEFAULT_OPEN_DURATION: Duration = Duration::from_secs(10);
/// Default warm-up: 1,000 probes or one second, whichever comes first.
pub const DEFAULT_WARMUP: Stop = Stop { max_count: Some(1_000), deadline: Some(Duration::from_secs(1)) };

fn usage(msg: String) -> UsageError {
    UsageError(msg)
}

/// STAMP's settings with `--proto stamp` (or a `stamp://` target); its flags refused
/// without it.
fn stamp_cfg(a: &Args, proto: Proto) -> Result<Option<StampCfg>, UsageError> {
    if proto != Proto::Stamp {
        if a.stamp_key.is_some() || a.stamp_key_file.is_some() || a.stamp_session_id.is_some() {
            return Err(usage(
                "--stamp-key and --stamp-session-id need a STAMP target (stamp://host or --proto stamp)".into(),
            ));
        }
        return Ok(None);
    }
    let key = crate::stamp::key_of(a.stamp_key.as_deref(), a.stamp_key_file.as_deref(), "stamp-key")?;
    // Random and never 0: a reflector that predates RFC 8972 answers with 0.
    let session_id =
        a.stamp_session_id.unwrap_or_else(|| u16::try_from(crate::ctx::session_id() % 65_535 + 1).unwrap_or(1));
    Ok(Some(StampCfg { authenticated: key.is_some(), key, format: a.stamp_format, session_id }))
}

fn stop_of(count: Option<u64>, duration: Option<Span>) -> Stop {
    Stop { max_count: count, deadline: duration.map(|d| d.0) }
}

impl Config {
    /// Validates `args`.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        let (proto, target_s) = match a.target.strip_prefix("stamp://") {
            Some(rest) => {
                if a.proto == Proto::Tcp {
                    return Err(usage(format!(
                        "{} is a STAMP reflector: STAMP runs over UDP, drop --proto tcp",
                        a.target
                    )));
                }
                (Proto::Stamp, rest.to_string())
            }
            None => (a.proto, a.target.clone()),
        };
        // A STAMP reflector without a port is on 862.
        let bare_host = !target_s.contains(':') || (target_s.starts_with('[') && target_s.ends_with(']'));
        let target_s =
            if proto == Proto::Stamp && bare_host { format!("{target_s}:{}", stamp::PORT) } else { target_s };
        let addr = resolve(&target_s)?;
        let target = match addr {
            SocketAddr::V4(v4) if v4.ip().is_multicast() => Target::Multicast(v4),
            _ => Target::Unicast(addr),
        };
        if addr.port() == 0 {
            return Err(usage(format!("bad target '{}': port 0", a.target)));
        }
        let stamp_cfg = stamp_cfg(a, proto)?;
        let count = a.count.map(|c| c.0);
        let responders = a.responders.map(wirebench_core::units::Count::as_usize);
        let size = match (&stamp_cfg, a.size) {
            (Some(s), None) => stamp::base_len(s.authenticated),
            (None, None) => probe::MIN_LEN,
            (_, Some(b)) => usize::try_from(b.0).unwrap_or(usize::MAX),
        };
        if let Some(s) = &stamp_cfg {
            let sender =
                stamp::Sender { key: s.key.clone(), format: TsFormat::Ntp, error: stamp::ErrorEstimate(1), ssid: 0 };
            let base = stamp::base_len(s.authenticated);
            if !sender.valid_len(size) {
                return Err(usage(format!(
                    "--size {size}: a STAMP packet is {base} bytes{}, or {}..={} with an Extra Padding TLV",
                    if s.authenticated { " authenticated" } else { "" },
                    base + 4,
                    stamp::MAX_LEN
                )));
            }
        } else if !(probe::MIN_LEN..=probe::MAX_LEN).contains(&size) {
            return Err(usage(format!(
                "--size {} is outside {}..={} bytes (the smallest probe is {} bytes)",
                size,
                probe::MIN_LEN,
                probe::MAX_LEN,
                probe::MIN_LEN
            )));
        }
        let multicast = matches!(target, Target::Multicast(_));
        if proto == Proto::Stamp && multicast {
            return Err(usage(format!("{target_s} is a multicast group: STAMP is unicast")));
        }
        if a.proto == Proto::Tcp && multicast {
            return Err(usage(format!("{} is a multicast group: multicast needs --proto udp", a.target)));
        }
        if !multicast && (a.reply_group.is_some() || a.responders.is_some()) {
            return Err(usage("--reply-group and --responders need a multicast group as the target".into()));
        }
        if let Some(g) = a.reply_group
            && !g.ip().is_multicast()
        {
            return Err(usage(format!("--reply-group {g} is not a multicast group")));
        }
        if responders == Some(0) {
            return Err(usage("--responders must be at least 1".into()));
        }
        if count == Some(0) {
            return Err(usage("--count must be at least 1".into()));
        }
        let timeout = a.timeout.0;
        if timeout < Duration::from_micros(10) {
            return Err(usage(format!("--timeout {} is too short (at least 10us)", a.timeout)));
        }
        if a.give_up_after.0 < timeout {
            return Err(usage(format!(
                "--give-up-after {} is shorter than --timeout {}: it must allow at least one timeout",
                a.give_up_after, a.timeout
            )));
        }
        a.meter.interval_ns()?;
        if a.duration.is_some_and(|d| d.0.is_zero()) {
            return Err(usage("--duration must be above 0".into()));
        }
        let pacing = match (a.rate, a.poisson) {
            (None, false) => Pacing::Closed,
            (None, true) => return Err(usage("--poisson needs --rate (the mean rate of the Poisson sampling)".into())),
            (Some(r), false) => Pacing::Rate(r),
            // Seeded from the OS once; the seed goes into the report's config.
            (Some(rate), true) => Pacing::Poisson { rate, seed: crate::ctx::session_id() },
        };
        let mut stop = stop_of(count, a.duration);
        if stop.is_unbounded() {
            stop = match pacing {
                Pacing::Closed => Stop { max_count: Some(DEFAULT_COUNT), deadline: None },
                Pacing::Rate(_) | Pacing::Poisson { .. } => {
                    Stop { max_count: None, deadline: Some(DEFAULT_OPEN_DURATION) }
                }
            };
        }
        let warmup = match a.warmup {
            None => DEFAULT_WARMUP,
            Some(CountOrSpan::Count(n)) => Stop { max_count: Some(n), deadline: None },
            Some(CountOrSpan::Span(d)) => Stop { max_count: None, deadline: Some(d) },
        };
        let percentiles = a.percentiles.clone().unwrap_or_else(|| DEFAULT_PERCENTILES.to_vec());
        if let Some(p) = percentiles.iter().find(|p| !(**p > 0.0 && **p <= 100.0)) {
            return Err(usage(format!("--percentiles: {p} is not in (0, 100]")));
        }
        let cpu = a.pin.checked_cpu()?;
        if let Some(i) = &a.mcast.interface.interface {
            wirebench_net::iface::ipv4_of(i).map_err(|e| usage(e.to_string()))?;
        }
        let spin_off = SpinOff {
            // TCP probes have none to turn off.
            timestamps: a.pin.spin && proto != Proto::Tcp && !a.timestamps && !a.no_timestamps,
            meter: a.pin.spin && !a.hiccup && !a.meter.no_hiccup,
        };
        Ok(Self {
            target,
            proto,
            size,
            stop,
            warmup,
            pacing,
            timeout,
            give_up_after: a.give_up_after.0,
            spin: a.pin.spin,
            cpu,
            ttl: a.mcast.ttl,
            interface: a.mcast.interface.interface.clone(),
            multicast_loop: a.multicast_loop,
            reply_group: a.reply_group,
            responders,
            percentiles,
            hgrm: a.hgrm.clone(),
            hlog: a.hlog.clone(),
            json: a.output.json.clone(),
            table: a.table,
            quiet: a.output.quiet,
            verbose: a.output.verbose,
            no_timestamps: a.no_timestamps || spin_off.timestamps,
            hiccup: crate::stall::HiccupArgs { no_hiccup: a.meter.no_hiccup || spin_off.meter, ..a.meter.clone() },
            spin_off,
            stamp: stamp_cfg,
        })
    }

    /// The config as it goes into the report (pacing and bounds spelled out).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            let bound = |s: &Stop| {
                serde_json::json!({
                    "count": s.max_count,
                    "duration_ns": s.deadline.map(nanos),
                })
            };
            m.insert("stop".into(), bound(&self.stop));
            m.insert("warmup".into(), bound(&self.warmup));
            m.insert("rate_per_s".into(), serde_json::json!(self.pacing.rate().map(MsgRate::per_sec)));
            // Poisson sampling: the send times are exponential gaps from this seed.
            let poisson = match self.pacing {
                Pacing::Poisson { seed, .. } => serde_json::json!({ "seed": seed }),
                _ => serde_json::Value::Null,
            };
            m.insert("poisson".into(), poisson);
        }
        v
    }

    /// The probes' form: a STAMP packet always carries the reflector's T2 and T3.
    pub const fn form(&self) -> probe::Form {
        if self.stamp.is_some() { probe::Form::Full } else { probe::Form::for_len(self.size) }
    }

    /// Is the rate a `MsgRate` (open loop)?
    pub const fn rate(&self) -> Option<MsgRate> {
        self.pacing.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<Config, String> {
        let a: Args = crate::flags::parse_mode("ping", args).map_err(|e| e.to_string())?;
        Config::from_args(&a).map_err(|e| e.0)
    }

    #[test]
    fn defaults() {
        let c = cfg(&["127.0.0.1:7878"]).unwrap();
        assert_eq!(c.target, Target::Unicast("127.0.0.1:7878".parse().unwrap()));
        assert_eq!((c.proto, c.size, c.timeout), (Proto::Udp, 32, Duration::from_secs(1)));
        assert_eq!(c.stop, Stop { max_count: Some(DEFAULT_COUNT), deadline: None });
        assert_eq!(c.warmup, DEFAULT_WARMUP);
        assert_eq!(c.pacing, Pacing::Closed);
        assert_eq!(c.percentiles, DEFAULT_PERCENTILES.to_vec());
        assert_eq!((c.give_up_after, c.ttl), (Duration::from_secs(30), 32));
    }

    #[test]
    fn counts_and_sizes_read_the_unit_grammar() {
        let c = cfg(&["127.0.0.1:7878", "--count", "10k", "--size", "1k", "--warmup", "1k"]).unwrap();
        assert_eq!(c.stop.max_count, Some(10_000));
        assert_eq!(c.size, 1000);
        assert_eq!(c.warmup, Stop { max_count: Some(1000), deadline: None });
        assert!(cfg(&["127.0.0.1:7878", "--count", "10m"]).unwrap_err().contains("minutes"));
    }

    #[test]
    fn open_loop_defaults_to_a_duration() {
        let c = cfg(&["127.0.0.1:7878", "--rate", "10k/s"]).unwrap();
        assert_eq!(c.stop.deadline, Some(DEFAULT_OPEN_DURATION));
        assert_eq!(c.rate().map(MsgRate::per_sec), Some(10_000.0));
    }

    #[test]
    fn poisson_is_an_open_loop_at_the_rate_with_an_os_seed_in_the_report() {
        let a = cfg(&["127.0.0.1:7878", "--rate", "20/s", "--poisson"]).unwrap();
        let b = cfg(&["127.0.0.1:7878", "--rate", "20/s", "--poisson"]).unwrap();
        let (Pacing::Poisson { rate, seed: sa }, Pacing::Poisson { seed: sb, .. }) = (a.pacing, b.pacing) else {
            panic!("{:?}", a.pacing)
        };
        assert_eq!(Some(rate), MsgRate::new(20.0));
        assert_ne!(sa, sb, "each run draws its own seed");
        assert_eq!(a.stop.deadline, Some(DEFAULT_OPEN_DURATION));
        let j = a.to_json();
        assert_eq!(j["rate_per_s"], 20.0);
        assert_eq!(j["poisson"]["seed"], sa);
        let fixed = cfg(&["127.0.0.1:7878", "--rate", "20/s"]).unwrap().to_json();
        assert!(fixed["poisson"].is_null());
    }

    /// Busy-poll turns kernel timestamps and the stall meter off unless asked to keep them,
    /// and says so; a blocking run keeps both; TCP has no timestamps to turn off.
    #[test]
    fn busy_poll_turns_off_what_costs_its_round_trip_unless_kept() {
        let off = |flags: &[&str]| {
            let c = cfg(&[&["127.0.0.1:7878"], flags].concat()).unwrap();
            (c.no_timestamps, c.hiccup.no_hiccup, c.spin_off)
        };
        let both = SpinOff { timestamps: true, meter: true };
        assert_eq!(off(&[]), (false, false, SpinOff::default()));
        assert_eq!(off(&["--spin"]), (true, true, both));
        assert_eq!(off(&["--spin", "--timestamps"]), (false, true, SpinOff { timestamps: false, meter: true }));
        assert_eq!(off(&["--spin", "--hiccup"]), (true, false, SpinOff { timestamps: true, meter: false }));
        assert_eq!(off(&["--spin", "--timestamps", "--hiccup"]), (false, false, SpinOff::default()));
        // Asked off: off, and not busy-poll's doing.
        assert_eq!(off(&["--spin", "--no-timestamps", "--no-hiccup"]), (true, true, SpinOff::default()));
        assert_eq!(off(&["--no-timestamps"]), (true, false, SpinOff::default()));
        assert_eq!(off(&["--spin", "--proto", "tcp"]).2, SpinOff { timestamps: false, meter: true });
        assert!(cfg(&["127.0.0.1:7878", "--timestamps", "--no-timestamps"]).is_err(), "contradictory");
        let notes = both.notes();
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("--timestamps keeps them") && notes[1].contains("--hiccup keeps it"), "{notes:?}");
        assert!(SpinOff::default().notes().is_empty());
    }

    #[test]
    fn stamp_targets_default_to_port_862_and_the_base_packet() {
        let c = cfg(&["stamp://127.0.0.1"]).unwrap();
        assert_eq!((c.proto, c.target.addr().to_string(), c.size), (Proto::Stamp, "127.0.0.1:862".into(), 44));
        assert_eq!(c.form(), probe::Form::Full, "a STAMP packet carries T2 and T3");
        assert_eq!(cfg(&["stamp://[::1]"]).unwrap().target.addr().to_string(), "[::1]:862");
        let c =
            cfg(&["127.0.0.1:8620", "--proto", "stamp", "--stamp-key", "00112233445566778899aabbccddeeff"]).unwrap();
        assert_eq!((c.size, c.stamp.as_ref().map(|s| s.authenticated)), (112, Some(true)));
        let c = cfg(&["stamp://127.0.0.1:9", "--stamp-session-id", "7", "--size", "100"]).unwrap();
        assert_eq!((c.size, c.stamp.map(|s| s.session_id)), (100, Some(7)));
        let sessions: Vec<u16> =
            (0..50).filter_map(|_| cfg(&["stamp://127.0.0.1"]).unwrap().stamp.map(|s| s.session_id)).collect();
        assert!(sessions.iter().all(|&s| s != 0), "never 0: that is a reflector that predates RFC 8972");
    }

    #[test]
    fn multicast_target() {
        let c = cfg(&["239.255.0.1:20123", "--responders", "2", "--reply-group", "239.255.0.3:20124"]).unwrap();
        assert!(matches!(c.target, Target::Multicast(_)));
        assert_eq!(c.responders, Some(2));
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["nonsense"], "bad address"),
            (&["127.0.0.1:7878", "--size", "16"], "smallest probe is 32"),
            (&["127.0.0.1:7878", "--size", "70000"], "outside"),
            (&["127.0.0.1:7878", "--rate", "0"], "rate"),
            (&["127.0.0.1:7878", "--poisson"], "--poisson needs --rate"),
            (&["127.0.0.1:7878", "--timeout", "5parsecs"], "unknown unit"),
            (&["127.0.0.1:7878", "--duration", "10"], "needs a unit"),
            (&["239.1.1.1:5000", "--proto", "tcp"], "multicast needs --proto udp"),
            (&["127.0.0.1:7878", "--responders", "2"], "need a multicast group"),
            (&["127.0.0.1:7878", "--percentiles", "50,101"], "not in (0, 100]"),
            (&["127.0.0.1:7878", "--cpu", "4096"], "--cpu 4096"),
            (&["127.0.0.1:7878", "--count", "0"], "at least 1"),
            (&["127.0.0.1:0"], "port 0"),
            (&["239.1.1.1:5000", "--ttl", "0"], "0 is not in 1..=255"),
            (&["239.1.1.1:5000", "--ttl", "256"], "256 is not in 1..=255"),
            (&["127.0.0.1:7878", "--duration", "0s"], "--duration must be above 0"),
            (&["127.0.0.1:7878", "--timeout", "2s", "--give-up-after", "1s"], "shorter than --timeout"),
            (&["239.1.1.1:5000", "--interface", "nope0"], "interface 'nope0'"),
        ];
        for (args, want) in cases {
            let e = cfg(args).expect_err(&format!("{args:?} should fail"));
            assert!(e.contains(want), "{args:?}: '{e}' should mention '{want}'");
        }
    }
}
