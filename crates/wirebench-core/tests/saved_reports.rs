//! Saved reports read back unchanged: every report the repository keeps (the fuzz seeds,
//! written by the first release's suite and tests, and a load report of a later build) deserializes into `Report` and
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
const UNREADABLE: &[(&str, &str)] = &[("report-load-first-release.json", "missing field `expected`")];

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
    assert_eq!(modes.into_iter().collect::<Vec<_>>(), ["load", "ping", "proxy", "stream"]);
}

/// Every name the schema (`docs/schema/report-v1.json`) lists for a field that is an enum in
/// the model reads as that enum and is written back as the same name.
#[test]
fn each_enum_field_reads_and_writes_the_schemas_names() {
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use wirebench_core::report::{
        CellJudged, LinkMethod, Measure, Pacing, ProbeForm, SearchEnding, StreamDirection, Transport,
    };

    fn each<T: DeserializeOwned + Serialize>(schema: &Value, def: &str, field: &str) -> Vec<T> {
        let names = schema["$defs"][def]["properties"][field]["enum"].as_array();
        let names = names.unwrap_or_else(|| panic!("{def}.{field}: no enum in the schema"));
        assert!(!names.is_empty());
        names
            .iter()
            .map(|n| {
                let v: T = serde_json::from_value(n.clone()).unwrap_or_else(|e| panic!("{def}.{field} {n}: {e}"));
                assert_eq!(&serde_json::to_value(&v).unwrap(), n, "{def}.{field}");
                v
            })
            .collect()
    }

    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema/report-v1.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    each::<Pacing>(&schema, "PingResults", "pacing");
    each::<ProbeForm>(&schema, "PingResults", "probe_form");
    each::<Transport>(&schema, "StreamResults", "proto");
    each::<StreamDirection>(&schema, "StreamResults", "direction");
    each::<StreamDirection>(&schema, "ReceiverResult", "direction");
    each::<SearchEnding>(&schema, "SearchResult", "ending");
    each::<LinkMethod>(&schema, "LoadLink", "method");
    each::<CellJudged>(&schema, "MeshCell", "verdict");
    for m in each::<Measure>(&schema, "LatencyView", "measures") {
        assert!(!matches!(m, Measure::Other(_)), "{m} is named in the model");
    }
    // a name from a newer version reads, and is written back as it was
    let m: Measure = serde_json::from_value(Value::from("some_later_measure")).unwrap();
    assert_eq!(m, Measure::Other("some_later_measure".into()));
    assert_eq!(serde_json::to_value(&m).unwrap(), "some_later_measure");
}
