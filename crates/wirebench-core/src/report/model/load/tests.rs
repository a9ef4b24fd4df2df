use super::*;
use crate::report::{Report, Results};

/// A load report of five clients that connected and sent nothing.
fn seed() -> Report {
    let path = format!("{}/../../fuzz/seeds/report_load/report-ping-full.json", env!("CARGO_MANIFEST_DIR"));
    let mut r = crate::report::read_report(|| std::fs::File::open(&path)).unwrap();
    r.config = serde_json::json!({ "clients": 5 });
    r.results = Results::Load(crate::load::results::quiet_room());
    r
}

fn load(r: &mut Report) -> &mut LoadResults {
    match &mut r.results {
        Results::Load(l) => l,
        _ => panic!("a load report"),
    }
}

/// Subprotocols offered and no client connected: the line says so, rather than naming no
/// choice or leaving the line out.
#[test]
fn a_subprotocol_offered_to_no_connected_client_is_said() {
    let mut r = seed();
    r.config["connect"] = serde_json::json!({ "subprotocols": ["chat", "v2"] });
    load(&mut r).connections.subprotocols.clear();
    assert_eq!(
        subprotocol_words(&r).as_deref(),
        Some("subprotocol: offered chat, v2; the server chose - (no client connected)")
    );
    load(&mut r).connections.subprotocols.insert(String::new(), 3);
    assert_eq!(
        subprotocol_words(&r).as_deref(),
        Some("subprotocol: offered chat, v2; the server chose none for 3 clients"),
        "clients the server gave none"
    );
}

/// A partial merge names the shards it lacks, out of how many, in the line every view shows.
#[test]
fn a_partial_merge_names_its_missing_shards() {
    let mut r = seed();
    let l = load(&mut r);
    l.partial = None;
    assert_eq!(partial_words(l), None, "a whole run");
    l.partial = Some(LoadPartial { count: 3, missing: vec![2] });
    assert_eq!(
        partial_words(l).as_deref(),
        Some(
            "PARTIAL: shard 2/3 missing (report --merge --partial): the counts and percentiles are those of the shards present"
        )
    );
    l.partial = Some(LoadPartial { count: 4, missing: vec![1, 3] });
    assert!(partial_words(l).unwrap().starts_with("PARTIAL: shards 1/4, 3/4 missing (report --merge --partial)"));
}
