//! The stream receiver's kernel RX timestamps on loopback: every datagram's stamp is at or
//! before the application's read (the wake-up delay is never negative), the figures are the
//! same in the JSON and the text, forward (serve's receiver) and reverse (this client's);
//! a receiver whose sockets may not ask for stamps says so and still reports; a serve
//! stopped and continued (SIGSTOP, SIGCONT) keeps its session.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use wirebench_core::report::{ReceiverResult, Report, Results, StreamResults};

use crate::support::{assert_valid_report, read_json, serve, wirebench};

fn stream_at(target: &str, extra: &[&str]) -> (StreamResults, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut args = vec!["stream", target, "--json", json.to_str().unwrap(), "-v", "--no-hiccup"];
    args.extend_from_slice(extra);
    let r = wirebench(&args);
    assert_eq!(r.code, 0, "{r:?}");
    let v = read_json(&json);
    assert_valid_report(&v);
    let rep: Report = serde_json::from_value(v).unwrap();
    let Results::Stream(s) = rep.results else { panic!("a stream report") };
    (s, r.out)
}

/// Every datagram counted once; none stamped after its read.
fn assert_measured(r: &ReceiverResult, text: &str) {
    let w = r.wake.expect("a UDP receiver reports its wake-up delay");
    assert!(w.available, "{w:?}");
    assert_eq!(w.after_read, 0, "no RX stamp after the application's read: {w:?}");
    assert_eq!(w.stamped + w.unstamped, r.total.received + r.total.duplicates + r.foreign, "{w:?}");
    assert!(w.stamped * 10 >= r.total.received * 9, "(almost) every datagram stamped: {w:?}");
    assert!(w.p50_ns <= w.p99_ns && w.p99_ns <= w.max_ns, "{w:?}");
    let line = wirebench_report::stream_wake::line(r).unwrap();
    assert!(line.contains("receiver wake-up (application read - kernel RX stamp"), "{line}");
    assert!(text.contains(&line), "{line}\n{text}");
}

#[test]
fn forward_and_reverse_receivers_report_their_wake_up_delay() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let (s, text) = stream_at(&target, &["--count", "20000", "--rate", "20k/s", "--size", "512"]);
    assert_eq!(s.receivers[0].total.received, 20_000);
    assert_measured(&s.receivers[0], &text);
    let (s, text) = stream_at(&target, &["--reverse", "--count", "5000", "--rate", "10k/s", "--size", "100"]);
    assert_eq!((s.receivers[0].direction.as_str(), s.receivers[0].total.received), ("reverse", 5_000));
    assert_measured(&s.receivers[0], &text);
    drop(srv);
}

fn spawn_serve(env: &[(&str, &str)]) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--open"])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let target = line.split_whitespace().nth(5).unwrap_or_default().to_owned();
    assert!(line.contains("listening on udp+tcp") && target.contains(':'), "{line:?}");
    (child, target)
}

/// A stop signal makes serve's blocked control read fail with EINTR; that ended the session
/// ("ended the session early") until it was read as the timeout it is.
#[test]
fn a_serve_stopped_and_continued_keeps_its_session() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let (mut child, target) = spawn_serve(&[]);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut client = Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["stream", &target, "--rate", "2k/s", "--size", "100", "-d", "2s", "--no-hiccup"])
        .args(["--json", json.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(client.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("s] 127.0.0.1:") {
        assert!(out.read_line(&mut text).unwrap() > 0, "no interval row: {text}");
    }
    // The stimulus: five short stops (nothing here waits on them).
    for _ in 0..5 {
        kill(pid, Signal::SIGSTOP).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        kill(pid, Signal::SIGCONT).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::io::Read::read_to_string(&mut out, &mut text).unwrap();
    let ok = client.wait().unwrap().success();
    let _ = child.kill();
    let _ = child.wait();
    assert!(ok && !text.contains("ended the session early"), "{text}");
}

/// A serve whose sockets do not ask for stamps (the test-only environment variable): the
/// run still reports, with the note.
#[test]
fn without_rx_timestamps_the_report_says_so() {
    let (mut child, target) = spawn_serve(&[(wirebench::flow::recv::NO_RX_STAMPS_ENV, "1")]);
    let (s, text) = stream_at(&target, &["--count", "2000", "--rate", "20k/s", "--size", "100"]);
    let _ = child.kill();
    let _ = child.wait();
    let r = &s.receivers[0];
    assert_eq!(r.total.received, 2_000);
    let w = r.wake.expect("figures, even without stamps");
    assert!(!w.available && w.stamped == 0, "{w:?}");
    assert!(
        text.contains(": note: kernel RX timestamps unavailable at this receiver (SO_TIMESTAMPING refused or off)"),
        "{text}"
    );
}
