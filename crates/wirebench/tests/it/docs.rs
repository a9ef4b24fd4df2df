//! What a newcomer reads, checked against the code: every flag a mode's `--help` lists is on
//! its page in docs/modes/; README.md and docs/ refer to nothing outside the repository, and
//! every repository path they name exists; the suite's step list in docs and README is the
//! list the suite runs. (Every command README.md shows is run by .ci/readme_commands.py.)

use std::path::{Path, PathBuf};

use crate::support::wirebench;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md, ARCHITECTURE.md, AGENTS.md and every Markdown file under docs/.
fn pages() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        ["README.md", "ARCHITECTURE.md", "AGENTS.md"].iter().map(|p| ((*p).to_owned(), read(p))).collect();
    let mut dirs = vec![root().join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                let rel = p.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
                v.push((rel.clone(), read(&rel)));
            }
        }
    }
    v.sort();
    v
}

/// The flags `wirebench ARGS --help` lists (help and version aside): the long form, and
/// the short one when there is one.
fn flags(args: &[&str]) -> Vec<(String, Option<String>)> {
    let help = wirebench(&[args, &["--help"]].concat()).out;
    let mut v: Vec<(String, Option<String>)> = help
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let (short, t) = match t.strip_prefix('-').filter(|r| !r.starts_with('-')) {
                Some(r) => r.split_once(", ").map(|(s, rest)| (Some(format!("-{s}")), rest))?,
                None => (None, t),
            };
            let long = t.strip_prefix("--")?.split([' ', '=', '<']).next()?;
            Some((format!("--{long}"), short))
        })
        .filter(|(f, _)| f != "--help" && f != "--version")
        .collect();
    v.dedup();
    v
}

/// Is `flag` named in `text` (followed by something that cannot continue a flag name)?
fn names(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        let next = text[i + flag.len()..].chars().next();
        next.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}

