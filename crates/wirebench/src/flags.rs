//! Flags read outside the command line's own parse: one command's flags parsed alone, as its
//! subcommand would parse them (the suite's steps, a relay's peers file, tests of a `Config`);
//! and the flag groups several commands flatten, so a flag means, defaults and validates the
//! same everywhere (`cli.rs`'s `shared_flags` tests walk every command for them).

use clap::Parser;

/// Parses one mode's flags as its subcommand would (for the suite, and for tests of a mode's
/// `Config`).
pub fn parse_mode<A: clap::Args>(name: &str, args: &[&str]) -> Result<A, clap::Error> {
    #[derive(Parser)]
    struct One<A: clap::Args> {
        #[command(flatten)]
        a: A,
    }
    Ok(One::<A>::try_parse_from(std::iter::once(name).chain(args.iter().copied()))?.a)
}

/// `--ttl`'s one range; clap checks it, so every command refuses 0 and 256 with one message.
pub const TTL_RANGE: std::ops::RangeInclusive<i64> = 1..=255;

/// `--interface` where it names the interface multicast goes by: group joins and what is
/// sent to a group (`doctor`'s, the interface it checks, is its own).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InterfaceArg {
    /// Interface (name or IPv4 address) for multicast: the group joins and group sends.
    #[arg(long, env = "WIREBENCH_INTERFACE")]
    pub interface: Option<String>,
}

impl InterfaceArg {
    /// The interface's IPv4 address, if one was given; a name that does not exist is the
    /// user's mistake (exit 2).
    pub fn ipv4(&self) -> Result<Option<std::net::Ipv4Addr>, crate::error::UsageError> {
        self.interface
            .as_deref()
            .map(wirebench_net::iface::ipv4_of)
            .transpose()
            .map_err(|e| crate::error::UsageError(e.to_string()))
    }
}

/// The flags of every command that sends to a multicast group: the interface and the TTL.
/// The TTL's default is 32 (across routers); `relay` and `mesh agent`, whose groups stay on
/// the link, set theirs to 1 with [`MulticastArgs::LINK_LOCAL`].
#[derive(Debug, Clone, clap::Args)]
pub struct MulticastArgs {
    /// The interface for the joins and the group sends.
    #[command(flatten)]
    pub interface: InterfaceArg,
    /// Multicast TTL of what this command sends to a group (1..=255).
    #[arg(long, default_value_t = 32, env = "WIREBENCH_TTL", value_parser = clap::value_parser!(u32).range(TTL_RANGE))]
    pub ttl: u32,
}

impl MulticastArgs {
    /// The TTL default of the commands whose groups stay on the link; a `mut_arg` of the
    /// command that flattens this group sets it (`relay`, `mesh agent`).
    pub const LINK_LOCAL: &str = "1";
}

/// `--json FILE`, `-q` and `-v`, on the commands that measure and print a report: what each
/// command's `-q` keeps and `-v` adds is its own, named in its help (a `mut_arg` of the
/// command sets that text).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Write the JSON report.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Only the summary.
    #[arg(long, short = 'q', conflicts_with = "verbose")]
    pub quiet: bool,
    /// The details too.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

impl OutputArgs {
    /// How much the text on the screen says.
    pub fn detail(&self) -> wirebench_report::screen::Detail {
        wirebench_report::screen::Detail::of(self.quiet, self.verbose)
    }
}

/// `--spin` and `--cpu` where they mean the same: busy-poll instead of blocking, and pin the
/// command's hot threads to one CPU (`serve`, `ping`; proxy's `--spin` sleeps again when idle
/// and is its own). Each command names its threads in its help (a `mut_arg`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PinArgs {
    /// Busy-poll instead of blocking.
    #[arg(long)]
    pub spin: bool,
    /// Pin the hot threads to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

impl PinArgs {
    /// `--cpu`, checked against this host's CPUs.
    pub fn checked_cpu(&self) -> Result<Option<usize>, crate::error::UsageError> {
        let n = wirebench_net::pin::cpu_count();
        match self.cpu {
            Some(c) if c >= n => {
                Err(crate::error::UsageError(format!("--cpu {c}: this host has CPUs 0..{}", n.saturating_sub(1))))
            }
            c => Ok(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PinArgs;

    #[test]
    fn a_cpu_past_this_hosts_is_refused_in_one_way() {
        let pin = |cpu| PinArgs { spin: false, cpu };
        assert_eq!(pin(Some(0)).checked_cpu().unwrap(), Some(0));
        assert_eq!(pin(None).checked_cpu().unwrap(), None);
        let e = pin(Some(100_000)).checked_cpu().unwrap_err().0;
        assert!(e.starts_with("--cpu 100000: this host has CPUs 0.."), "{e}");
    }
}
