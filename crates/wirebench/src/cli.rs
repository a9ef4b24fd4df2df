//! The command line: one subcommand per mode, each with its own `Args` (STYLE C4).

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

/// wirebench: a network performance lab in one binary.
#[derive(Debug, Parser)]
#[command(name = "wirebench", version, about, long_about = None, propagate_version = true, arg_required_else_help = true)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The modes.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The far end: echo latency probes on UDP and TCP (one port, default 7878).
    Serve(crate::serve::Args),
    /// Round-trip latency to a serve (UDP unicast or multicast, TCP), closed or open loop.
    Ping(crate::ping::Args),
    /// Throughput and loss of a sequenced UDP or TCP stream to one or more serves.
    Stream(crate::stream::Args),
    /// A standalone receiver: DatagramTest's Now/Lifetime reports per publisher.
    Listen(crate::listen::Args),
    /// The main job with no setup: serve in-process on loopback and a short tour of every
    /// measurement, saved to wirebench-report/.
    Suite(crate::suite::Args),
    /// Render saved reports: text, one self-contained HTML page with charts, or runs side by
    /// side with ratios (--compare).
    Report(crate::report::Args),
    /// Check this host for what skews or breaks measurements (socket buffers, MTU and path
    /// MTU, multicast routes, CPUs, clocksource) and print the fix; changes nothing.
    Doctor(crate::doctor::Args),
    /// UDP/TCP impairment proxy: delay, jitter, loss (random, bursty), reorder, duplicate,
    /// rate; reports requested vs achieved.
    Proxy(Box<crate::proxy::Args>),
    /// Print (or apply, or clear) tc/iptables scripts that shape clients' links.
    Shape(crate::shape::Args),
    /// A reference WebSocket room server: relays each message to the room's other members,
    /// answers requests; counts msgs/s and its own CPU.
    #[cfg(feature = "room")]
    Room(crate::room::Args),
    /// Application load over WebSocket: clients in rooms, an open-loop event mix, delay from
    /// departure to arrival at every receiver, per-client link shaping, thresholds.
    #[cfg(feature = "load")]
    Load(Box<crate::load::Args>),
    /// The fleet view: an agent on every node probing its peers (UDP, TCP, multicast), and
    /// the node-to-node matrix with node, zone and path verdicts (`mesh agent`, `mesh status`).
    #[cfg(feature = "mesh")]
    Mesh(crate::mesh::Args),
    /// How late this host wakes a sleeping thread (jHiccup's stall meter), on its own: the
    /// platform's own stalls, which every measurement on it also suffers.
    Hiccup(crate::hiccup::Args),
    /// Carry multicast groups between nodes over unicast where the network has none: one
    /// relay per node, forwarding to its peer relays and re-emitting what they send.
    #[cfg(feature = "mesh")]
    Relay(Box<crate::relay::Args>),
    /// Print a new random token for serve, mesh agents and relays (256 bits, base64url).
    Token(crate::token::Args),
}

impl Command {
    /// The files this command writes, with their flags: checked before a run starts (a
    /// path that cannot be written is exit 2, not a lost run), and `-` (standard output)
    /// sends the command's text to standard error.
    pub fn outputs(&self) -> Vec<(&'static str, &Path)> {
        fn add<'a>(v: &mut Vec<(&'static str, &'a Path)>, flag: &'static str, p: Option<&'a PathBuf>) {
            v.extend(p.map(|p| (flag, p.as_path())));
        }
        let mut v = Vec::new();
        match self {
            Self::Ping(a) => {
                add(&mut v, "--json", a.output.json.as_ref());
                add(&mut v, "--hgrm", a.hgrm.as_ref());
                add(&mut v, "--hlog", a.hlog.as_ref());
            }
            Self::Stream(a) => {
                add(&mut v, "--json", a.output.json.as_ref());
                add(&mut v, "--log", a.log.as_ref());
            }
            Self::Listen(a) => {
                add(&mut v, "--json", a.output.json.as_ref());
                add(&mut v, "--log", a.log.as_ref());
            }
            Self::Proxy(a) => add(&mut v, "--json", a.output.json.as_ref()),
            #[cfg(feature = "mesh")]
            Self::Relay(a) => add(&mut v, "--json", a.json.as_ref()),
            #[cfg(feature = "load")]
            Self::Load(a) => {
                add(&mut v, "--json", a.output.json.as_ref());
                add(&mut v, "--series", a.series.as_ref());
            }
            Self::Doctor(a) => add(&mut v, "--json", a.output.json.as_ref()),
            Self::Report(a) => {
                add(&mut v, "--html", a.html.as_ref());
                add(&mut v, "--json", a.json.as_ref());
            }
            #[cfg(feature = "mesh")]
            Self::Mesh(a) => {
                if let crate::mesh::MeshCommand::Status(s) = &a.command {
                    add(&mut v, "--json", s.json.as_ref());
                }
            }
            Self::Hiccup(a) => add(&mut v, "--json", a.json.as_ref()),
            #[cfg(feature = "room")]
            Self::Room(_) => {}
            Self::Serve(_) | Self::Suite(_) | Self::Shape(_) | Self::Token(_) => {}
        }
        v
    }
}