#[test]
fn every_flag_of_every_mode_is_on_its_page() {
    let modes: &[(&[&str], &str)] = &[
        (&["serve"], "serve"),
        (&["ping"], "ping"),
        (&["stream"], "stream"),
        (&["listen"], "listen"),
        (&["suite"], "suite"),
        (&["report"], "report"),
        (&["doctor"], "doctor"),
        (&["proxy"], "proxy"),
        (&["shape", "tc"], "shape"),
        (&["room"], "room"),
        (&["load"], "load"),
        (&["mesh", "agent"], "mesh"),
        (&["mesh", "status"], "mesh"),
        (&["hiccup"], "hiccup"),
    ];
    let mut missing = Vec::new();
    for (args, page) in modes {
        let text = read(&format!("docs/modes/{page}.md"));
        let fs = flags(args);
        assert!(!fs.is_empty(), "{args:?}: no flags read from --help");
        for (f, short) in fs {
            // `--up-delay` is documented as `--up-*` with the symmetric `--delay`.
            let family = ["--up-", "--down-"].iter().any(|p| f.starts_with(p) && text.contains(&format!("{p}*")));
            let named = names(&text, &f) || short.as_deref().is_some_and(|s| names(&text, s));
            if !named && !family {
                missing.push(format!("docs/modes/{page}.md lacks {f}"));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// A mode's synopsis (the first code block of its page, as a newcomer copies it) names
/// exactly the flags of its `--help`: none the CLI lacks (a flag renamed or removed), none
/// left out (ping's, stream's and listen's had fallen behind `--no-hiccup`, `--rcvbuf`, ...).
/// Long flags only; the modes whose synopsis is a pattern (`proxy`'s `--up-*`) or spans
/// several commands (`mesh`, `hiccup` with `ping`) are checked by the test above.
#[test]
fn every_synopsis_names_the_flags_of_its_help() {
    let long = |t: &str| -> std::collections::BTreeSet<String> {
        t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(str::to_owned)
            .collect()
    };
    let mut wrong = Vec::new();
    for mode in ["serve", "ping", "stream", "listen", "suite", "report", "doctor", "room", "load"] {
        let page = read(&format!("docs/modes/{mode}.md"));
        let synopsis = page.split("```").nth(1).expect("the synopsis is the first code block");
        let doc = long(synopsis);
        let help: std::collections::BTreeSet<String> = flags(&[mode]).into_iter().map(|(f, _)| f).collect();
        let stale: Vec<_> = doc.difference(&help).collect();
        let left_out: Vec<_> = help.difference(&doc).collect();
        if !stale.is_empty() || !left_out.is_empty() {
            wrong.push(format!("docs/modes/{mode}.md synopsis: not in --help {stale:?}, missing {left_out:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn docs_stand_alone_and_the_paths_they_name_exist() {
    let path_like = regex_lite_paths();
    let mut problems = Vec::new();
    for (page, text) in pages() {
        for outside in ["../shared", "/work/", "shared/LAB.md", "shared/STYLE.md", "shared/DESIGN.md"] {
            if text.contains(outside) {
                problems.push(format!("{page} refers to {outside}, outside the repository"));
            }
        }
        for p in path_like(&text) {
            if !root().join(&p).exists() {
                problems.push(format!("{page} names {p}, which does not exist"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The repository paths a page names in backticks: `docs/...`, `bench/...`, `crates/...`,
/// `fuzz/...`, `.ci/...` (globs and placeholders such as `<mode>` or `*` skipped).
fn regex_lite_paths() -> impl Fn(&str) -> Vec<String> {
    |text: &str| {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(|s| s.split_whitespace().next().unwrap_or("").trim_end_matches([':', ',', ')']).to_owned())
            .filter(|s| ["docs/", "bench/", "crates/", "fuzz/", ".ci/"].iter().any(|p| s.starts_with(p)))
            .filter(|s| !s.contains(['*', '<', '{', '$']) && !s.ends_with('/'))
            // made by runs, git-ignored (benchmark run directories are named as the runs' record)
            .filter(|s| {
                !["fuzz/target", "fuzz/corpus", "fuzz/artifacts", "bench/out/"].iter().any(|g| s.starts_with(g))
            })
            .collect()
    }
}

/// The suite's steps, as its JSON files name them, against the step table in
/// docs/modes/suite.md and the output README.md shows.
#[test]
fn the_suite_steps_in_the_docs_are_the_ones_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let r = wirebench(&["suite", "--out", out.to_str().unwrap(), "--scale", "0.02"]);
    assert_eq!(r.code, 0, "{r:?}");
    let mut ran: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".json").map(str::to_owned))
        .collect();
    ran.sort();
    let doc = read("docs/modes/suite.md");
    let mut documented: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_owned))
        .filter(|s| !s.starts_with('-'))
        .collect();
    documented.sort();
    assert_eq!(documented, ran, "docs/modes/suite.md's step table against the files the suite wrote");
    let readme = read("README.md");
    for step in ran.iter().filter(|s| !s.starts_with("proxy-")) {
        assert!(
            readme.lines().any(|l| l.starts_with(step.as_str()) || l.starts_with(&format!("{step}:"))),
            "README.md's suite output has no row for {step}"
        );
    }
    // The printed table names the same steps.
    for step in ran.iter().filter(|s| !s.starts_with("proxy-")) {
        assert!(r.out.contains(step.as_str()), "{step} not printed: {}", r.out);
    }
    assert!(Path::new(&out.join("index.html")).exists());
}

/// The text files a reader of the repository meets: the top-level pages and everything under
/// docs/, crates/, bench/, deploy/, fuzz/ and .ci/ (build output, fuzz corpora and benchmark
/// run directories aside, and files that are not UTF-8 text).
fn repository_text() -> Vec<(String, String)> {
    let skip = ["target", "fuzz/corpus", "fuzz/artifacts", "bench/out", "node_modules", ".git"];
    let mut v = Vec::new();
    let mut todo: Vec<PathBuf> =
        ["README.md", "ARCHITECTURE.md", "AGENTS.md", "docs", "crates", "bench", "deploy", "fuzz", ".ci"]
            .iter()
            .map(|p| root().join(p))
            .collect();
    while let Some(p) = todo.pop() {
        let rel = p.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        if skip.iter().any(|s| rel == *s || rel.ends_with(&format!("/{s}")) || rel.starts_with(&format!("{s}/"))) {
            continue;
        }
        if p.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            v.push((rel, text));
        }
    }
    v.sort();
    v
}

/// Where `line` names a tracker entry or a work session by number (the word "issue" or
/// "session", singular or plural, then a number, `#` allowed): such numbers mean nothing to
/// someone who cloned only this repository, so comments and docs say what and why instead.
fn tracker_number(line: &str) -> Option<usize> {
    let l = line.to_ascii_lowercase();
    for word in ["issue", "session"] {
        for (i, _) in l.match_indices(word) {
            // a flag's name followed by its value is not a tracker number
            if l[..i].ends_with('-') {
                continue;
            }
            let rest = l[i + word.len()..].strip_prefix('s').unwrap_or(&l[i + word.len()..]);
            let rest = rest.trim_start_matches(' ');
            let rest = rest.strip_prefix('#').unwrap_or(rest);
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                return Some(i);
            }
        }
    }
    None
}

#[test]
fn no_tracker_or_session_numbers_in_the_repository() {
    // The examples are put together so that this file does not name one itself.
    assert_eq!(tracker_number(&format!("see {} 11: the wait", "Issue")), Some(4));
    assert_eq!(tracker_number(&format!("({} #5 and 6)", "sessions")), Some(1));
    assert_eq!(tracker_number("--max-sessions N, a session id 0x01"), None);
    assert_eq!(tracker_number(&format!("[--max-{} 64]", "sessions")), None);
    let mut found = Vec::new();
    for (path, text) in repository_text() {
        for (n, line) in text.lines().enumerate() {
            if let Some(i) = tracker_number(line) {
                let end = line.len().min(i + 40);
                let at = line.get(i..end).unwrap_or(line);
                found.push(format!("{path}:{}: {at}", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "say what and why instead of a tracker or session number:\n{}", found.join("\n"));
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation dropped, and `-1`,
/// `-2`, ... on repeats.
fn anchors(md: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut bases: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let Some(h) = line.strip_prefix('#').filter(|_| !fenced) else { continue };
        let h = h.trim_start_matches('#').trim();
        let slug: String = h
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let n = bases.iter().filter(|b| **b == slug).count();
        seen.push(if n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        bases.push(slug);
    }
    seen
}

/// Every relative link of README.md, ARCHITECTURE.md, AGENTS.md and docs/ leads to a file
/// that exists, and its `#anchor`, if any, to a heading of that page.
#[test]
fn relative_links_in_the_docs_resolve() {
    let mut broken = Vec::new();
    for (page, text) in pages() {
        let dir = Path::new(&page).parent().unwrap_or(Path::new("")).to_path_buf();
        for (i, _) in text.match_indices("](") {
            let target = text[i + 2..].split([')', ' ']).next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').map_or((target, None), |(f, a)| (f, Some(a)));
            let path = if file.is_empty() { PathBuf::from(&page) } else { dir.join(file) };
            let full = root().join(&path);
            if !full.exists() {
                broken.push(format!("{page}: {target}: no file {}", path.display()));
                continue;
            }
            if let Some(a) = anchor.filter(|_| full.extension().is_some_and(|x| x == "md")) {
                let md = std::fs::read_to_string(&full).unwrap();
                if !anchors(&md).iter().any(|h| h == a) {
                    broken.push(format!("{page}: {target}: no heading #{a}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// The pages stay readable in one sitting: the architecture a map, each mode's page a manual
/// and the benchmarks one page of current results (history lives in git).
#[test]
fn pages_stay_within_their_length_budgets() {
    let mut over = Vec::new();
    for (path, text) in pages() {
        let budget = match path.as_str() {
            "ARCHITECTURE.md" => 150,
            "docs/benchmarks.md" => 400,
            p if p.starts_with("docs/modes/") => 250,
            _ => continue,
        };
        let lines = text.lines().count();
        if lines >= budget {
            over.push(format!("{path}: {lines} lines, budget under {budget}"));
        }
    }
    assert!(over.is_empty(), "pages over their budget:\n{}", over.join("\n"));
}
