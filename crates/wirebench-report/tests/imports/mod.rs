//! Reading a crate's imports from its source, for the tests that hold its modules to their
//! floors (the binary's `tests/it/layers.rs`, the report crate's `tests/modules.rs`): the
//! files under `src`, the top-level modules, and every path out of the crate root (`crate::`
//! paths and `super::` chains that climb to it) with its line.

use std::path::{Path, PathBuf};

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules the `lib.rs` in `src` declares.
pub(crate) fn top_modules(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// An identifier (or `*`, `self`) at the start of `s`, and what follows it.
pub(crate) fn ident(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '*')).unwrap_or(s.len());
    s.split_at(end)
}

/// The paths of a use tree at the start of `s` (`a::b`, `{a, b::{c, d}}`), each as its
/// segments; stops at the first character that is not part of the tree.
pub(crate) fn tree(s: &str) -> (Vec<Vec<String>>, &str) {
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
pub(crate) fn paths_stalled(rest: &str) -> bool {
    rest.is_empty() || !(rest.starts_with('}') || rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '{'))
}

/// Each path out of the crate root in `text` with its line: `crate::` paths, and `super::`
/// chains longer than the module's depth (`depth`: 1 for `src/x.rs`, 2 for `src/x/y.rs`;
/// each inline `mod m {` before a path adds one, which can only hide a path, never invent one).
pub(crate) fn root_paths(text: &str, depth: usize) -> Vec<(usize, Vec<String>)> {
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
