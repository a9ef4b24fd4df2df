//! The binary crate's two floors: commands import the ground floor and never each other, and
//! the ground floor imports no command. Read from the source: every `crate::` path and every
//! `super::` chain that climbs to the crate root, in code, docs and comments alike.

use std::path::{Path, PathBuf};

#[path = "../../../wirebench-report/tests/imports/mod.rs"]
mod imports;
use imports::{root_paths, rust_files, top_modules};

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

/// Every edge between top-level modules the layers forbid, as `from -> to (file:line)`.
fn offending_edges() -> Vec<String> {
    let tops = top_modules(&src());
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
    let tops = top_modules(&src());
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

/// Functions over [`MAX_FN_LINES`] that are not run loops, with why they stay whole: a
/// flag parser checks one flag after another, an encoder writes one metric family after
/// another, and the PromQL join reads as the query it answers.
const LONG_ALLOWED: &[(&str, &str)] = &[("", "from_args"), ("mesh/metrics.rs", "encode"), ("mesh/promql.rs", "join")];

/// The longest function body the binary's run code may have.
const MAX_FN_LINES: usize = 80;

/// Every function of `text` (outside its `#[cfg(test)]` module) longer than
/// [`MAX_FN_LINES`], as (name, first line, lines). A body ends at the first `}` at the
/// indentation of its `fn` (the tree is rustfmt'ed).
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().take_while(|l| l.trim() != "#[cfg(test)]").collect();
    let mut long = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let body = l.trim_start();
        let indent = l.len() - body.len();
        let after_vis = body
            .strip_prefix("pub ")
            .or_else(|| body.split_once(") ").filter(|_| body.starts_with("pub(")).map(|(_, r)| r))
            .unwrap_or(body);
        let Some(sig) = after_vis.strip_prefix("async ").unwrap_or(after_vis).strip_prefix("fn ") else { continue };
        let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let close = " ".repeat(indent) + "}";
        let Some(end) =
            lines[i + 1..].iter().position(|x| x.starts_with(&close) && x.len() - x.trim_start().len() == indent)
        else {
            continue;
        };
        if end + 2 > MAX_FN_LINES {
            long.push((name, i + 1, end + 2));
        }
    }
    long
}

/// No run function of the binary is longer than 80 lines: a loop that long mixes what should
/// be named (and what core should decide).
#[test]
fn no_function_of_the_binary_is_over_80_lines() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap().to_string_lossy().into_owned();
        for (name, line, n) in long_functions(&std::fs::read_to_string(&f).unwrap()) {
            let allowed = LONG_ALLOWED.iter().any(|&(file, fname)| (file.is_empty() || file == rel) && fname == name);
            if !allowed {
                bad.push(format!("src/{rel}:{line} {name}: {n} lines"));
            }
        }
    }
    assert!(bad.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", bad.join("\n"));
}

#[test]
fn a_long_function_is_found_and_a_test_module_is_not_read() {
    let body = "    let x = 1;\n".repeat(80);
    let text = format!(
        "pub(crate) fn short() {{\n}}\n\nasync fn long() {{\n{body}}}\n\n#[cfg(test)]\nfn in_tests() {{\n{body}}}\n"
    );
    assert_eq!(long_functions(&text), [("long".to_owned(), 4, 82)]);
    let method = format!("impl X {{\n    pub fn m(&self) {{\n    {body}    }}\n}}\n");
    assert_eq!(long_functions(&method), [("m".to_owned(), 2, 82)]);
}
