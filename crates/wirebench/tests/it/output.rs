//! Result files as a user meets them: `--json -` (the report on stdout, the text on
//! stderr) in every mode that has `--json`; paths that cannot be written refused before a
//! run (exit 2), no folders made; a name that does not resolve said as such; SIGTERM in the
//! middle of a run leaves the report and no temporary file.

use std::path::Path;
use std::time::{Duration, Instant};

use wirebench_core::report::{Outcome, Report};

use crate::support::{read_json, serve, wirebench};

/// The report a run wrote to stdout.
fn report_on_stdout(out: &str) -> Report {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("stdout is one JSON report ({e}): {out:.300}"))
}

#[test]
fn json_dash_puts_the_report_on_stdout_and_the_text_on_stderr() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let r = wirebench(&["ping", &target, "--count", "200", "--warmup", "0", "--json", "-"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(matches!(report_on_stdout(&r.out).results, wirebench_core::report::Results::Ping(_)));
    assert!(r.err.contains("p99.9"), "the summary is on stderr: {}", r.err);

    let r = wirebench(&["stream", &target, "--duration", "300ms", "-q", "--json", "-"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(matches!(report_on_stdout(&r.out).results, wirebench_core::report::Results::Stream(_)));
    assert!(r.err.contains("received"), "{}", r.err);

    let r = wirebench(&["proxy", "--listen", "127.0.0.1:0", "--upstream", &target, "-d", "100ms", "--json", "-"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(matches!(report_on_stdout(&r.out).results, wirebench_core::report::Results::Proxy(_)));
    assert!(r.err.contains("wirebench proxy"), "{}", r.err);
    srv.stop();

    let r = wirebench(&["listen", "--listen", "127.0.0.1:0", "-d", "100ms", "--json", "-"]);
    // nothing arrived: exit 1, the report written all the same
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("nothing arrived at 127.0.0.1:0"), "{}", r.err);
    assert!(matches!(report_on_stdout(&r.out).results, wirebench_core::report::Results::Stream(_)));

    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let relay = [
        "relay",
        "--listen",
        &listen,
        "--peers",
        "127.0.0.2",
        "--group",
        "239.255.79.9:5085",
        "--check-wait",
        "100ms",
        "-d",
        "200ms",
        "--json",
        "-",
    ];
    let r = wirebench(&relay);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(matches!(report_on_stdout(&r.out).results, wirebench_core::report::Results::Relay(_)));
    assert!(r.err.contains("relay listening") && r.err.contains("relay port:"), "{}", r.err);

    let room = wirebench::room::RoomServer::start(&wirebench::room::Config::loopback()).unwrap();
    let url = format!("ws://{}/rooms/t", room.local_addr());
    let r = wirebench(&["load", &url, "--clients", "2", "--rate", "10/s", "--duration", "1s", "-q", "--json", "-"]);
    room.stop();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(matches!(report_on_stdout(&r.out).results, wirebench_core::report::Results::Load(_)));

    let r = wirebench(&["doctor", "--json", "-"]);
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("doctor's findings on stdout");
    assert_eq!(v["tool"], "wirebench doctor");
    assert!(r.err.contains("nothing was changed"), "{}", r.err);
}

#[test]
fn two_outputs_on_stdout_are_refused() {
    let r = wirebench(&["ping", "127.0.0.1:9", "--json", "-", "--hgrm", "-"]);
    assert_eq!((r.code, r.err.lines().count()), (2, 1), "{r:?}");
    assert!(r.err.contains("only one can go to standard output"), "{}", r.err);
}

#[test]
fn an_unwritable_output_path_is_exit_2_before_anything_runs() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/r.json");
    let cases: Vec<Vec<String>> = vec![
        vec!["ping".into(), target.clone(), "--json".into(), missing.display().to_string()],
        vec!["ping".into(), target.clone(), "--hgrm".into(), dir.path().display().to_string()],
        vec!["stream".into(), target.clone(), "--json".into(), "/proc/version".into()],
        vec!["report".into(), "x.json".into(), "--html".into(), dir.path().join("new/r.html").display().to_string()],
        vec!["doctor".into(), "--json".into(), missing.display().to_string()],
    ];
    for args in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = wirebench(&a);
        assert_eq!((r.code, r.err.lines().count()), (2, 1), "{args:?}: {r:?}");
        assert!(r.err.contains("cannot write there"), "{args:?}: {}", r.err);
    }
    assert_eq!(srv.counters().udp_probes, 0, "nothing was measured before the refusal");
    // The suite makes its own --out folder, the one folder wirebench creates: where it
    // cannot, that is bad input too.
    let r = wirebench(&["suite", "--out", "/proc/wirebench-report"]);
    assert_eq!((r.code, r.err.lines().count()), (2, 1), "{r:?}");
    assert!(r.err.contains("--out /proc/wirebench-report: cannot create the folder"), "{}", r.err);
    assert!(!dir.path().join("no").exists() && !dir.path().join("new").exists(), "no folder was made");
    srv.stop();
}

#[test]
fn a_name_that_does_not_resolve_says_so() {
    let r = wirebench(&["ping", "no-such-host.invalid:7878"]);
    assert_eq!((r.code, r.err.lines().count()), (2, 1), "{r:?}");
    assert!(r.err.contains("unknown host 'no-such-host.invalid': the name did not resolve"), "{}", r.err);
    for (addr, want) in [("localhost", "expected host:port"), ("localhost:http", "port 'http' is not a number")] {
        let r = wirebench(&["ping", addr]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.err.contains(want), "{addr}: {}", r.err);
    }
}

/// The real binary, stopped by SIGTERM mid-run: it saves the partial report where asked
/// and leaves no temporary file beside it.
#[test]
fn sigterm_mid_run_leaves_the_report_and_no_temporary_file() {
    use std::process::{Command, Stdio};
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["ping", &srv.local_addr().to_string(), "--count", "100000000", "--warmup", "0", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while srv.counters().udp_probes < 2_000 {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::park_timeout(Duration::from_millis(5));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()), nix::sys::signal::SIGTERM)
        .unwrap();
    let status = child.wait().unwrap();
    srv.stop();
    assert!(status.success(), "{status}");
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["r.json"]);
    let report: Report = serde_json::from_value(read_json(&json)).unwrap();
    assert_eq!(report.outcome, Outcome::Interrupted);
    assert!(!Path::new(&json).with_extension("tmp").exists());
}

/// `stream --help` said TCP messages default to 131072 bytes; a TCP stream sends 65535.
/// The help's figure is read and checked against what a run with the default reports.
#[test]
fn the_help_states_the_tcp_size_a_run_uses() {
    let help = wirebench(&["stream", "--help"]).out;
    let tcp: usize = help
        .split("[default: 1468 UDP, ")
        .nth(1)
        .and_then(|rest| rest.split(" TCP]").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no TCP default in {help}"));
    let srv = serve();
    let r = wirebench(&["stream", &srv.local_addr().to_string(), "--proto", "tcp", "-n", "10", "-q", "--json", "-"]);
    srv.stop();
    assert_eq!(r.code, 0, "{r:?}");
    let wirebench_core::report::Results::Stream(s) = report_on_stdout(&r.out).results else { panic!("stream") };
    assert_eq!(s.size, tcp, "--help says {tcp}");
}
