//! `wirebench report --merge`: the loaded reports made into one by
//! `wirebench_core::report::merge` (exact: histograms added, percentiles after the add).
//! Reports of different scenarios, that do not merge, that did not run together, or the
//! shards of a run with some missing (without `--partial`) are bad input (exit 2, one line).
//! A merged load report whose thresholds fail makes `report` exit 3, as `load` does.

use wirebench_core::report::merge::{Input, Options, merge_with};
use wirebench_core::report::{Report, Results};

use super::Loaded;
use crate::error::UsageError;

/// A merged report and the warnings to print.
pub(super) struct Merged {
    /// Shown as `merged`.
    pub loaded: Loaded,
    /// One line each.
    pub warnings: Vec<String>,
}

/// The merged report, shown as `merged`, its command line this one's.
pub(super) fn merged(loaded: &[Loaded], argv: &[String], partial: bool) -> Result<Merged, UsageError> {
    let inputs: Vec<Input<'_>> = loaded.iter().map(|l| Input { name: &l.name, report: &l.report }).collect();
    let mut m = merge_with(&inputs, Options { partial }).map_err(|e| UsageError(e.to_string()))?;
    m.report.meta.command_line = crate::host::command_line(argv);
    Ok(Merged { loaded: Loaded { name: "merged".into(), report: m.report }, warnings: m.warnings })
}

/// A merged report with thresholds (load's, judged again on the merged histograms) of
/// which one failed.
pub(super) fn failed_thresholds(r: &Report) -> bool {
    match &r.results {
        Results::Load(l) => l.thresholds.iter().any(|t| !t.passed),
        _ => false,
    }
}
