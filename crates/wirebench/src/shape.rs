//! `wirebench shape tc`: the tc (and iptables) commands that give each client its own
//! rate and delay on a device, for hosts or containers that cannot run the proxy: printed
//! by default, run with `--apply` (needs NET_ADMIN), removed with `--clear`.
//!
//! It never removes what it did not create: `--apply` refuses a device that already has a
//! root qdisc (or the iptables chain) and prints the command that clears it; a failing
//! `--apply` rolls back only what it added; `--clear` removes only the `htb 1:` root that
//! `--apply` makes.
//!
//! netem (the delay) is missing from some kernels (this lab's among them): `--netem auto`
//! checks by adding a netem qdisc inside a throwaway network namespace (`unshare --net`);
//! without it the script keeps the rates (htb + tbf) and says which delays it cannot apply,
//! with the `wirebench proxy` line that adds them in user space.

pub mod script;

use std::net::Ipv4Addr;
use std::process::Command;
use std::str::FromStr;

use anyhow::bail;
use wirebench_core::impair::spec::span_ns;
use wirebench_core::units::{BitRate, humanize_ns};

use self::script::{Cmd, Link, MAX_CLIENTS, Plan, Script};
use crate::ctx::Ctx;
use crate::error::UsageError;

/// `wirebench shape` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What to write.
    #[command(subcommand)]
    pub what: What,
}

/// Shaping back-ends.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum What {
    /// Linux tc: an HTB class per client (plus netem for delay, or tbf), u32 filters on the
    /// client's address, and iptables mangle marks for clients behind a NAT gateway.
    Tc(TcArgs),
}

/// Is netem used for the delays?
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Netem {
    /// Check this kernel (needs root for the check).
    Auto,
    /// Use netem.
    Yes,
    /// Do not: rates only.
    No,
}

/// `wirebench shape tc` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TcArgs {
    /// The device whose egress is shaped (toward the clients, or toward the network).
    #[arg(long)]
    pub dev: String,
    /// A client: IP=RATE[/DELAY], e.g. 10.0.0.11=60.76mbit/10ms (repeatable).
    #[arg(long = "client", value_name = "IP=RATE[/DELAY]")]
    pub clients: Vec<ClientSpec>,
    /// Everyone else: RATE[/DELAY] [default: not shaped].
    #[arg(long, value_name = "RATE[/DELAY]")]
    pub default: Option<LinkSpec>,
    /// netem for the delays: auto checks this kernel.
    #[arg(long, value_enum, default_value = "auto")]
    pub netem: Netem,
    /// Run the commands (needs NET_ADMIN) instead of printing them.
    #[arg(long, conflicts_with = "clear")]
    pub apply: bool,
    /// Remove what --apply set up on --dev.
    #[arg(long)]
    pub clear: bool,
}

/// `RATE[/DELAY]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSpec(pub Link);

impl FromStr for LinkSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rate, delay) = wirebench_core::units::split_rate_delay(s);
        let rate: BitRate = rate.parse().map_err(|e| format!("{e}"))?;
        let delay_ns = delay.map(|d| span_ns("delay", d)).transpose().map_err(|e| e.0)?.unwrap_or(0);
        Ok(Self(Link { rate, delay_ns }))
    }
}

/// `IP=RATE[/DELAY]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSpec(pub Ipv4Addr, pub Link);

impl FromStr for ClientSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((ip, link)) = s.split_once('=') else {
            return Err(format!("'{s}': expected IP=RATE[/DELAY], e.g. 10.0.0.11=60.76mbit/10ms"));
        };
        let ip: Ipv4Addr = ip.trim().parse().map_err(|_| format!("'{ip}' is not an IPv4 address"))?;
        Ok(Self(ip, link.parse::<LinkSpec>()?.0))
    }
}

/// What the netem check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Yes,
    No,
    Unknown,
}

