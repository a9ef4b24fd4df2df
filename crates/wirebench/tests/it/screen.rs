//! One screen: every command's default output of a problem-free run fits 24 lines of 100
//! characters, and `-q` prints one line per target (loopback, short bounded runs).

use std::net::UdpSocket;
use std::time::Duration;

use wirebench::Shutdown;
use wirebench::room::{self, RoomServer};
use wirebench_report::screen::{HEIGHT, fits};

use crate::support::{Run, serve, wirebench, wirebench_with};

fn on_screen(r: &Run) {
    assert_eq!(r.code, 0, "{r:?}");
    if let Err(e) = fits(&r.out, HEIGHT) {
        panic!("{e}");
    }
}

fn one_line(r: &Run) -> &str {
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines.len(), 1, "-q: one line per target:\n{}", r.out);
    lines[0]
}

/// A free loopback port (bound, read, released).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn ping_fits_a_screen_and_q_is_one_line() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let args = ["ping", &target, "--count", "2000", "--warmup", "100"];
    on_screen(&wirebench(&args));
    let line = one_line(&wirebench(&[&args[..], &["-q"]].concat())).to_owned();
    assert!(line.starts_with(&format!("{target}: p50 ")), "{line}");
    let v = wirebench(&[&args[..], &["-v"]].concat());
    assert!(v.out.contains("warm-up (excluded)") && v.out.contains("kernel counters during the run"), "{}", v.out);
}

#[test]
fn stream_fits_a_screen_and_q_is_one_line() {
    let srv = serve();
    let target = srv.local_addr().to_string();
    let args = ["stream", &target, "-d", "1s", "--rate", "20k/s", "--size", "200"];
    on_screen(&wirebench(&args));
    let line = one_line(&wirebench(&[&args[..], &["-q"]].concat())).to_owned();
    assert!(line.starts_with(&format!("{target}: received ")), "{line}");
}

/// Two serves, one run: one line each.
#[test]
fn stream_q_is_one_line_per_target() {
    let (a, b) = (serve(), serve());
    let (ta, tb) = (a.local_addr().to_string(), b.local_addr().to_string());
    let r = wirebench(&["stream", &ta, &tb, "--count", "2000", "--rate", "20k/s", "-q", "--no-hiccup"]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.out);
    assert!(lines[0].starts_with(&format!("{ta}: received ")) && lines[1].starts_with(&format!("{tb}: received ")));
}

fn listen_with(extra: &[&str]) -> Run {
    let listen = format!("127.0.0.1:{}", free_port());
    let stop = Shutdown::new();
    std::thread::scope(|sc| {
        let l = sc.spawn(|| {
            let mut args = vec!["listen", "--listen", &listen, "--count", "3000", "-d", "10s"];
            args.extend_from_slice(extra);
            wirebench_with(&args, stop.clone())
        });
        // the sender starts once the listener prints, or after a bounded wait for its bind
        let mut sent;
        let t0 = std::time::Instant::now();
        loop {
            sent = wirebench(&["stream", &listen, "--no-control", "--count", "3000", "--rate", "20k/s", "-q"]);
            if l.is_finished() || t0.elapsed() > Duration::from_secs(5) {
                break;
            }
            std::thread::park_timeout(Duration::from_millis(50));
            if l.is_finished() {
                break;
            }
        }
        assert_eq!(sent.code, 0, "{sent:?}");
        let t0 = std::time::Instant::now();
        while !l.is_finished() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::park_timeout(Duration::from_millis(20));
        }
        stop.trigger();
        l.join().unwrap()
    })
}

#[test]
fn listen_fits_a_screen_and_q_is_one_line_per_publisher() {
    on_screen(&listen_with(&[]));
    let q = listen_with(&["-q"]);
    assert_eq!(q.code, 0, "{q:?}");
    assert!(!q.out.is_empty(), "{q:?}");
    for l in q.out.lines() {
        assert!(l.contains(": received "), "one lifetime line per publisher:\n{}", q.out);
    }
}

#[test]
fn load_fits_a_screen_and_q_is_one_line() {
    let r = RoomServer::start(&room::Config::loopback()).expect("room starts on loopback");
    let url = format!("ws://{}/rooms/t", r.local_addr());
    let args = ["load", &url, "--clients", "10", "--duration", "2s"];
    on_screen(&wirebench(&args));
    let line = one_line(&wirebench(&[&args[..], &["-q"]].concat())).to_owned();
    assert!(line.starts_with(&format!("{url}: 10 clients, ")), "{line}");
}

