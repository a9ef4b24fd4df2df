//! The closing lines of a listen run: what its publisher budget did and what was not a
//! stream message.

use std::io::{self, Write};

use wirebench_core::report::ListenTotals;

/// What the budget did and what was not a stream message; `max` is `--max-publishers`.
pub fn totals(out: &mut dyn Write, t: &ListenTotals, max: usize) -> io::Result<()> {
    if t.foreign > 0 {
        writeln!(out, "ignored {} datagrams that were not stream messages", t.foreign)?;
    }
    if t.expired > 0 {
        writeln!(out, "forgot {} publishers after their silence ({} not kept in the report)", t.expired, t.not_kept)?;
    }
    if t.refused_datagrams > 0 {
        writeln!(
            out,
            "refused {} datagrams from new publishers while {max} were tracked (--max-publishers)",
            t.refused_datagrams
        )?;
    }
    Ok(())
}
