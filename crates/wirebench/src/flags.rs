//! Flags read outside the command line's own parse: one command's flags parsed alone, as its
//! subcommand would parse them (the suite's steps, a relay's peers file, tests of a `Config`).

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
