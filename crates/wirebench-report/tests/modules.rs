//! The report crate's modules import each other without a circle: each top-level module
//! (`src/<name>.rs` and its folder) reads as a floor above the ones it imports, with
//! `words` (the number words every renderer shares) at the bottom, importing none. Read
//! from the source: every `crate::` path and every `super::` chain that climbs to the crate
//! root, in code, tests, docs and comments alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules `lib.rs` declares.
fn top_modules() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// An identifier (or `*`, `self`) at the start of `s`, and what follows it.
fn ident(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '*')).unwrap_or(s.len());
    s.split_at(end)
}

/// The paths of a use tree at the start of `s` (`a::b`, `{a, b::{c, d}}`), each as its
/// segments; stops at the first character that is not part of the tree.
fn tree(s: &str) -> (Vec<Vec<String>>, &str) {
    let s = s.trim_start();
    if let Some(mut rest) = s.strip_prefix('{') {
        let mut all = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix('}') {
                return (all, r);
            }
            let (paths, r) = tree(rest);
            all.extend(paths);
            rest = r.trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
            if paths_stalled(rest) {
                return (all, rest);
            }
        }
    }
    let (id, rest) = ident(s);
    if id.is_empty() {
        return (Vec::new(), rest);
    }
    if let Some(r) = rest.strip_prefix("::") {
        let (paths, r) = tree(r);
        if paths.is_empty() {
            return (vec![vec![id.to_owned()]], r);
        }
        return (paths.into_iter().map(|p| std::iter::once(id.to_owned()).chain(p).collect()).collect(), r);
    }
    // `x as y`: the path is `x`
    let rest = match rest.trim_start().strip_prefix("as ") {
        Some(r) => ident(r.trim_start()).1,
        None => rest,
    };
    (vec![vec![id.to_owned()]], rest)
}

/// Inside a group, anything but a path, a comma or the closing brace.
fn paths_stalled(rest: &str) -> bool {
    rest.is_empty() || !(rest.starts_with('}') || rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '{'))
}

/// Each path out of the crate root in `text` with its line: `crate::` paths, and `super::`
/// chains longer than the module's depth (`depth`: 1 for `src/x.rs`, 2 for `src/x/y.rs`;
/// each inline `mod m {` before a path adds one, which can only hide a path, never invent one).
fn root_paths(text: &str, depth: usize) -> Vec<(usize, Vec<String>)> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let inline_before = |at: usize| {
        text[..at]
            .lines()
            .map(str::trim)
            .filter(|t| {
                (t.starts_with("mod ") || t.starts_with("pub mod ") || t.starts_with("pub(crate) mod "))
                    && t.ends_with('{')
            })
            .count()
    };
    let starts_path =
        |at: usize| !text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == ':');
    let mut out = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        if starts_path(at) {
            let (paths, _) = tree(&text[at + "crate::".len()..]);
            out.extend(paths.into_iter().map(|p| (line_of(at), p)));
        }
    }
    for (at, _) in text.match_indices("super::") {
        if !starts_path(at) {
            continue;
        }
        let mut tail = &text[at..];
        let mut ups = 0;
        while let Some(r) = tail.strip_prefix("super::") {
            tail = r;
            ups += 1;
        }
        if ups >= depth + inline_before(at) {
            let (paths, _) = tree(tail);
            out.extend(paths.into_iter().map(|p| (line_of(at), p)));
        }
    }
    out.sort_by_key(|(n, _)| *n);
    out
}

/// Each top-level module and the top-level modules it names, with one place it names each
/// (`file:line`).
fn edges() -> BTreeMap<String, BTreeMap<String, String>> {
    let tops = top_modules();
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
