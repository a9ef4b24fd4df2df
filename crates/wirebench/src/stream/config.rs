//! `stream` settings: `Args` to a validated `Config` in one pure function.

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use wirebench_core::units::{ByteSize, StreamRate};
use wirebench_core::wire::control::{Direction, MAX_RCVBUF, StreamProto};
use wirebench_core::wire::stream;

use super::Args;
use crate::error::UsageError;
use crate::flow::recv::MAX_PUBLISHERS;

/// Default UDP message: a 1500-byte MTU minus IP and UDP headers (DatagramTest's 1468).
pub(super) const DEFAULT_UDP_SIZE: usize = 1468;
/// Default TCP frame: the largest a frame's 16-bit length allows (iperf3 writes 128 KiB;
/// frames this size keep the per-frame work negligible).
pub(super) const DEFAULT_TCP_SIZE: usize = 65_535;
/// Default run length.
pub(super) const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// The longest search or sweep trial: RFC 2544's (section 26.1).
pub(super) const MAX_TRIAL: Duration = Duration::from_secs(60);

/// A validated stream configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Serve control addresses (or, with `no_control`, data destinations).
    pub targets: Vec<SocketAddr>,
    /// Transport.
    #[serde(serialize_with = "proto_name")]
    pub proto: StreamProto,
    /// Message size.
    pub size: usize,
    /// Rate.
    #[serde(serialize_with = "display")]
    pub rate: StreamRate,
    /// Messages per publisher at most.
    pub count: Option<u64>,
    /// How long.
    pub duration: Duration,
    /// Interval of the progress lines.
    pub interval: Duration,
    /// Publishers per destination.
    pub parallel: u16,
    /// Which way.
    #[serde(serialize_with = "direction_name")]
    pub direction: Direction,
    /// Multicast group the serves join and the client sends to.
    pub group: Option<SocketAddrV4>,
    /// Fire and forget at `targets` (for `wirebench listen`).
    pub no_control: bool,
    /// Both ways, this side sending only once it hears the other.
    pub polite: bool,
    /// Multicast TTL.
    pub ttl: u32,
    /// Interface for multicast.
    pub interface: Option<String>,
    /// Token for serve.
    #[serde(skip)]
    pub token: Option<String>,
    /// Search for the highest loss-free rate.
    pub find_max_rate: bool,
    /// Loss allowed in that search (share).
    pub loss_target: f64,
    /// Length of each search trial.
    pub trial: Duration,
    /// Size sweep.
    pub sizes: Vec<usize>,
    /// TSV interval log.
    pub log: Option<PathBuf>,
    /// JSON report.
    pub json: Option<PathBuf>,
    /// Only the summary.
    pub quiet: bool,
    /// Intervals one progress line covers (a long run's default lines stay within a screen).
    #[serde(skip)]
    pub line_every: usize,
    /// The receive buffer the receiving socket asks for (serve's in forward runs, this
    /// client's in reverse runs), bytes; `None`: 16 MiB.
    pub rcvbuf: Option<usize>,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's serialize_with signature")]
fn proto_name<S: serde::Serializer>(p: &StreamProto, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match p {
        StreamProto::Udp => "udp",
        StreamProto::Tcp => "tcp",
    })
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's serialize_with signature")]
fn direction_name<S: serde::Serializer>(d: &Direction, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(direction_str(*d))
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

/// `forward`, `reverse` or `both`.
pub(super) const fn direction_str(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Reverse => "reverse",
        Direction::Both => "both",
    }
}

fn usage(s: String) -> UsageError {
    UsageError(s)
}

/// Parses `50%`-style or plain shares: `0`, `0.1%`, `0.001`.
pub(super) fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("'{s}' is not a share (try 0, 0.1%, 0.001)"))?;
    if (0.0..1.0).contains(&v) { Ok(v) } else { Err(format!("'{s}' must be at least 0 and below 100%")) }
}

