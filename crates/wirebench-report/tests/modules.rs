//! The report crate's modules import each other without a circle: each top-level module
//! (`src/<name>.rs` and its folder) reads as a floor above the ones it imports, with
//! `words` (the number words every renderer shares) at the bottom, importing none. Read
//! from the source: every `crate::` path and every `super::` chain that climbs to the crate
//! root, in code, tests, docs and comments alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod imports;
use imports::{root_paths, rust_files, top_modules};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Each top-level module and the top-level modules it names, with one place it names each
/// (`file:line`).
fn edges() -> BTreeMap<String, BTreeMap<String, String>> {
    let tops = top_modules(&src());
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut all: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap();
        let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
        if parts == ["lib"] {
            continue;
        }
        let from = parts[0].clone();
        let text = std::fs::read_to_string(&f).unwrap();
        let to_of = all.entry(from.clone()).or_default();
        for (line, path) in root_paths(&text, parts.len()) {
            let Some(first) = path.first() else { continue };
            if first == &from || !tops.contains(first) {
                continue;
            }
            to_of.entry(first.clone()).or_insert_with(|| format!("{}:{line}", Path::new("src").join(rel).display()));
        }
    }
    all
}

/// The circles among `edges`: each strongly connected set of two or more modules, with the
/// edges inside it.
fn circles(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for to in edges.get(&m).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = edges.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in edges.keys() {
        if done.contains(m) || !reached[m].contains(m) {
            continue;
        }
        let set: BTreeSet<&String> = reached[m]
            .iter()
            .filter_map(|o| reached.get_key_value(o))
            .filter(|(_, r)| r.contains(m))
            .map(|(k, _)| *k)
            .collect();
        let mut lines = Vec::new();
        for a in &set {
            done.insert((*a).clone());
            for (b, at) in &edges[*a] {
                if set.contains(b) {
                    lines.push(format!("{a} -> {b} ({at})"));
                }
            }
        }
        out.push(lines);
    }
    out
}

#[test]
fn no_circle_between_the_report_crates_modules() {
    let found = circles(&edges());
    let text: Vec<String> = found.iter().map(|c| c.join("\n  ")).collect();
    assert!(found.is_empty(), "{} circles:\n  {}", found.len(), text.join("\n\n  "));
}

#[test]
fn words_imports_no_other_module() {
    let all = edges();
    let words = all.get("words").expect("src/words.rs: the number words");
    assert!(words.is_empty(), "words imports {words:?}");
}

#[test]
fn a_circle_is_found_and_a_chain_is_not() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry((*a).to_owned()).or_default().insert((*b).to_owned(), "x".to_owned());
            g.entry((*b).to_owned()).or_default();
        }
        g
    };
    assert!(circles(&graph(&[("a", "b"), ("b", "words"), ("a", "words")])).is_empty());
    let found = circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "words")]));
    assert_eq!(found, [["a -> b (x)", "b -> c (x)", "c -> a (x)"]]);
}

#[test]
fn paths_are_read_through_groups_and_chains() {
    let text = "use crate::{a::{b, c::D as E}, e, f::{self as g}};\nfn f() { crate::g::h(); }\nmod tests {\n    \
                use super::super::i::J;\n    use super::K;\n}\n";
    let got: Vec<(usize, String)> = root_paths(text, 1).into_iter().map(|(n, p)| (n, p.join("::"))).collect();
    let want = [(1, "a::b"), (1, "a::c::D"), (1, "e"), (1, "f::self"), (2, "g::h"), (4, "i::J")];
    assert_eq!(got, want.map(|(n, p)| (n, p.to_owned())));
}
