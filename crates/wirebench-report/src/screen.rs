//! One screen: how much a text view shows, and the width every line keeps to.
//!
//! A command's default output fits [`HEIGHT`] lines of at most [`WIDTH`] characters for a
//! run without problems (iperf's and sockperf's users read it on one terminal screen);
//! `-v` adds the details (per-interval splits, kernel counters, wake-up tables) and
//! `--json` always holds everything. A problem the run found gets its own short line in
//! the default view.

use std::io::{self, Write};

/// The widest line of a default view, in characters.
pub const WIDTH: usize = 100;

/// The most lines a default view of a problem-free run prints.
pub const HEIGHT: usize = 24;

/// The most interval lines a bounded run prints by default: with its summary, one screen.
pub const INTERVAL_LINES: u128 = 10;

/// How many intervals of `step` one default interval line covers in a run of `run`: one
/// while the run has at most [`INTERVAL_LINES`] of them, then as many as keep the lines
/// within that count (a 60 s run with 1 s intervals: a line every 6 s).
pub fn intervals_per_line(run: std::time::Duration, step: std::time::Duration) -> usize {
    let steps = run.as_nanos().div_ceil(step.as_nanos().max(1));
    usize::try_from(steps.div_ceil(INTERVAL_LINES)).unwrap_or(usize::MAX).max(1)
}

/// How much a text view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Detail {
    /// One summary line per target (`-q`).
    Quiet,
    /// One screen: the summary and any problem the run found.
    #[default]
    Normal,
    /// Everything the text views know (`-v`, and the HTML page's text blocks).
    Verbose,
}

impl Detail {
    /// From a command's `-q` and `-v` flags (`-q` wins).
    pub fn of(quiet: bool, verbose: bool) -> Self {
        match (quiet, verbose) {
            (true, _) => Self::Quiet,
            (false, true) => Self::Verbose,
            (false, false) => Self::Normal,
        }
    }

    /// Whether the details go out.
    pub fn verbose(self) -> bool {
        self == Self::Verbose
    }
}

/// `line` folded at spaces into lines of at most [`WIDTH`] characters; a continuation is
/// indented two spaces more than the line it continues. A word longer than a line stays
/// whole.
pub fn wrap(line: &str) -> String {
    let indent = line.len() - line.trim_start().len();
    wrap_at(line, indent + 2)
}

/// [`wrap`] with continuations indented `more` spaces (a table's text column). The spaces
/// between words are kept, except at a fold.
pub fn wrap_at(line: &str, more: usize) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_owned();
    }
    let indent = line.len() - line.trim_start().len();
    let more = " ".repeat(more.min(WIDTH / 2));
    let mut out = String::new();
    let mut cur = line[..indent].to_owned();
    let mut cur_len = indent;
    let mut empty = true;
    let mut rest = line[indent..].trim_end();
    while !rest.is_empty() {
        let word_at = rest.len() - rest.trim_start_matches(' ').len();
        let (gap, after) = rest.split_at(word_at);
        let (word, tail) = after.split_at(after.find(' ').unwrap_or(after.len()));
        rest = tail;
        let n = word.chars().count();
        if !empty && cur_len + gap.len() + n > WIDTH {
            out.push_str(&cur);
            out.push('\n');
            cur.clone_from(&more);
            cur_len = more.len();
            empty = true;
        }
        if !empty {
            cur.push_str(gap);
            cur_len += gap.len();
        }
        cur.push_str(word);
        cur_len += n;
        empty = false;
    }
    out.push_str(&cur);
    out
}

/// `text` with the folds [`wrap`] made joined again (a continuation is a line indented
/// deeper than the one before whose first word would not have fitted after it): what tests
/// and scripts that look for a whole line read.
pub fn unfold(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let body = line.trim_start();
        let word = body.split(' ').next().unwrap_or("").chars().count();
        let joins = lines.last().is_some_and(|prev| {
            let deeper = line.len() - body.len() > prev.len() - prev.trim_start().len();
            !body.is_empty() && deeper && prev.chars().count() + 1 + word > WIDTH
        });
        match lines.last_mut() {
            Some(prev) if joins => {
                prev.push(' ');
                prev.push_str(body);
            }
            _ => lines.push(line.to_owned()),
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Every line of `text` folded with [`wrap`].
pub fn wrap_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        out.push_str(&wrap(body));
        out.push_str(nl);
    }
    out
}