/// Every rate, size, count and duration flag of every command reads the one grammar of
/// `wirebench_core::units` (docs/units.md). Over the default build's commands.
#[cfg(all(test, feature = "load", feature = "room", feature = "mesh"))]
mod unit_flags {
    use std::any::TypeId;

    use clap::CommandFactory as _;
    use wirebench_core::impair::spec::{Delay, Jitter, LossBurst, Percent, Reorder};
    use wirebench_core::load::shaper::Link;
    use wirebench_core::units::{BitRate, ByteSize, Count, CountOrSpan, MsgRate, Span, StreamRate};

    use super::Cli;

    /// The grammar's types, and flags built from them (`RATE/DELAY`, `IP=RATE/DELAY`,
    /// `2ms:normal`).
    fn unit_types() -> Vec<(TypeId, &'static str)> {
        vec![
            (TypeId::of::<Span>(), "duration"),
            (TypeId::of::<MsgRate>(), "message rate"),
            (TypeId::of::<BitRate>(), "bit rate"),
            (TypeId::of::<StreamRate>(), "bit or message rate"),
            (TypeId::of::<ByteSize>(), "size"),
            (TypeId::of::<Count>(), "count"),
            (TypeId::of::<CountOrSpan>(), "count or duration"),
            (TypeId::of::<Delay>(), "duration"),
            (TypeId::of::<Jitter>(), "duration:distribution"),
            (TypeId::of::<Percent>(), "percent"),
            (TypeId::of::<LossBurst>(), "percent,percent"),
            (TypeId::of::<Reorder>(), "percent"),
            (TypeId::of::<Link>(), "bit rate/duration"),
            (TypeId::of::<crate::shape::LinkSpec>(), "bit rate/duration"),
            (TypeId::of::<crate::shape::ClientSpec>(), "ip=bit rate/duration"),
            (TypeId::of::<crate::load::TypeSize>(), "type=size"),
        ]
    }