#[test]
fn proxy_fits_a_screen_and_q_is_one_line() {
    let srv = serve();
    let upstream = srv.local_addr().to_string();
    for (extra, check) in [(None, on_screen as fn(&Run)), (Some("-q"), |r: &Run| assert!(!one_line(r).is_empty()))] {
        let listen = format!("127.0.0.1:{}", free_port());
        let stop = Shutdown::new();
        let r = std::thread::scope(|sc| {
            let p = sc.spawn(|| {
                let mut args = vec!["proxy", "--listen", &listen, "--upstream", &upstream, "--delay", "1ms"];
                args.extend(extra);
                wirebench_with(&args, stop.clone())
            });
            let ping = wirebench(&["ping", &listen, "--count", "300", "--warmup", "10", "-q", "--no-hiccup"]);
            assert_eq!(ping.code, 0, "{ping:?}");
            stop.trigger();
            p.join().unwrap()
        });
        check(&r);
    }
}

/// Every line of `text` at most [`WIDTH`] characters (a command whose output may hold
/// problems, and so more lines than a screen).
fn narrow(text: &str) {
    if let Err(e) = fits(text, usize::MAX) {
        panic!("{e}");
    }
}

#[test]
fn doctor_keeps_to_the_width() {
    let r = wirebench(&["doctor", "--stall-check", "100ms"]);
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    assert!(r.out.contains(" OK; nothing was changed"), "{}", r.out);
    narrow(&r.out);
}

/// serve's stop line holds every counter (over 170 characters unfolded).
#[test]
fn serve_stop_line_keeps_to_the_width() {
    let stop = Shutdown::new();
    stop.trigger();
    let r = wirebench_with(&["serve", "--listen", "127.0.0.1:0", "--no-timestamps"], stop);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("wirebench serve: answered 0 udp + 0 tcp probes"), "{}", r.out);
    on_screen(&r);
}

#[test]
fn hiccup_fits_a_screen() {
    let r = wirebench(&["hiccup", "--duration", "300ms"]);
    assert!(r.out.contains("hiccups (this host's own stalls"), "{}", r.out);
    on_screen(&r);
}

#[test]
fn room_keeps_to_the_width() {
    let stop = Shutdown::new();
    stop.trigger();
    let r = wirebench_with(&["room", "--listen", "127.0.0.1:0"], stop);
    assert!(r.out.contains("limits: ") && r.out.contains("room: "), "{}", r.out);
    on_screen(&r);
}

#[test]
fn relay_fits_a_screen() {
    let listen = format!("127.0.0.1:{}", free_port());
    let args = ["relay", "--listen", &listen, "--peers", "127.0.0.2", "--group", "239.255.79.9:5085"];
    let r = wirebench(&[&args[..], &["--check-wait", "100ms", "-d", "200ms"]].concat());
    assert!(r.out.contains("relay listening on"), "{}", r.out);
    on_screen(&r);
}

#[test]
fn suite_fits_a_screen() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let r = wirebench(&["suite", "--out", out.to_str().unwrap(), "--scale", "0.02"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("\nserve: answered "), "{}", r.out);
    // a step that found a problem (a busy host: the sender's own lateness) adds its line
    let problems = r.out.lines().filter(|l| l.contains(": its p50 includes the sender's own lateness")).count();
    if let Err(e) = fits(&r.out, HEIGHT + problems) {
        panic!("{e}");
    }
}

/// An agent whose first window (1 h) does not close while the test runs: status names the
/// node and says nothing is judged yet (exit 1), within the width.
#[test]
fn mesh_status_keeps_to_the_width() {
    use wirebench::mesh::agent::Agent;
    use wirebench::mesh::{AgentArgs, AgentConfig};
    let args = ["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--advertise", "127.0.0.1:1"];
    let args = [&args[..], &["--peers", "127.0.0.1:1", "--window", "1h", "--timeout", "1s"]].concat();
    let a = wirebench::flags::parse_mode::<AgentArgs>("agent", &args).expect("flags parse");
    let cfg = AgentConfig::from_args(&a).expect("valid config");
    let quiet: wirebench::discovery::Log = std::sync::Arc::new(|_| {});
    let agent = Agent::start(&cfg, Shutdown::new(), &quiet).expect("agent starts");
    let url = format!("http://{}", agent.http_addr());
    let r = wirebench(&["mesh", "status", &url, "--timeout", "5s"]);
    agent.stop();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.out.contains("verdict: no cell judged yet"), "{}", r.out);
    narrow(&r.out);
}
