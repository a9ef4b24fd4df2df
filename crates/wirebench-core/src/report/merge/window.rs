//! Did the parts run together? Each report's run window is `meta.started_at` (RFC 3339, as
//! every mode writes it) plus `meta.duration_ns`. Parts of one scenario run at the same time
//! (load shards wait for one `--start-at`; generators against one server are started
//! together), so:
//!
//! - windows that do not all overlap (one part ended before another started) are refused,
//!   naming the two parts and the gap: their sum would describe no moment of the system;
//! - starts more than [`START_SPREAD_NS`] apart are merged with a warning: `load` refuses a
//!   `--start-at` more than 1 s in the past, so shards that started further apart were not
//!   lined up by one `--start-at`, and the merged per-second series (added by seconds since
//!   each part's own start) mixes different moments.

use std::time::UNIX_EPOCH;

use super::{Input, MergeError, err};

/// Starts further apart than this get a warning (1 s: the lateness `load --start-at`
/// tolerates).
pub const START_SPREAD_NS: u64 = 1_000_000_000;

/// One part's window, ns since the Unix epoch.
#[derive(Debug, Clone, Copy)]
struct Window<'a> {
    name: &'a str,
    start: u64,
    end: u64,
}

fn window<'a>(i: &Input<'a>) -> Result<Window<'a>, MergeError> {
    let start = started_ns(i)?;
    Ok(Window { name: i.name, start, end: start.saturating_add(i.report.meta.duration_ns) })
}

/// A part's `meta.started_at` as ns since the Unix epoch: compared as times, since the text
/// order is not the time order across precisions (`…00.5Z` sorts before `…00Z`).
pub(super) fn started_ns(i: &Input<'_>) -> Result<u64, MergeError> {
    let at = &i.report.meta.started_at;
    let t = humantime::parse_rfc3339_weak(at)
        .map_err(|e| err(format!("{}: meta.started_at '{at}' is not an RFC 3339 time ({e})", i.name)))?;
    Ok(t.duration_since(UNIX_EPOCH).map_or(0, crate::units::nanos))
}

/// Seconds with millisecond precision, for the messages.
fn secs(ns: u64) -> String {
    format!("{}.{:03} s", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000_000)
}

/// Refuses parts whose windows do not all overlap; warns when their starts are spread.
pub(super) fn check(inputs: &[Input<'_>]) -> Result<Vec<String>, MergeError> {
    let windows: Vec<Window<'_>> = inputs.iter().map(window).collect::<Result<_, _>>()?;
    // the first of equals: the message names the earlier file
    let pick = |better: fn(&Window<'_>, &Window<'_>) -> bool| {
        windows.iter().copied().reduce(|a, b| if better(&b, &a) { b } else { a })
    };
    let (Some(last_start), Some(first_end), Some(first_start)) =
        (pick(|b, a| b.start > a.start), pick(|b, a| b.end < a.end), pick(|b, a| b.start < a.start))
    else {
        return Ok(Vec::new());
    };
    if last_start.start > first_end.end {
        return Err(err(format!(
            "{} ended {} before {} started: the parts did not run together (their run windows must overlap)",
            first_end.name,
            secs(last_start.start - first_end.end),
            last_start.name
        )));
    }
    let spread = last_start.start - first_start.start;
    if spread > START_SPREAD_NS {
        return Ok(vec![format!(
            "warning: {} started {} after {} (more than 1 s: not lined up by one --start-at); \
             the per-second series adds seconds counted from each part's own start",
            last_start.name,
            secs(spread),
            first_start.name
        )]);
    }
    Ok(Vec::new())
}
