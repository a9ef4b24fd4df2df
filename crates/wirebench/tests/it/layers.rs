//! The binary crate's two floors: commands import the ground floor and never each other, and
//! the ground floor imports no command. Read from the source: every `crate::` path and every
//! `super::` chain that climbs to the crate root, in code, docs and comments alike.

use std::path::{Path, PathBuf};

/// The commands (`cli::Command`), one module each: `src/<name>.rs` and its folder. Every
/// other module but the composers is the ground floor.
const COMMANDS: &[&str] = &[
    "doctor", "hiccup", "listen", "load", "mesh", "ping", "proxy", "relay", "report", "room", "serve", "shape",
    "stream", "token",
];

/// The modules that put commands together and may import any of them: the crate root
/// (`lib.rs`, which dispatches), the command line, and the `suite` command, which runs other
/// commands in process. No command and no ground module imports them.
const COMPOSERS: &[&str] = &["lib", "cli", "suite"];

/// The one edge between commands: the mesh agent runs a serve inside itself, through the
/// interface serve exports for that (`from`, `to`, the path it goes through).
const ALLOWED: &[(&str, &str, &str)] = &[("mesh", "serve", "serve::embed")];

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

/// Every edge between top-level modules the layers forbid, as `from -> to (file:line)`.
fn offending_edges() -> Vec<String> {
    let tops = top_modules();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap();
        let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
        // `main.rs` is its own crate: it reaches the library as `wirebench::`.
        if parts == ["main"] {
            continue;
        }
        let from = parts[0].clone();
        let text = std::fs::read_to_string(&f).unwrap();
        let depth = if from == "lib" { 0 } else { parts.len() };
        for (line, path) in root_paths(&text, depth) {
            let Some(first) = path.first() else { continue };
            if first == "self" || first == "*" {
                continue;
            }
            // anything `lib.rs` defines or re-exports is the crate root's
            let to = if tops.contains(first) { first.clone() } else { "lib".to_owned() };
            if to == from {
                continue;
            }
            let via = path.iter().take(2).cloned().collect::<Vec<_>>().join("::");
            let is_cmd = |m: &str| COMMANDS.contains(&m);
            let is_composer = |m: &str| COMPOSERS.contains(&m);
            let allowed = if is_composer(&from) {
                true
            } else if is_composer(&to) {
                false
            } else if is_cmd(&from) && is_cmd(&to) {
                ALLOWED.iter().any(|&(a, b, v)| a == from && b == to && v == via)
            } else {
                !is_cmd(&to)
            };
            if !allowed {
                bad.push(format!("{from} -> {to} ({}:{line}, crate::{via})", Path::new("src").join(rel).display()));
            }
        }
    }
    bad
}

#[test]
fn commands_import_the_ground_floor_and_never_each_other() {
    let bad = offending_edges();
    assert!(bad.is_empty(), "{} edges between layers:\n{}", bad.len(), bad.join("\n"));
}

/// The modules whose `Args` a variant of `cli::Command` holds.
fn command_modules() -> Vec<String> {
    let cli = std::fs::read_to_string(src().join("cli.rs")).unwrap();
    let from = cli.find("pub enum Command {").expect("cli.rs declares the Command enum");
    let body = &cli[from..from + cli[from..].find("\n}").unwrap()];
    body.match_indices("crate::")
        .filter_map(|(at, _)| body[at + "crate::".len()..].split_once("::Args").map(|(m, _)| m.to_owned()))
        .filter(|m| m.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

#[test]
fn every_command_is_listed_as_one() {
    let listed: Vec<String> =
        COMMANDS.iter().chain(COMPOSERS).filter(|&&c| c != "lib").map(|&c| c.to_owned()).collect();
    let tops = top_modules();
    for c in &listed {
        assert!(tops.contains(c), "{c} is listed here but lib.rs declares no such module");
    }
    let mut commands = command_modules();
    commands.sort();
    let mut want: Vec<String> = listed.into_iter().filter(|c| c != "cli").collect();
    want.sort();
    assert_eq!(commands, want, "cli::Command's modules against COMMANDS and the suite");
}

#[test]
fn paths_are_read_through_groups_and_chains() {
    let text = "use crate::{a::{b, c::D as E}, e, f::{self as g}};\nfn f() { crate::g::h(); }\nmod tests {\n    \
                use super::super::i::J;\n    use super::K;\n}\n";
    let got: Vec<(usize, String)> = root_paths(text, 1).into_iter().map(|(n, p)| (n, p.join("::"))).collect();
    let want = [(1, "a::b"), (1, "a::c::D"), (1, "e"), (1, "f::self"), (2, "g::h"), (4, "i::J")];
    assert_eq!(got, want.map(|(n, p)| (n, p.to_owned())));
}
