//! The `wirebench` binary as a library: `main` parses and calls [`main_with`], and the
//! integration tests call the same function in-process.
//!
//! Two floors. The commands, one module each ([`serve`], [`ping`], [`stream`], [`listen`],
//! [`proxy`], [`shape`], [`room`], [`load`], [`mesh`], [`relay`], [`hiccup`], [`report`],
//! [`doctor`], [`token`]), import the ground floor and never each other; the mesh agent runs
//! a serve through [`serve::embed`] alone. The ground floor imports no command: the run
//! context ([`ctx`]), addresses ([`addr`]), flag groups several commands take ([`auth`],
//! [`stamp`], [`flags`]), the stall meter ([`stall`]), [`limits`], [`progress`] (bar or plain
//! lines on stderr), [`shutdown`] (Ctrl-C to a flag every loop polls), [`host`] (the
//! environment recorded in reports), [`output`] (atomic result files), [`error`] (exit
//! codes), [`discovery`] (peers from lists, DNS and Kubernetes), and the pieces of servers and
//! clients ([`accept`], [`control`], [`flow`], [`tls`], [`http_client`]). Above both, [`cli`]
//! (the command line), this file (dispatch) and [`suite`] (other commands in process) put
//! commands together. `tests/it/layers.rs` holds the code to this.

pub mod accept;
pub mod addr;
pub mod auth;
pub mod cli;
pub mod control;
pub mod ctx;
#[cfg(feature = "mesh")]
pub mod discovery;
pub mod doctor;
pub mod error;
pub mod flags;
pub mod flow;
pub mod hiccup;
pub mod host;
#[cfg(feature = "mesh")]
pub mod http_client;
pub mod limits;
pub mod listen;
#[cfg(feature = "load")]
pub mod load;
#[cfg(feature = "mesh")]
pub mod mesh;
pub mod output;
pub mod ping;
pub mod progress;
pub mod proxy;
#[cfg(feature = "mesh")]
pub mod relay;
pub mod report;
#[cfg(feature = "room")]
pub mod room;
pub mod serve;
pub mod shape;
pub mod shutdown;
pub mod stall;
pub mod stamp;
pub mod stream;
pub mod suite;
#[cfg(any(feature = "load", feature = "room", feature = "mesh"))]
pub mod tls;
pub mod token;

use std::io::Write;

use clap::Parser as _;
use wirebench_core::report::{Outcome, receivers_failed};

pub use crate::cli::{Cli, Command};
pub use crate::ctx::Ctx;
pub use crate::shutdown::Shutdown;

/// Runs a parsed command. Returns the exit code for a run that produced results: 0, or 1
/// when the peer went silent mid-run, or (stream, listen) a receiver heard nothing or its
/// results never came (the results are printed and saved first, saying so).
pub fn run(cli: &Cli, ctx: &mut Ctx<'_>) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Serve(a) => folded(ctx, |c| serve::run(a, c).map(|_| 0)),
        Command::Ping(a) => {
            let report = ping::run(a, ctx)?;
            Ok(u8::from(report.outcome == Outcome::PeerSilent))
        }
        Command::Stream(a) => {
            let report = stream::run(a, ctx)?;
            Ok(u8::from(report.outcome == Outcome::PeerSilent || receivers_failed(&report)))
        }
        Command::Listen(a) => listen::run(a, ctx).map(|r| u8::from(receivers_failed(&r))),
        Command::Suite(a) => folded(ctx, |c| suite::run(a, c).map(|_| 0)),
        Command::Report(a) => report::run(a, ctx),
        Command::Doctor(a) => folded(ctx, |c| doctor::run(a, c)),
        Command::Proxy(a) => proxy::run(a, ctx).map(|_| 0),
        Command::Shape(a) => shape::run(a, ctx).map(|()| 0),
        #[cfg(feature = "room")]
        Command::Room(a) => folded(ctx, |c| room::run(a, c).map(|_| 0)),
        #[cfg(feature = "load")]
        Command::Load(a) => load::run(a, ctx).map(|r| load::exit_code(&r)),
        #[cfg(feature = "mesh")]
        Command::Mesh(a) if matches!(a.command, mesh::MeshCommand::Status(_)) => folded(ctx, |c| mesh::run(a, c)),
        #[cfg(feature = "mesh")]
        Command::Mesh(a) => mesh::run(a, ctx),
        Command::Hiccup(a) => folded(ctx, |c| hiccup::run(a, c).map(|_| 0)),
        #[cfg(feature = "mesh")]
        Command::Relay(a) => folded(ctx, |c| relay::run(a, c).map(|_| 0)),
        Command::Token(a) => token::run(a, ctx.out).map(|()| 0),
    }
}

/// Runs `f` with its terminal output folded to the screen's width
/// ([`wirebench_report::screen::Folded`]): the commands that print as they go.
fn folded(ctx: &mut Ctx<'_>, f: impl FnOnce(&mut Ctx<'_>) -> anyhow::Result<u8>) -> anyhow::Result<u8> {
    let mut out = wirebench_report::screen::Folded::new(&mut *ctx.out);
    let mut c = Ctx { shutdown: ctx.shutdown.clone(), argv: ctx.argv.clone(), out: &mut out };
    f(&mut c)
}

/// Parses `argv`, runs it, prints any error as one line to `err`, and returns the exit
/// code: 0 ok, 1 runtime or network failure, 2 usage or configuration error, 3 the run
/// finished but a check failed (`doctor`).
pub fn main_with(argv: Vec<String>, shutdown: Shutdown, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    // Timer slack is per thread and inherited: set here, before any thread starts, every
    // thread that waits for a time (pacers, the stall meter, tokio's workers) wakes when
    // asked instead of up to 50 us late (the kernel's default for a normal thread).
    let _ = wirebench_net::timer::set_timer_slack(1);
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = write!(out, "{e}");
            return 0;
        }
        // Bare `wirebench`: the command list, not one line.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = write!(err, "{}", e.render());
            return 2;
        }
        Err(e) => {
            let _ = writeln!(err, "{} (see --help)", one_line(&e.to_string()));
            return 2;
        }
    };
    let outputs = cli.command.outputs();
    let checked = outputs.iter().try_for_each(|(flag, path)| output::check(flag, path));
    let to_stdout: Vec<&str> = outputs.iter().filter(|(_, p)| output::is_stdout(p)).map(|(f, _)| *f).collect();
    let checked = checked.and_then(|()| match to_stdout.as_slice() {
        [_, _, ..] => Err(error::UsageError(format!(
            "{} are all '-': only one can go to standard output",
            to_stdout.join(" and ")
        ))),
        _ => Ok(()),
    });
    if let Err(e) = checked {
        let _ = writeln!(err, "error: {e}");
        return 2;
    }
    // With a file on standard output (`--json -`), the text goes to standard error.
    let capture = (!to_stdout.is_empty()).then(output::Capture::install);
    let result = {
        let text: &mut dyn Write = if capture.is_some() { &mut *err } else { &mut *out };
        let mut ctx = Ctx { shutdown, argv, out: text };
        run(&cli, &mut ctx)
    };
    if let Some(c) = capture {
        let bytes = c.take();
        if out.write_all(&bytes).and_then(|()| out.flush()).is_err() && result.is_ok() {
            return 1;
        }
    }
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {}", error::one_line(&e));
            error::exit_code(&e)
        }
    }
}

/// Clap's message without the usage block, on one line.
fn one_line(text: &str) -> String {
    let body = text.split("\n\nUsage:").next().unwrap_or(text);
    let body = body.split("\n\nFor more information").next().unwrap_or(body);
    body.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