impl Config {
    /// Validates `a`.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        if a.targets.is_empty() {
            return Err(usage("give at least one TARGET (a wirebench serve's host:port)".into()));
        }
        let targets = a.targets.iter().map(|t| crate::addr::resolve(t)).collect::<Result<Vec<_>, _>>()?;
        let proto = if a.proto == crate::addr::Proto::Tcp { StreamProto::Tcp } else { StreamProto::Udp };
        let (default_size, max) = match proto {
            StreamProto::Udp => (DEFAULT_UDP_SIZE, stream::MAX_UDP_LEN),
            StreamProto::Tcp => (DEFAULT_TCP_SIZE, usize::from(u16::MAX)),
        };
        let size = a.size.map_or(default_size.min(max), |b| usize::try_from(b.0).unwrap_or(usize::MAX));
        if !(stream::HEADER_LEN..=max).contains(&size) {
            return Err(usage(format!(
                "--size {size} is outside {}..={max} bytes for {}",
                stream::HEADER_LEN,
                a.proto.name()
            )));
        }
        let mut sizes: Vec<usize> =
            a.sizes.iter().flatten().map(|b| usize::try_from(b.0).unwrap_or(usize::MAX)).collect();
        if let Some(bad) = sizes.iter().find(|s| !(stream::HEADER_LEN..=max).contains(*s)) {
            return Err(usage(format!("--sizes: {bad} is outside {}..={max} bytes", stream::HEADER_LEN)));
        }
        sizes.dedup();
        if a.parallel == 0 || a.parallel > MAX_PUBLISHERS {
            return Err(usage(format!("--parallel must be 1..={MAX_PUBLISHERS}")));
        }
        if a.count == Some(wirebench_core::units::Count(0)) {
            return Err(usage("--count must be at least 1".into()));
        }
        if a.duration.is_some_and(|d| d.0.is_zero()) {
            return Err(usage("--duration must be above 0".into()));
        }
        if a.trial.0 < Duration::from_millis(100) || a.trial.0 > MAX_TRIAL {
            return Err(usage("--trial must be at least 100ms and at most 60s (RFC 2544's trial)".into()));
        }
        let direction = match (a.reverse, a.bidir) {
            (true, true) => {
                return Err(usage("--reverse and --bidir: pick one (--bidir sends both ways)".into()));
            }
            (_, true) => Direction::Both,
            (true, false) => Direction::Reverse,
            (false, false) => Direction::Forward,
        };
        if a.polite && direction != Direction::Both {
            return Err(usage("--polite waits to hear the other side: it needs --bidir".into()));
        }
        if proto == StreamProto::Tcp && direction == Direction::Both {
            return Err(usage("--bidir is UDP only: run TCP --reverse separately".into()));
        }
        if a.group.is_some() && direction != Direction::Forward {
            return Err(usage("--group streams go one way: the client sends to the group".into()));
        }
        if a.group.is_some() && proto == StreamProto::Tcp {
            return Err(usage("--group needs --proto udp".into()));
        }
        if let Some(g) = a.group
            && !g.ip().is_multicast()
        {
            return Err(usage(format!("--group {g} is not a multicast group")));
        }
        if a.no_control && (direction != Direction::Forward || a.find_max_rate || proto == StreamProto::Tcp) {
            return Err(usage("--no-control only sends UDP forward (no serve to ask for loss)".into()));
        }
        if a.find_max_rate && !a.sizes.as_ref().is_none_or(Vec::is_empty) {
            return Err(usage("--find-max-rate and --sizes: pick one".into()));
        }
        let interval = a.interval.map_or(Duration::from_secs(1), |i| i.0);
        if interval < Duration::from_millis(100) {
            return Err(usage("--interval must be at least 100ms".into()));
        }
        let duration =
            a.duration.map_or(if a.count.is_some() { Duration::from_secs(3600) } else { DEFAULT_DURATION }, |d| d.0);
        #[expect(clippy::cast_precision_loss, reason = "rates")]
        let rate = a.bitrate.map_or(a.rate, |b| StreamRate::Bits(b.bps() as f64));
        // How long the run is expected to last: a counted run at a set rate ends at its count.
        let run = match (a.count, rate.per_sec(size)) {
            #[expect(clippy::cast_precision_loss, reason = "an estimate")]
            (Some(n), Some(r)) if r > 0.0 => {
                Duration::try_from_secs_f64(n.0 as f64 / r).unwrap_or(duration).min(duration)
            }
            _ => duration,
        };
        let line_every = if a.interval.is_some() || a.output.verbose {
            1
        } else {
            wirebench_report::screen::intervals_per_line(run, interval)
        };
        let rcvbuf = match a.rcvbuf {
            Some(b) if b.0 == 0 || b.0 > MAX_RCVBUF as u64 => {
                return Err(usage(format!("--rcvbuf {b} is outside 1 B..={}", ByteSize(MAX_RCVBUF as u64))));
            }
            Some(_) if proto == StreamProto::Tcp || a.no_control => {
                return Err(usage("--rcvbuf sizes a UDP stream's receiving socket: it needs UDP and a serve".into()));
            }
            b => b.map(|b| usize::try_from(b.0).unwrap_or(MAX_RCVBUF)),
        };
        let loss_target = parse_share(&a.loss_target).map_err(|e| usage(format!("--loss-target {e}")))?;
        if let Some(i) = &a.mcast.interface.interface {
            wirebench_net::iface::ipv4_of(i).map_err(|e| usage(e.to_string()))?;
        }
        Ok(Self {
            targets,
            proto,
            size,
            rate,
            count: a.count.map(|c| c.0),
            duration,
            interval,
            parallel: a.parallel,
            direction,
            group: a.group,
            no_control: a.no_control,
            polite: a.polite,
            ttl: a.mcast.ttl,
            interface: a.mcast.interface.interface.clone(),
            token: a.token.read()?,
            find_max_rate: a.find_max_rate,
            loss_target,
            trial: a.trial.0,
            sizes,
            log: a.log.clone(),
            json: a.output.json.clone(),
            quiet: a.output.quiet,
            line_every,
            rcvbuf,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<Config, String> {
        let a: Args = crate::flags::parse_mode("stream", args).map_err(|e| e.to_string())?;
        Config::from_args(&a).map_err(|e| e.0)
    }

    #[test]
    fn the_receive_buffer_is_checked() {
        assert_eq!(cfg(&["127.0.0.1:7878"]).unwrap().rcvbuf, None);
        assert_eq!(cfg(&["127.0.0.1:7878", "--rcvbuf", "4k"]).unwrap().rcvbuf, Some(4000));
        assert!(cfg(&["127.0.0.1:7878", "--rcvbuf", "0"]).unwrap_err().contains("--rcvbuf 0"));
        assert!(cfg(&["127.0.0.1:7878", "--rcvbuf", "1g"]).is_err());
        assert!(cfg(&["127.0.0.1:7878", "--rcvbuf", "4k", "--proto", "tcp"]).unwrap_err().contains("needs UDP"));
    }

    #[test]
    fn defaults() {
        let c = cfg(&["127.0.0.1:7878"]).unwrap();
        assert_eq!((c.size, c.proto, c.direction, c.parallel), (1468, StreamProto::Udp, Direction::Forward, 1));
        assert_eq!((c.rate, c.duration), (StreamRate::Max, DEFAULT_DURATION));
        assert_eq!(cfg(&["127.0.0.1:7878", "--proto", "tcp"]).unwrap().size, DEFAULT_TCP_SIZE);
        // trials from 100 ms to RFC 2544's 60 s
        assert_eq!(cfg(&["127.0.0.1:7878", "--trial", "60s"]).unwrap().trial, MAX_TRIAL);
        assert_eq!(cfg(&["127.0.0.1:7878", "--trial", "100ms"]).unwrap().trial, Duration::from_millis(100));
    }

    #[test]
    fn a_long_run_prints_a_line_per_tenth_of_it() {
        let every = |v: &[&str]| cfg(&[&["127.0.0.1:7878"], v].concat()).unwrap().line_every;
        assert_eq!(every(&[]), 1, "10 s: each second");
        assert_eq!(every(&["-t", "60s"]), 6);
        assert_eq!(every(&["-t", "60s", "-v"]), 1, "-v: every interval");
        assert_eq!(every(&["-t", "60s", "--interval", "2s"]), 1, "as asked");
        assert_eq!(every(&["-n", "300k", "--rate", "10k/s"]), 3, "30 s at the count's pace");
        assert_eq!(every(&["-n", "300k"]), 360, "flat out: the 1 h deadline");
    }

    #[test]
    fn shares() {
        assert_eq!(parse_share("0"), Ok(0.0));
        assert_eq!(parse_share("0.1%"), Ok(0.001));
        assert!(parse_share("100%").is_err());
        assert!(parse_share("lots").is_err());
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["127.0.0.1:7878", "--size", "65508"], "outside 32..=65507"),
            (&["127.0.0.1:7878", "--size", "8"], "outside"),
            (&["127.0.0.1:7878", "--rate", "0"], "ambiguous"),
            (&["127.0.0.1:7878", "--rate", "100M"], "100mbit (bits/s) or 100M/s (messages/s)?"),
            (&["127.0.0.1:7878", "--rate", "0/s"], "must be above 0"),
            (&["127.0.0.1:7878", "--rate", "0mbit"], "must be above 0"),
            (&["127.0.0.1:7878", "--duration", "0s"], "--duration must be above 0"),
            (&["127.0.0.1:7878", "--ttl", "0"], "--ttl"),
            (&["127.0.0.1:7878", "--ttl", "256"], "--ttl"),
            (&["127.0.0.1:7878", "--reverse", "--bidir"], "pick one"),
            (&["127.0.0.1:7878", "--trial", "0s"], "--trial must be at least 100ms"),
            (&["127.0.0.1:7878", "--trial", "61s"], "at most 60s"),
            (&["127.0.0.1:7878", "--polite"], "needs --bidir"),
            (&["127.0.0.1:7878", "--parallel", "0"], "--parallel"),
            (&["127.0.0.1:7878", "--group", "10.0.0.1:5000"], "not a multicast group"),
            (&["127.0.0.1:7878", "--proto", "tcp", "--bidir"], "UDP only"),
            (&["127.0.0.1:7878", "--loss-target", "150%"], "--loss-target"),
            (&["127.0.0.1:7878", "--sizes", "64,16"], "--sizes: 16"),
            (&["127.0.0.1:7878", "--interface", "nope0"], "interface 'nope0'"),
            (&["nowhere"], "bad address"),
        ];
        for (args, want) in cases {
            let e = cfg(args).expect_err(&format!("{args:?}"));
            assert!(e.contains(want), "{args:?}: '{e}' should mention '{want}'");
        }
    }
}
