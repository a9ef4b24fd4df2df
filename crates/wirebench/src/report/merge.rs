//! `wirebench report --merge`: the loaded reports made into one by
//! `wirebench_core::report::merge` (exact: histograms added, percentiles after the add).
//! Reports of different scenarios, or that do not merge, are bad input (exit 2, one line).

use wirebench_core::report::merge::{Input, merge};

use super::Loaded;
use crate::error::UsageError;

/// The merged report, shown as `merged`, its command line this one's.
pub(super) fn merged(loaded: &[Loaded], argv: &[String]) -> Result<Loaded, UsageError> {
    let inputs: Vec<Input<'_>> = loaded.iter().map(|l| Input { name: &l.name, report: &l.report }).collect();
    let mut report = merge(&inputs).map_err(|e| UsageError(e.to_string()))?;
    report.meta.command_line = argv.to_vec();
    Ok(Loaded { name: "merged".into(), report })
}
