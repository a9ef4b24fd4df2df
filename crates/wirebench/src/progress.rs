//! Progress of a long run, on stderr so the results on stdout stay clean: nothing for the
//! first [`DELAY`] (short runs print nothing extra), then an indicatif bar when stderr is a
//! terminal, or a plain line every [`PLAIN_EVERY`] when it is not (a CI log). `--quiet`
//! turns it off. A thread of its own draws it, so the measuring thread only bumps a counter.

use std::io::{IsTerminal as _, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Runs shorter than this show no progress at all.
pub const DELAY: Duration = Duration::from_secs(2);
/// Plain lines (stderr not a terminal) come this often.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);
const BAR_EVERY: Duration = Duration::from_millis(200);

/// What "done" is measured against.
#[derive(Debug, Clone)]
pub enum Total {
    /// This many items (probes), counted by the run.
    Count(u64),
    /// This many of what the words say (`messages`, `trials`), counted by the run.
    CountOf(u64, &'static str),
    /// This much time.
    Time(Duration),
    /// `n` probes after a warm-up of at most `bound` (0: only a deadline bounds it) that
    /// the run shows it took once it ends.
    ProbesAfterWarmup { n: u64, bound: u64, shown: Arc<Shown> },
    /// `d` after a warm-up guessed at `guess` until the run shows how long it took.
    TimeAfterWarmup { d: Duration, guess: Duration, shown: Arc<Shown> },
}

/// What a probe loop shows while it runs, for a progress display on another thread: probes
/// sent (warm-up and measured, not discovery), and where the warm-up ended once it did (its
/// probes and its time: a warm-up with a count and a deadline ends by whichever comes
/// first, so only the run knows).
#[derive(Debug)]
pub struct Shown {
    /// Probes sent so far (an `Arc`: what a progress display counts).
    pub sent: Arc<AtomicU64>,
    /// Probes the warm-up took; `u64::MAX` while it runs.
    pub warmup_probes: AtomicU64,
    /// Time the warm-up took, ns; `u64::MAX` while it runs.
    pub warmup_ns: AtomicU64,
}

impl Default for Shown {
    fn default() -> Self {
        Self {
            sent: Arc::new(AtomicU64::new(0)),
            warmup_probes: AtomicU64::new(u64::MAX),
            warmup_ns: AtomicU64::new(u64::MAX),
        }
    }
}

/// A progress display; stops (and clears its bar) when dropped.
#[derive(Debug)]
pub struct Progress {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// The bar while one is drawn (for [`Progress::suspend`]).
    bar: Arc<Mutex<Option<ProgressBar>>>,
}

impl Progress {
    /// Shows the progress of `label` toward `total`, `done` counting items; nothing if
    /// `quiet`.
    pub fn start(label: String, total: Total, done: Arc<AtomicU64>, quiet: bool) -> Self {
        let shown = Arc::new(Mutex::new(None));
        if quiet {
            return Self { stop: None, thread: None, bar: shown };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let drawn = Arc::clone(&shown);
        // The run's clock starts now, not when the thread is first scheduled (on a busy
        // machine that came a tenth of a second later, and the last line fell short).
        let t0 = Instant::now();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                if !matches!(rx.recv_timeout(DELAY), Err(RecvTimeoutError::Timeout)) {
                    return;
                }
                let status = || status(&total, done.load(Ordering::Relaxed), t0.elapsed());
                if std::io::stderr().is_terminal() {
                    bar(&label, &rx, status, &drawn);
                } else {
                    plain(&label, &rx, status, &mut std::io::stderr());
                }
            })
            .ok();
        Self { stop: Some(tx), thread, bar: shown }
    }

    /// Runs `f` (which prints lines, e.g. a stream's interval lines) with the bar hidden, so
    /// the lines and the bar do not tangle on one terminal.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        let bar = self.bar.lock().ok().and_then(|b| b.clone());
        match bar {
            Some(pb) => pb.suspend(f),
            None => f(),
        }
    }
}

/// Plain lines: one every [`PLAIN_EVERY`], and one when the run ends, so a log's last line
/// says where the run ended (a completed run: its total).
fn plain(label: &str, rx: &mpsc::Receiver<()>, status: impl Fn() -> (u64, u64, String), out: &mut impl Write) {
    loop {
        let (_, _, words) = status();
        let _ = writeln!(out, "{label}: {words}");
        if !matches!(rx.recv_timeout(PLAIN_EVERY), Err(RecvTimeoutError::Timeout)) {
            break;
        }
    }
    let (_, _, words) = status();
    let _ = writeln!(out, "{label}: {words}");
}

