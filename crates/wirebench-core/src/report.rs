//! The versioned `Report` every mode returns (STYLE C7), and the histogram codec.
//! Renderers in `wirebench-report` are pure functions of it; JSON is the canonical form and
//! `docs/schema/report-v1.json` its schema.

mod histo;
mod model;

pub use histo::{HistoError, decode_histogram, encode_histogram};
pub use model::*;

use crate::latency::Summary;

/// Recomputes every summary in a saved report (as JSON) from its embedded histogram, at the
/// percentiles it lists: any object with a `summary` and a base64 `histogram` (a
/// `LatencyView` of any mode). Reports written before the percentile definition was fixed
/// (`latency::percentile`) then show the same figures in every view. Views whose histogram
/// does not decode are left as they are (the caller reports them).
pub fn resummarize(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if let (Some(serde_json::Value::String(b64)), Some(s)) = (m.get("histogram"), m.get("summary"))
                && let (Ok(h), Ok(old)) = (decode_histogram(b64), serde_json::from_value::<Summary>(s.clone()))
            {
                let ps: Vec<f64> = old.percentiles.iter().map(|q| q.p).collect();
                if let Ok(new) = serde_json::to_value(Summary::of(&h, &ps)) {
                    m.insert("summary".into(), new);
                }
                return;
            }
            m.values_mut().for_each(resummarize);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(resummarize),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{histogram, record};

    #[test]
    fn resummarize_fixes_old_summaries_anywhere_in_the_tree() {
        let mut h = histogram();
        for v in 1..=1_000u64 {
            record(&mut h, v);
        }
        // as an older wirebench wrote it: p99.9 one rank high (the maximum)
        let mut old = Summary::of(&h, &[50.0, 99.9]);
        old.percentiles[1].ns = 1_000;
        let view = serde_json::json!({"measures": "rtt_from_send", "summary": old, "histogram": encode_histogram(&h)});
        let mut doc =
            serde_json::json!({"results": {"responders": [{"latency": view.clone()}], "other": {"deep": [view]}}});
        resummarize(&mut doc);
        for path in ["/results/responders/0/latency", "/results/other/deep/0"] {
            let s: Summary = serde_json::from_value(doc.pointer(path).unwrap()["summary"].clone()).unwrap();
            assert_eq!((s.at(50.0), s.at(99.9), s.count), (Some(500), Some(999), 1_000), "{path}");
        }
        // an undecodable histogram is left alone
        let mut bad = serde_json::json!({"summary": old, "histogram": "not base64"});
        resummarize(&mut bad);
        assert_eq!(bad["summary"]["percentiles"][1]["ns"], 1_000);
    }
}
