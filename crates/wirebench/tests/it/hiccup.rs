//! The stall meter: a process stopped for 200 ms shows a 200 ms stall, its histogram and
//! per-second series agree, a quiet run's median is small, and every measuring mode carries
//! it (or not, with `--no-hiccup`).

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use wirebench_core::report::{HiccupResult, Report};

use crate::support::{assert_valid_report, read_json, serve, wirebench};

fn hiccup_of(path: &std::path::Path) -> HiccupResult {
    let v = read_json(path);
    assert_valid_report(&v);
    let r: Report = serde_json::from_value(v).expect("a Report");
    r.attribution.and_then(|a| a.hiccup).expect("a hiccup section")
}

/// The histogram, the counts and the per-second series of one recording agree.
fn assert_consistent(h: &HiccupResult) {
    let s = &h.lateness.summary;
    assert_eq!(s.count, h.wakeups + h.corrected, "every wake-up and every corrected value is in the histogram");
    assert_eq!(h.seconds.iter().map(|x| x.count).sum::<u64>(), s.count, "the series adds up to the histogram");
    let h_hist = wirebench_core::report::decode_histogram(&h.lateness.histogram).unwrap();
    assert_eq!(h_hist.len(), s.count);
    let worst = h.seconds.iter().map(|x| x.max_ns).max().unwrap();
    assert_eq!(h_hist.highest_equivalent(worst), h_hist.max(), "the worst second holds the maximum");
    for (i, x) in h.seconds.iter().enumerate() {
        assert_eq!(x.at_s, i as u64, "one row per second, in order");
    }
}

#[test]
fn a_process_stopped_for_200ms_shows_a_200ms_stall() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hiccup.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["hiccup", "--duration", "2s", "--json", json.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first line comes once the meter has woken once: from then on a stall is seen.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("waking every 1ms"), "{line:?}");
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGSTOP).unwrap();
    // The stimulus: the process stays stopped this long (nothing here waits on it).
    std::thread::sleep(Duration::from_millis(200));
    kill(pid, Signal::SIGCONT).unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("hiccup did not finish within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("hiccups (this host's own stalls"), "{rest}");
    let h = hiccup_of(&json);
    assert_consistent(&h);
    let max = h.lateness.summary.max_ns;
    assert!(max >= 190_000_000, "a 200 ms stop shows as a wake-up at least 190 ms late: {max} ns");
    // the wake-ups it missed meanwhile are counted as jHiccup counts them (one per interval)
    assert!(h.corrected >= 150, "{} corrected", h.corrected);
    let worst = h.seconds.iter().max_by_key(|s| s.max_ns).unwrap();
    assert!(worst.count >= 150, "the stall's second holds its corrected values: {worst:?}");
}

#[test]
fn a_quiet_run_wakes_nearly_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("quiet.json");
    let run = wirebench(&["hiccup", "--duration", "1s", "--json", json.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.out.contains("hiccups (this host's own stalls"), "{}", run.out);
    let h = hiccup_of(&json);
    assert_consistent(&h);
    assert!(h.wakeups > 100, "{} wake-ups in a second at 1 ms", h.wakeups);
    assert_eq!(h.interval_ns, 1_000_000);
    // A behaviour check, not a timing claim: on any host that is not stalled most of the
    // time, the median wake-up is far below one interval late.
    let p50 = h.lateness.summary.at(50.0).unwrap();
    assert!(p50 < 5_000_000, "median lateness {p50} ns");
    // its own cost is read and shown: some CPU, far from a whole core for a sleeping thread
    let cpu = h.cpu_ns.expect("the meter's own CPU (schedstat)");
    let share = wirebench_core::hiccup::cost_share(cpu, h.wakeups + h.corrected, h.interval_ns);
    assert!(cpu > 0 && share < 0.5, "{cpu} ns, {share}");
    let text = wirebench_report::screen::unfold(&run.out);
    assert!(text.contains(&format!("; the meter's own CPU {:.2}% of one core", share * 100.0)), "{}", run.out);
}

#[test]
fn every_measuring_mode_carries_the_meter_unless_told_not_to() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let target = srv.local_addr().to_string();
    let with = dir.path().join("with.json");
    let run = wirebench(&[
        "ping",
        "-v",
        &target,
        "--count",
        "500",
        "--warmup",
        "10",
        "--hiccup-interval",
        "100us",
        "--json",
        with.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.out.contains("hiccups (this host's own stalls: a thread woken every 100 us"), "{}", run.out);
    let h = hiccup_of(&with);
    assert_eq!(h.interval_ns, 100_000);
    assert_consistent(&h);
    let without = dir.path().join("without.json");
    let run = wirebench(&["ping", &target, "--count", "100", "--no-hiccup", "--json", without.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let v = read_json(&without);
    assert_valid_report(&v);
    assert!(v.pointer("/attribution/hiccup").is_none(), "{}", v["attribution"]);
    assert!(!run.out.contains("hiccups"), "{}", run.out);
    for bad in ["5us", "2s"] {
        let run = wirebench(&["ping", &target, "--hiccup-interval", bad]);
        assert_eq!(run.code, 2, "{bad}: {run:?}");
        assert!(run.err.contains("--hiccup-interval"), "{}", run.err);
    }
    // the other modes take the same flags
    for mode in ["stream", "listen", "load", "proxy"] {
        let run = wirebench(&[mode, "--help"]);
        assert!(run.out.contains("--hiccup-interval") && run.out.contains("--no-hiccup"), "{mode}: {}", run.out);
    }
}

#[test]
fn the_hiccup_command_names_its_own_flag_when_the_interval_is_out_of_range() {
    for bad in ["5us", "2s"] {
        let run = wirebench(&["hiccup", "--interval", bad, "--duration", "1s"]);
        assert_eq!(run.code, 2, "{bad}: {run:?}");
        assert_eq!(run.err.trim(), format!("error: --interval {bad} is outside 10us..=1s"), "{run:?}");
    }
}

/// A run over 2 s shows its progress (plain lines on a pipe), and `-q` none. The binary
/// itself: progress goes to the process's stderr.
#[test]
fn a_run_over_two_seconds_shows_progress() {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .arg("hiccup")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&["-t", "2500ms", "--interval", "10ms"]);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("hiccup: ")).collect();
    assert!(lines.len() >= 2, "a line at 2 s and one at the end: {err:?}");
    assert_eq!(lines.last().copied(), Some("hiccup: 2.5/2.5 s"), "{err:?}");
    let quiet = run(&["-d", "2100ms", "--interval", "10ms", "-q"]);
    assert!(!quiet.contains("hiccup: "), "{quiet:?}");
}