fn bar(
    label: &str,
    rx: &mpsc::Receiver<()>,
    status: impl Fn() -> (u64, u64, String),
    shown: &Mutex<Option<ProgressBar>>,
) {
    let (_, len, _) = status();
    // Hidden until the first position and message are set, so no empty frame is drawn.
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template("{prefix} [{wide_bar}] {percent:>3}% {msg}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(label.to_owned());
    let (pos, _, words) = status();
    pb.set_position(pos);
    pb.set_message(words);
    pb.set_draw_target(ProgressDrawTarget::stderr());
    if let Ok(mut s) = shown.lock() {
        *s = Some(pb.clone());
    }
    loop {
        let (pos, _, words) = status();
        pb.set_position(pos);
        pb.set_message(words);
        if !matches!(rx.recv_timeout(BAR_EVERY), Err(RecvTimeoutError::Timeout)) {
            break;
        }
    }
    if let Ok(mut s) = shown.lock() {
        *s = None;
    }
    pb.finish_and_clear();
}

/// Position, length and words: `41200/102000 probes, 2.1 s` or `4.1/10.0 s`.
pub fn status(total: &Total, done: u64, elapsed: Duration) -> (u64, u64, String) {
    let secs = elapsed.as_secs_f64();
    let ended = |v: &AtomicU64| Some(v.load(Ordering::Relaxed)).filter(|&v| v != u64::MAX);
    match total {
        &Total::Count(n) => (done.min(n), n, format!("{done}/{n} probes, {secs:.1} s")),
        &Total::CountOf(n, what) => (done.min(n), n, format!("{done}/{n} {what}, {secs:.1} s")),
        &Total::Time(d) => {
            let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            (ms(elapsed).min(ms(d)), ms(d), format!("{secs:.1}/{:.1} s", d.as_secs_f64()))
        }
        Total::ProbesAfterWarmup { n, bound, shown } => {
            // While it runs, the warm-up may take its whole count (or, with only a
            // deadline, it has taken what was sent).
            let warmup = ended(&shown.warmup_probes).unwrap_or_else(|| (*bound).max(done));
            status(&Total::Count(n.saturating_add(warmup)), done, elapsed)
        }
        Total::TimeAfterWarmup { d, guess, shown } => {
            let warmup = ended(&shown.warmup_ns).map_or(*guess, Duration::from_nanos);
            status(&Total::Time(*d + warmup), done, elapsed)
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `ping 127.0.0.1:7878`.
pub fn label(mode: &str, target: SocketAddr) -> String {
    format!("{mode} {target}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words() {
        let s = status(&Total::Count(1000), 250, Duration::from_millis(2100));
        assert_eq!(s, (250, 1000, "250/1000 probes, 2.1 s".into()));
        let s = status(&Total::Time(Duration::from_secs(10)), 0, Duration::from_millis(4100));
        assert_eq!(s, (4100, 10_000, "4.1/10.0 s".into()));
        assert_eq!(status(&Total::Count(10), 12, Duration::ZERO).0, 10, "never past the end");
        let s = status(&Total::CountOf(17, "trials"), 3, Duration::from_millis(6200));
        assert_eq!(s, (3, 17, "3/17 trials, 6.2 s".into()));
    }

    /// The last plain line is written when the run ends (before: up to PLAIN_EVERY before
    /// it, short of the total).
    #[test]
    fn the_last_plain_line_is_where_the_run_ended() {
        let (tx, rx) = mpsc::channel();
        let done = AtomicU64::new(400);
        let status = || status(&Total::Count(1000), done.fetch_add(600, Ordering::Relaxed), Duration::from_secs(3));
        drop(tx);
        let mut out = Vec::new();
        plain("ping 127.0.0.1:7878", &rx, status, &mut out);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "ping 127.0.0.1:7878: 400/1000 probes, 3.0 s\nping 127.0.0.1:7878: 1000/1000 probes, 3.0 s\n");
    }

    #[test]
    fn a_short_run_prints_nothing_and_stops_at_once() {
        let t0 = Instant::now();
        drop(Progress::start("x".into(), Total::Count(1), Arc::new(AtomicU64::new(0)), false));
        assert!(t0.elapsed() < DELAY, "dropping ends the thread without waiting for the delay");
    }
}