/// A writer that passes every line on folded with [`wrap`], once its newline arrives: the
/// output of the commands that print as they go (serve, room, relay, doctor, hiccup, suite,
/// mesh). A line left without a newline is passed on when the writer is dropped.
#[expect(missing_debug_implementations, reason = "holds a writer")]
pub struct Folded<'a> {
    inner: &'a mut dyn Write,
    pending: Vec<u8>,
}

impl<'a> Folded<'a> {
    /// Folds what is written to `inner`.
    pub fn new(inner: &'a mut dyn Write) -> Self {
        Self { inner, pending: Vec::new() }
    }
}

impl Write for Folded<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') {
            let lines: Vec<u8> = self.pending.drain(..=end).collect();
            self.inner.write_all(wrap_text(&String::from_utf8_lossy(&lines)).as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Drop for Folded<'_> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.inner.write_all(wrap(&String::from_utf8_lossy(&self.pending)).as_bytes());
            let _ = self.inner.flush();
        }
    }
}

/// Runs `fill` into a buffer and writes what it printed to `out` folded with [`wrap`].
pub fn wrapped(out: &mut dyn Write, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut buf = Vec::new();
    fill(&mut buf)?;
    out.write_all(wrap_text(&String::from_utf8_lossy(&buf)).as_bytes())
}

/// Why `text` does not fit `lines` lines of [`WIDTH`] characters, or `Ok`: what the tests
/// of every command's default output check.
pub fn fits(text: &str, lines: usize) -> Result<(), String> {
    let n = text.lines().count();
    if n > lines {
        return Err(format!("{n} lines, more than {lines}:\n{text}"));
    }
    match text.lines().find(|l| l.chars().count() > WIDTH) {
        Some(l) => Err(format!("a line of {} characters, over {WIDTH}: {l}\n{text}", l.chars().count())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_run_prints_at_most_ten_interval_lines() {
        let s = std::time::Duration::from_secs;
        let lines = |run, step| {
            let every = intervals_per_line(run, step) as u128;
            run.as_nanos().div_ceil(step.as_nanos()) / every
        };
        assert_eq!(intervals_per_line(s(10), s(1)), 1, "ten seconds: every second");
        assert_eq!(intervals_per_line(s(11), s(1)), 2);
        assert_eq!(intervals_per_line(s(60), s(1)), 6);
        assert_eq!(intervals_per_line(s(3600), std::time::Duration::from_millis(100)), 3600);
        assert_eq!(intervals_per_line(std::time::Duration::ZERO, s(1)), 1, "never zero");
        for run in [1, 9, 10, 11, 19, 25, 61, 999, 86_400] {
            assert!((1..=10).contains(&lines(s(run), s(1))), "{run} s");
        }
    }

    #[test]
    fn wrap_folds_at_spaces_and_indents_continuations() {
        assert_eq!(wrap("short"), "short");
        let words: Vec<String> = (0..40).map(|i| format!("w{i:02}")).collect();
        let long = format!("  {}", words.join(" "));
        let folded = wrap(&long);
        assert!(fits(&folded, 3).is_ok(), "{folded}");
        let lines: Vec<&str> = folded.lines().collect();
        assert!(lines[0].starts_with("  w00 ") && lines[1].starts_with("    w"), "{folded}");
        // nothing lost, nothing added but the folds
        assert_eq!(folded.split_whitespace().collect::<Vec<_>>(), long.split_whitespace().collect::<Vec<_>>());
        let word = "x".repeat(WIDTH + 5);
        assert_eq!(wrap(&word), word, "a word longer than a line stays whole");
    }

    #[test]
    fn wrap_text_keeps_short_lines_and_newlines() {
        assert_eq!(wrap_text("a\n\nb\n"), "a\n\nb\n");
        assert!(fits(&wrap_text(&format!("{}\nshort\n", "y ".repeat(90))), 3).is_ok());
    }

    #[test]
    fn fits_names_what_is_over() {
        assert!(fits("a\nb\n", 2).is_ok());
        assert!(fits("a\nb\nc\n", 2).unwrap_err().starts_with("3 lines"));
        assert!(fits(&"z".repeat(WIDTH + 1), 2).unwrap_err().contains("101 characters"));
    }

    #[test]
    fn quiet_wins_over_verbose() {
        assert_eq!(Detail::of(true, true), Detail::Quiet);
        assert_eq!(Detail::of(false, true), Detail::Verbose);
        assert_eq!(Detail::of(false, false), Detail::Normal);
    }
}