    /// Every flag that takes a value: (command path, long name, what it reads).
    fn flags() -> Vec<(String, String, Option<&'static str>, String)> {
        fn walk(
            cmd: &clap::Command,
            path: &str,
            units: &[(TypeId, &'static str)],
            out: &mut Vec<(String, String, Option<&'static str>, String)>,
        ) {
            for a in cmd.get_arguments() {
                if !a.get_num_args().is_some_and(|n| n.takes_values()) && !a.get_action().takes_values() {
                    continue;
                }
                let Some(long) = a.get_long() else { continue };
                let id = a.get_value_parser().type_id();
                let unit = units.iter().find(|(t, _)| id == *t).map(|(_, w)| *w);
                out.push((path.to_owned(), long.to_owned(), unit, format!("{id:?}")));
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), units, out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "wirebench", &unit_types(), &mut out);
        out
    }

    /// Words that make a flag a rate, size, count or duration.
    const QUANTITY: &[&str] = &[
        "rate",
        "size",
        "count",
        "duration",
        "time",
        "interval",
        "every",
        "expiry",
        "wait",
        "budget",
        "backlog",
        "message",
        "max-",
        "min-",
        "ramp",
        "warmup",
        "trial",
        "held",
        "flows",
        "clients",
        "responders",
        "publishers",
        "senders",
        "sessions",
        "connections",
        "rcvbuf",
        "refresh",
        "window",
        "after",
        "delay",
        "jitter",
        "loss",
        "poll",
        "inter-zone",
        "full-mesh",
        "limit",
        "check",
        "sizes",
        "link",
        "len",
        "mps",
    ];

    /// Flags that look like quantities but are not in the grammar, and why.
    const NOT_UNITS: &[(&str, &str, &str)] = &[
        ("wirebench stream", "loss-target", "a share: 0, 0.1%"),
        ("wirebench mesh status", "max-loss", "a percentage"),
        ("wirebench load", "start-at", "a wall-clock time"),
        ("wirebench serve", "stamp-max-rate", "max, or a message rate read by MsgRate"),
        ("wirebench mesh agent", "stamp-max-rate", "max, or a message rate read by MsgRate"),
    ];

    /// Plain numbers that are no rate, size, count or duration, and why.
    const PLAIN_NUMBERS: &[(&str, &str)] = &[
        ("ttl", "hops, 1..=255"),
        ("cpu", "a CPU index"),
        ("seed", "an RNG seed"),
        ("parallel", "a handful of streams, 1..=128"),
        ("scale", "a multiplier of the suite's durations"),
        ("percentiles", "percentiles, 0..100"),
        ("max-loss", "a percentage"),
        ("stamp-session-id", "an RFC 8972 session id, 0..=65535"),
    ];

    #[test]
    fn every_rate_size_count_and_duration_flag_reads_the_one_grammar() {
        let all = flags();
        assert!(all.len() > 150, "the walk found {} flags: it missed commands", all.len());
        let mut wrong = Vec::new();
        for (cmd, long, unit, ty) in &all {
            let quantity =
                QUANTITY.iter().any(|w| long.contains(w)) && !NOT_UNITS.iter().any(|(c, l, _)| c == cmd && l == long);
            if quantity && unit.is_none() {
                wrong.push(format!("{cmd} --{long} looks like a quantity but parses as {ty}"));
            }
            let plain = ["u8", "u16", "u32", "u64", "usize", "i32", "i64", "f32", "f64"].contains(&ty.as_str());
            if plain && !PLAIN_NUMBERS.iter().any(|(l, _)| l == long) {
                wrong.push(format!("{cmd} --{long} takes a plain {ty}: use a wirebench_core::units type"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // The walk sees the flags this test is about.
        for (cmd, long) in [("wirebench stream", "rate"), ("wirebench ping", "count"), ("wirebench proxy", "rate")] {
            assert!(all.iter().any(|(c, l, u, _)| c == cmd && l == long && u.is_some()), "{cmd} --{long}");
        }
    }
}

/// iperf3, sockperf and k6 habits that carry over (docs/units.md, "Habits").
#[cfg(all(test, feature = "load", feature = "room", feature = "mesh"))]
mod habits {
    use crate::flags::parse_mode;

    #[test]
    fn aliases_read_as_the_flags_they_stand_for() {
        let stream = |args: &[&str]| parse_mode::<crate::stream::Args>("stream", args).unwrap();
        let sa = stream(&["127.0.0.1:1", "-t", "5s", "-l", "1k", "-b", "100M", "-u"]);
        let sw = stream(&["h:1", "--duration", "5s", "--size", "1000", "--rate", "100mbit"]);
        assert_eq!((sa.duration, sa.size), (sw.duration, sw.size));
        let cfg = crate::stream::Config::from_args(&sa).unwrap();
        assert_eq!(cfg.rate, wirebench_core::units::StreamRate::Bits(100e6));
        assert!(sa.udp);
        assert_eq!(stream(&["h:1", "--time", "5s", "--len", "64"]).size.map(|b| b.0), Some(64));
        assert!(parse_mode::<crate::stream::Args>("stream", &["h:1", "-b", "1g", "--rate", "1gbit"]).is_err());
        assert!(parse_mode::<crate::stream::Args>("stream", &["h:1", "-u", "--proto", "tcp"]).is_err());

        let ping = |args: &[&str]| parse_mode::<crate::ping::Args>("ping", args).unwrap();
        let pa = ping(&["h:1", "--mps", "10k", "-t", "2s", "--msg-size", "64"]);
        let pw = ping(&["h:1", "--rate", "10k/s", "--duration", "2s", "--size", "64"]);
        assert_eq!((pa.rate, pa.duration, pa.size), (pw.rate, pw.duration, pw.size));

        let x = parse_mode::<crate::proxy::Args>(
            "proxy",
            &["--listen", "a:1", "--upstream", "b:2", "-b", "100M", "-t", "1s"],
        );
        let x = x.unwrap();
        assert_eq!(
            (x.rate.map(wirebench_core::units::BitRate::bps), x.duration.map(|d| d.0.as_secs())),
            (Some(100_000_000), Some(1))
        );

        let ld = parse_mode::<crate::load::Args>("load", &["ws://h/r", "--vus", "20", "-t", "3s"]).unwrap();
        assert_eq!((ld.clients.map(|c| c.0), ld.duration.map(|d| d.0.as_secs())), (Some(20), Some(3)));
        for (mode, args) in [("hiccup", &["-t", "1s"][..]), ("listen", &["--time", "1s"]), ("relay", &["-t", "1s"])] {
            let ok = match mode {
                "hiccup" => parse_mode::<crate::hiccup::Args>(mode, args).is_ok(),
                "listen" => parse_mode::<crate::listen::Args>(mode, args).is_ok(),
                _ => parse_mode::<crate::relay::Args>(mode, args).is_ok(),
            };
            assert!(ok, "{mode} {args:?}");
        }
    }
}

/// The shared flag groups hold on every command: one `--ttl` range and env, `--interface`
/// from the environment, `--json` a file, `-q` and `-v` that exclude each other.
#[cfg(all(test, feature = "load", feature = "room", feature = "mesh"))]
mod shared_flags {
    use clap::CommandFactory as _;

    use super::Cli;

    /// Every (command path, argument) of every command, subcommands too.
    fn args() -> Vec<(String, clap::Arg)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
            out.extend(cmd.get_arguments().map(|a| (path.to_owned(), a.clone())));
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "wirebench", &mut out);
        out
    }

    /// Does `arg` take `value`?
    fn takes(arg: &clap::Arg, value: &str) -> bool {
        let long = format!("--{}={value}", arg.get_long().unwrap());
        clap::Command::new("t").arg(arg.clone()).try_get_matches_from(["t", long.as_str()]).is_ok()
    }

    fn named<'a>(all: &'a [(String, clap::Arg)], long: &str) -> Vec<&'a (String, clap::Arg)> {
        all.iter().filter(|(_, a)| a.get_long() == Some(long)).collect()
    }

    #[test]
    fn every_ttl_has_one_range_and_reads_wirebench_ttl() {
        let all = args();
        let ttls = named(&all, "ttl");
        let cmds: Vec<&str> = ttls.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            cmds,
            ["wirebench serve", "wirebench ping", "wirebench stream", "wirebench mesh agent", "wirebench relay"]
        );
        for (cmd, a) in ttls {
            assert_eq!(a.get_env().and_then(|e| e.to_str()), Some("WIREBENCH_TTL"), "{cmd}");
            for (v, ok) in [("0", false), ("1", true), ("255", true), ("256", false), ("-1", false)] {
                assert_eq!(takes(a, v), ok, "{cmd} --ttl {v}");
            }
        }
        // The defaults each command had: 32 across routers, 1 where the group stays on the link.
        let default = |cmd: &str| {
            let (_, a) = all.iter().find(|(c, a)| c == cmd && a.get_long() == Some("ttl")).unwrap();
            a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>()
        };
        for (cmd, want) in [
            ("wirebench serve", "32"),
            ("wirebench ping", "32"),
            ("wirebench stream", "32"),
            ("wirebench mesh agent", "1"),
            ("wirebench relay", "1"),
        ] {
            assert_eq!(default(cmd), [want], "{cmd}");
        }
    }

    #[test]
    fn every_interface_reads_wirebench_interface() {
        let all = args();
        let ifaces = named(&all, "interface");
        assert!(ifaces.len() >= 7, "{}", ifaces.len());
        for (cmd, a) in ifaces {
            assert_eq!(a.get_env().and_then(|e| e.to_str()), Some("WIREBENCH_INTERFACE"), "{cmd}");
        }
    }

    #[test]
    fn every_quiet_is_q_every_verbose_is_v_and_they_conflict() {
        fn walk(cmd: &clap::Command, path: &str, pairs: &mut usize) {
            let find = |long: &str| cmd.get_arguments().find(|a| a.get_long() == Some(long));
            if let Some(q) = find("quiet") {
                assert_eq!(q.get_short(), Some('q'), "{path}");
            }
            if let Some(v) = find("verbose") {
                assert_eq!(v.get_short(), Some('v'), "{path}");
            }
            if let (Some(q), Some(v)) = (find("quiet"), find("verbose")) {
                let conflicts = cmd.get_arg_conflicts_with(q);
                assert!(conflicts.iter().any(|c| c.get_id() == v.get_id()), "{path}: -q and -v conflict");
                *pairs += 1;
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), pairs);
            }
        }
        let mut pairs = 0;
        walk(&Cli::command(), "wirebench", &mut pairs);
        assert_eq!(pairs, 6, "ping, stream, listen, proxy, load, doctor");
    }

