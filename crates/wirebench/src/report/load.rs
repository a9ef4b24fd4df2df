//! Reading saved reports: all or nothing, with a one-line error naming the file and the
//! problem (not JSON, not a report, a newer schema, a histogram that does not decode).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use wirebench_core::report::{Report, Results, SCHEMA_VERSION, decode_histogram};

use crate::error::UsageError;

/// Largest report file read (a report with many responders is a few MiB).
const MAX_FILE: u64 = 256 << 20;

/// A report and the name it is shown under.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file's stem (`ping-udp`), or its path when two files share a stem.
    pub name: String,
    /// The report.
    pub report: Report,
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parses the text of a saved report; `name` is for the messages.
pub fn parse(name: &str, text: &str) -> Result<Report, UsageError> {
    let bad = |why: String| UsageError(format!("{name}: {}", one_line(&why)));
    let mut v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let version = v.get("schema_version").and_then(serde_json::Value::as_u64);
    match version {
        None | Some(0) => return Err(bad("not a wirebench report (no schema_version)".into())),
        Some(n) if n > u64::from(SCHEMA_VERSION) => {
            return Err(bad(format!(
                "schema_version {n} is newer than this wirebench reads ({SCHEMA_VERSION}): use a newer wirebench"
            )));
        }
        Some(_) => {}
    }
    // Percentiles come from the histograms, so files from older versions agree too.
    wirebench_core::report::resummarize(&mut v);
    let report: Report = serde_json::from_value(v).map_err(|e| bad(format!("not a wirebench report ({e})")))?;
    if let Results::Ping(p) = &report.results {
        for r in &p.responders {
            let views =
                [Some(&r.latency), r.uncorrected.as_ref(), Some(&r.warmup), r.network.as_ref(), r.dwell.as_ref()];
            for v in views.into_iter().flatten() {
                decode_histogram(&v.histogram).map_err(|e| bad(format!("responder {}: {e}", r.addr)))?;
            }
        }
    }
    Ok(report)
}

fn read(path: &Path) -> Result<String, UsageError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| UsageError(format!("cannot read {shown}: {e}")))?;
    if meta.len() > MAX_FILE {
        return Err(UsageError(format!("{shown}: larger than 256 MiB, not a wirebench report")));
    }
    std::fs::read_to_string(path).map_err(|e| UsageError(format!("cannot read {shown}: {e}")))
}

/// Loads every file, in order; the first bad one is the error.
pub fn load(files: &[PathBuf]) -> Result<Vec<Loaded>, UsageError> {
    let stem =
        |p: &PathBuf| p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for f in files {
        *seen.entry(stem(f)).or_default() += 1;
    }
    files
        .iter()
        .map(|f| {
            let report = parse(&f.display().to_string(), &read(f)?)?;
            let name = if seen[&stem(f)] > 1 { f.display().to_string() } else { stem(f) };
            Ok(Loaded { name, report })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_one_line_naming_the_file() {
        let cases = [
            ("{", "f.json: not JSON (EOF while parsing an object at line 1 column 1)"),
            ("[1, 2]", "f.json: not a wirebench report (no schema_version)"),
            (r#"{"hello": 1}"#, "f.json: not a wirebench report (no schema_version)"),
            (
                r#"{"schema_version": 2}"#,
                "f.json: schema_version 2 is newer than this wirebench reads (1): use a newer wirebench",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse("f.json", text).unwrap_err().0, want);
        }
        let e = parse("f.json", r#"{"schema_version": 1, "meta": {}}"#).unwrap_err().0;
        assert!(e.starts_with("f.json: not a wirebench report (missing field"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = load(&[PathBuf::from("/nonexistent/r.json")]).unwrap_err().0;
        assert!(e.starts_with("cannot read /nonexistent/r.json: "), "{e}");
    }
}
