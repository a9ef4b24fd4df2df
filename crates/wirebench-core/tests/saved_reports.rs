//! Saved reports read back unchanged: every report the repository keeps (the fuzz seeds,
//! written by the first release's suite and tests) deserializes into `Report` and
//! serializes back with every field it had, at the same value, so the typed model (its
//! enums included) neither drops nor renames a field; fields added since come back at their
//! defaults, and what is written once reads back to the same JSON exactly.

use std::path::PathBuf;

use serde_json::Value;
use wirebench_core::report::Report;

/// The saved reports: `fuzz/seeds/report_*/*.json`.
fn saved() -> Vec<PathBuf> {
    let seeds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&seeds).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.file_name().unwrap().to_string_lossy().starts_with("report_") {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|x| x == "json") {
                out.push(f);
            }
        }
    }
    out.sort();
    out
}

/// Seeds the model no longer reads, and why: a first-release load report has no
/// `expected` in its per-type rows, which the model requires since.
const UNREADABLE: &[(&str, &str)] = &[("report-load.json", "missing field `expected`")];

/// `Ok` when `after` has every field of `before` at the same value (and maybe more fields);
/// else the path of the first difference.
fn kept(before: &Value, after: &Value, at: &str) -> Result<(), String> {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => b.iter().try_for_each(|(k, v)| {
            let here = format!("{at}/{k}");
            a.get(k).map_or_else(|| Err(format!("{here} (dropped)")), |w| kept(v, w, &here))
        }),
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            b.iter().zip(a).enumerate().try_for_each(|(i, (v, w))| kept(v, w, &format!("{at}/{i}")))
        }
        _ if before == after => Ok(()),
        _ => Err(format!("{at}: {before} became {after}")),
    }
}

#[test]
fn every_saved_report_reads_back_to_the_same_json() {
    let files = saved();
    assert!(files.len() >= 4, "{files:?}");
    let mut modes = std::collections::BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let before: Value = serde_json::from_str(&text).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        let read = serde_json::from_str::<Report>(&text);
        if let Some((_, why)) = UNREADABLE.iter().find(|(n, _)| *n == name) {
            let e = read.expect_err("listed as unreadable, and reads");
            assert!(e.to_string().contains(why), "{}: {e}", f.display());
            continue;
        }
        let report = read.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let after = serde_json::to_value(&report).unwrap();
        if let Err(at) = kept(&before, &after, "") {
            panic!("{}: read back differently at {at}", f.display());
        }
        let again: Report = serde_json::from_value(after.clone()).unwrap();
        assert_eq!(serde_json::to_value(&again).unwrap(), after, "{}: written, then read", f.display());
        modes.insert(before["results"]["mode"].as_str().unwrap().to_owned());
    }
    assert_eq!(modes.into_iter().collect::<Vec<_>>(), ["ping", "proxy", "stream"]);
}