/// Adds a netem qdisc in a throwaway network namespace.
fn probe_netem() -> Found {
    let out = Command::new("unshare")
        .args(["--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
        .output();
    match out {
        Ok(o) if o.status.success() => Found::Yes,
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("qdisc kind is unknown") => Found::No,
        _ => Found::Unknown,
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Runs `c`; the error text on failure.
fn exec(c: &Cmd) -> Result<(), String> {
    match Command::new(&c[0]).args(&c[1..]).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().replace('\n', " ")),
        Err(e) => Err(e.to_string()),
    }
}

/// `wirebench shape`.
pub fn run(args: &Args, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let What::Tc(a) = &args.what;
    if a.dev.is_empty() || a.dev.len() > 15 || a.dev.contains(['/', ' ']) {
        return Err(UsageError(format!("--dev '{}' is not an interface name", a.dev)).into());
    }
    if a.clear {
        return clear(&a.dev, ctx);
    }
    if a.clients.is_empty() && a.default.is_none() {
        return Err(
            UsageError("nothing to shape: give --client IP=RATE[/DELAY] or --default RATE[/DELAY]".into()).into()
        );
    }
    if a.clients.len() > MAX_CLIENTS {
        return Err(UsageError(format!("at most {MAX_CLIENTS} clients per device")).into());
    }
    let found = match a.netem {
        Netem::Yes => Found::Yes,
        Netem::No => Found::No,
        Netem::Auto => probe_netem(),
    };
    let plan = Plan {
        dev: a.dev.clone(),
        clients: a.clients.iter().map(|c| (c.0, c.1)).collect(),
        default: a.default.map(|d| d.0),
        netem: found != Found::No,
    };
    let notes = notes(&plan, found, a.netem);
    let s = script::apply(&plan);
    if !a.apply {
        write!(ctx.out, "{}", script::render(&notes, &s))?;
        return Ok(());
    }
    for n in &notes {
        writeln!(ctx.out, "# {n}")?;
    }
    apply(&plan.dev, &s, ctx)
}

fn notes(plan: &Plan, found: Found, asked: Netem) -> Vec<String> {
    let mut v = vec![format!(
        "wirebench shape tc: {} client(s) on {}, others {}",
        plan.clients.len(),
        plan.dev,
        plan.default.map_or_else(|| "not shaped".to_owned(), |d| script::tc_rate(d.rate))
    )];
    let delayed: Vec<String> = plan
        .clients
        .iter()
        .map(|(ip, l)| (ip.to_string(), l))
        .chain(plan.default.iter().map(|l| ("others".to_owned(), l)))
        .filter(|(_, l)| l.delay_ns > 0)
        .map(|(who, l)| format!("{who} {}", humanize_ns(u128::from(l.delay_ns))))
        .collect();
    match (found, asked) {
        (Found::No, Netem::No) if !delayed.is_empty() => {
            v.push(format!("--netem no: the delays ({}) are NOT applied", delayed.join(", ")));
        }
        (Found::No, _) if !delayed.is_empty() => v.push(format!(
            "netem is not available in this kernel (tc: \"Specified qdisc kind is unknown\"): the rates are applied \
             with htb + tbf, the delays ({}) are NOT",
            delayed.join(", ")
        )),
        (Found::Unknown, _) => v.push(
            "could not check for netem (needs root and unshare): netem assumed; \
                                       use --netem no for a kernel without it"
                .into(),
        ),
        _ => {}
    }
    if found == Found::No && !delayed.is_empty() {
        // One proxy per delay: a proxy delays everything it carries alike.
        let mut by_delay: std::collections::BTreeMap<u64, Vec<String>> = std::collections::BTreeMap::new();
        let links = plan
            .clients
            .iter()
            .map(|(ip, l)| (ip.to_string(), l))
            .chain(plan.default.iter().map(|l| ("others".to_owned(), l)));
        for (who, l) in links.filter(|(_, l)| l.delay_ns > 0) {
            by_delay.entry(l.delay_ns).or_default().push(who);
        }
        let proxy =
            |d: u64| format!("wirebench proxy --listen ADDR --upstream ADDR --delay {}", humanize_ns(u128::from(d)));
        if let [(d, _)] = by_delay.iter().collect::<Vec<_>>()[..] {
            v.push(format!("for the delay, put a user-space proxy in the path: {}", proxy(*d)));
        } else {
            v.push("for the delays, put a user-space proxy in the path of each group of clients:".into());
            v.extend(by_delay.iter().map(|(d, who)| format!("  {} (for {})", proxy(*d), who.join(", "))));
        }
    }
    v
}

/// The device's root qdisc that is not the kernel's default, if any.
fn root_of(dev: &str) -> anyhow::Result<Option<(String, String)>> {
    let out = Command::new("tc").args(["qdisc", "show", "dev", dev]).output();
    match out {
        Ok(o) if o.status.success() => Ok(script::root_qdisc(&String::from_utf8_lossy(&o.stdout))),
        Ok(o) => {
            let e = String::from_utf8_lossy(&o.stderr).trim().replace('\n', " ");
            Err(UsageError(format!("--dev {dev}: `tc qdisc show dev {dev}` failed: {e}")).into())
        }
        Err(e) => bail!("cannot run tc ({e}): install iproute2"),
    }
}

/// Does the mangle chain of `dev` exist?
fn chain_exists(dev: &str) -> bool {
    on_path("iptables") && exec(&cmd(&["iptables", "-t", "mangle", "-S", &script::chain(dev)])).is_ok()
}

fn cmd(parts: &[&str]) -> Cmd {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// Removes the iptables chain of `dev` (each step harmless when already gone); true if
/// anything was removed.
fn remove_chain(dev: &str) -> bool {
    // Every step runs (no short circuit): each removes one piece.
    let done: Vec<bool> = script::clear(dev).iptables.iter().map(|c| exec(c).is_ok()).collect();
    done.contains(&true)
}

fn apply(dev: &str, s: &Script, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    if let Some((kind, handle)) = root_of(dev)? {
        return Err(UsageError(format!(
            "{dev} already has a root qdisc ({kind} {handle}) and --apply never replaces what it did not create: \
             remove it with `tc qdisc del dev {dev} root` (or `wirebench shape tc --dev {dev} --clear` if an earlier \
             --apply made it), then apply again"
        ))
        .into());
    }
    if !s.iptables.is_empty() && chain_exists(dev) {
        let ch = script::chain(dev);
        return Err(UsageError(format!(
            "the iptables chain {ch} already exists: remove it with `wirebench shape tc --dev {dev} --clear` \
             (or `iptables -t mangle -F {ch} && iptables -t mangle -X {ch}`), then apply again"
        ))
        .into());
    }
    let undo_tc = || {
        let _ = exec(&script::clear(dev).tc[0]);
    };
    for (i, c) in s.tc.iter().enumerate() {
        writeln!(ctx.out, "{}", c.join(" "))?;
        if let Err(e) = exec(c) {
            // The first command adds the root: only once it succeeded is there ours to undo.
            let undone = if i > 0 {
                undo_tc();
                format!(" (rolled back what --apply added: `tc qdisc del dev {dev} root`)")
            } else {
                String::new()
            };
            bail!("`{}` failed: {e}{undone}; --apply needs root or NET_ADMIN", c.join(" "));
        }
    }
    if s.iptables.is_empty() {
        return Ok(());
    }
    if !on_path("iptables") {
        writeln!(
            ctx.out,
            "# NAT part skipped: iptables is not installed; clients are matched by address only (the script without --apply shows the part)"
        )?;
        return Ok(());
    }
    for c in &s.iptables {
        writeln!(ctx.out, "{}", c.join(" "))?;
        if let Err(e) = exec(c) {
            remove_chain(dev);
            undo_tc();
            bail!("`{}` failed: {e} (rolled back the chain and the qdisc --apply added)", c.join(" "));
        }
    }
    Ok(())
}

fn clear(dev: &str, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let s = script::clear(dev);
    let c = &s.tc[0];
    match root_of(dev)? {
        None => writeln!(ctx.out, "# no root qdisc on {dev}: nothing to remove")?,
        Some((kind, handle)) if kind == "htb" && handle == script::ROOT_HANDLE => {
            exec(c).map_err(|e| anyhow::anyhow!("`{}` failed: {e}", c.join(" ")))?;
            writeln!(ctx.out, "{}", c.join(" "))?;
        }
        Some((kind, handle)) => {
            return Err(UsageError(format!(
                "the root qdisc on {dev} ({kind} {handle}) is not the htb 1: that --apply makes: left alone; \
                 remove it yourself with `tc qdisc del dev {dev} root` if you mean to"
            ))
            .into());
        }
    }
    if !on_path("iptables") {
        writeln!(ctx.out, "# iptables is not installed: no NAT marks to remove")?;
        return Ok(());
    }
    let removed = remove_chain(dev);
    writeln!(ctx.out, "# iptables chain {}: {}", script::chain(dev), if removed { "removed" } else { "not present" })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_specs() {
        let c: ClientSpec = "10.0.0.11=60.76mbit/10ms".parse().unwrap();
        assert_eq!(c.0, Ipv4Addr::new(10, 0, 0, 11));
        assert_eq!((c.1.rate.bps(), c.1.delay_ns), (60_760_000, 10_000_000));
        assert_eq!("10.0.0.12=1gbit".parse::<ClientSpec>().map(|c| c.1.delay_ns), Ok(0));
        for bad in ["10.0.0.11", "nohost=1gbit", "10.0.0.1=fast", "10.0.0.1=1gbit/-3ms", "10.0.0.1=10k/s"] {
            assert!(bad.parse::<ClientSpec>().is_err(), "{bad}");
        }
    }
}