    #[test]
    fn serve_and_ping_refuse_a_cpu_in_one_way() {
        use crate::flags::parse_mode;
        let serve = crate::serve::Config::from_args(&parse_mode("serve", &["--cpu", "100000"]).unwrap());
        let ping = crate::ping::Config::from_args(&parse_mode("ping", &["127.0.0.1:7878", "--cpu", "100000"]).unwrap());
        for e in [serve.unwrap_err().0, ping.unwrap_err().0] {
            assert!(e.starts_with("--cpu 100000: this host has CPUs 0.."), "{e}");
        }
    }

    #[test]
    fn every_json_takes_a_file() {
        let all = args();
        let jsons = named(&all, "json");
        assert!(jsons.len() >= 10, "{}", jsons.len());
        for (cmd, a) in jsons {
            assert!(a.get_action().takes_values(), "{cmd} --json takes a value");
            let names: Vec<&str> =
                a.get_value_names().unwrap_or_default().iter().map(clap::builder::Str::as_str).collect();
            assert!(names == ["FILE"] || names == ["OUT.json"], "{cmd} --json {names:?}");
            assert_eq!(
                a.get_value_parser().type_id(),
                clap::builder::ValueParser::path_buf().type_id(),
                "{cmd} --json reads a path"
            );
        }
    }
}
