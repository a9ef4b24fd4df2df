//! `wirebench load` against an in-process `wirebench room` on 127.0.0.1: delay against a
//! known added delay, thresholds and exit codes, bad input, a server that dies mid-run,
//! Ctrl-C, and the scenario layering.

use std::time::{Duration, Instant};

use serde_json::Value;
use wirebench::Shutdown;
use wirebench::room::{self, RoomServer};

use crate::relay::{Relay, Script};
use crate::support::{assert_valid_report, read_json, wirebench, wirebench_with};

fn room() -> RoomServer {
    RoomServer::start(&room::Config::loopback()).expect("room starts on loopback")
}

fn url(r: &RoomServer) -> String {
    format!("ws://{}/rooms/t", r.local_addr())
}

fn ns(v: &Value) -> u64 {
    v.as_u64().expect("an integer")
}

fn pct(view: &Value, p: f64) -> u64 {
    view["summary"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| (q["p"].as_f64().unwrap() - p).abs() < 1e-9)
        .map(|q| ns(&q["ns"]))
        .expect("percentile reported")
}

/// `v >= floor`, allowing HdrHistogram's 3-digit resolution (the minimum it reports is
/// the lowest value of its bucket, up to 0.1 % below the sample).
fn at_least(v: u64, floor: u64) -> bool {
    v >= floor - floor / 1000
}

/// Waits (bounded) until the room has relayed `n` messages: the run is under way.
fn wait_for_traffic(r: &RoomServer, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while r.counters().received < n {
        assert!(Instant::now() < deadline, "no traffic reached the room");
        std::thread::park_timeout(Duration::from_millis(5));
    }
}

/// Upload delayed 20 ms, download 10 ms: every delivery takes at least 30 ms, and on
/// loopback at most 30 ms + 25 ms at p50 (tokio's timer is 1 ms grained; the rest is a
/// shared 2-core machine). Replies cross the upload and the download: at least 30 ms too.
#[test]
fn delay_is_at_least_the_added_delay_and_close_to_it() {
    let r = room();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("load.json");
    let series = dir.path().join("series.csv");
    let run = wirebench(&[
        "load",
        &url(&r),
        "--clients",
        "10",
        "--rate",
        "20/s",
        "--duration",
        "1s",
        "--link",
        "0/20ms",
        "--link-down",
        "0/10ms",
        "--json",
        json.to_str().unwrap(),
        "--series",
        series.to_str().unwrap(),
        "-v",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let rep = read_json(&json);
    assert_valid_report(&rep);
    let l = &rep["results"];
    assert_eq!(rep["outcome"], "completed");
    assert_eq!(l["connections"]["connected"], 10);
    let sent = ns(&l["sent"]);
    assert!((150..=210).contains(&sent), "10 clients x 20/s x 1 s: {sent}");
    let all = &l["overall"];
    let added = 30_000_000;
    assert!(at_least(ns(&all["delay"]["summary"]["min_ns"]), added), "{}", all["delay"]["summary"]);
    let p50 = pct(&all["delay"], 50.0);
    assert!(p50 < added + 25_000_000, "p50 {p50} ns");
    assert!(pct(&all["delay_intended"], 50.0) >= p50, "intended-send view includes send slip");
    assert!(at_least(ns(&all["reply"]["summary"]["min_ns"]), added));
    // every relayed message reaches the 4 other members of its room
    let relayed: u64 =
        l["types"].as_array().unwrap().iter().filter(|t| t["request"] == false).map(|t| ns(&t["sent"])).sum();
    assert_eq!(ns(&all["received"]), relayed * 4);
    assert_eq!(l["link_up"]["requested_delay_ns"], 20_000_000);
    // the upload is measured at the socket; the download is a model, and says so
    assert_eq!(
        (l["link_up"]["method"].as_str(), l["link_up"]["hold"]["measures"].as_str()),
        (Some("socket"), Some("shaper_hold"))
    );
    let down = &l["link_down"];
    assert_eq!(
        (down["method"].as_str(), down["hold"]["measures"].as_str()),
        (Some("modelled"), Some("modelled_shaper_hold"))
    );
    assert!(at_least(ns(&l["link_up"]["hold"]["summary"]["min_ns"]), 20_000_000));
    // and every view of the run says which is which
    assert!(run.out.contains("upload link: requested unlimited + 20ms one way; achieved at the socket"), "{}", run.out);
    assert!(run.out.contains("download link (modelled: computed from arrival times"), "{}", run.out);
    let html = dir.path().join("load.html");
    let page = wirebench(&["report", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(page.code, 0, "{}", page.err);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("download link (modelled, nothing held)"), "HTML labels the modelled link");
    let csv = std::fs::read_to_string(&series).unwrap();
    assert!(csv.starts_with("at_s,sent,received,delay_p50_us,delay_p99_us\n1,"), "{csv}");
    assert!(!l["series"].as_array().unwrap().is_empty());
    // counted from both sides: what the room took and wrote is what the clients sent and read
    let c = r.stop();
    assert_eq!(c.received, sent);
    let received = ns(&l["received"]);
    assert_eq!(c.sent, received, "room's writes against the clients' reads");
    let unexpected: u64 = l["types"].as_array().unwrap().iter().map(|t| ns(&t["unexpected"])).sum();
    assert_eq!(
        ns(&l["deliveries"]["arrived"]) + ns(&l["replies"]["arrived"]) + unexpected,
        received,
        "deliveries {} replies {} unexpected {unexpected}",
        l["deliveries"],
        l["replies"]
    );
}

#[test]
fn thresholds_set_the_exit_code() {
    let r = room();
    let base = [
        url(&r),
        "--clients".into(),
        "5".into(),
        "--rate".into(),
        "20/s".into(),
        "--duration".into(),
        "300ms".into(),
        "-v".into(),
    ];
    let with = |t: &str| {
        let mut a: Vec<&str> = vec!["load"];
        a.extend(base.iter().map(String::as_str));
        a.extend(["--link", "0/2ms", "--threshold", t]);
        wirebench(&a)
    };
    let fail = with("p50<1ms");
    assert_eq!(fail.code, 3, "{}{}", fail.out, fail.err);
    assert!(fail.out.contains("threshold p50<1ms:") && fail.out.contains("FAILED"), "{}", fail.out);
    let pass = with("p99<10s");
    assert_eq!(pass.code, 0, "{}{}", pass.out, pass.err);
    let reply = with("reply:max<10s");
    assert_eq!(reply.code, 0, "{}{}", reply.out, reply.err);
}

#[test]
fn bad_input_exits_2_and_no_server_exits_1() {
    for bad in ["http://127.0.0.1:1/x", "ws://", "wss://", "127.0.0.1:8080"] {
        let r = wirebench(&["load", bad, "-d", "1s"]);
        assert_eq!(r.code, 2, "{bad}: {}", r.err);
        assert!(r.err.contains("URL"), "{}", r.err);
    }
    let r = wirebench(&["load", "ws://127.0.0.1:1/x", "--preset", "nope"]);
    assert_eq!(r.code, 2, "{}", r.err);
    let r = wirebench(&["load", "ws://127.0.0.1:1/x", "--threshold", "p96>3ms"]);
    assert_eq!(r.code, 2, "{}", r.err);
    let r = wirebench(&["load", "ws://127.0.0.1:1/x", "--clients", "1000000"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("open files"), "{}", r.err);
    // a port nobody listens on: runtime failure, with a hint
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let r = wirebench(&["load", &format!("ws://{closed}/x"), "--clients", "3", "-d", "200ms", "-q"]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(r.err.contains("wirebench room"), "{}", r.err);
}

/// No connection at all: the message names the URL the first client tried, `{client}` and
/// `{room}` expanded (it once showed the template, naming no address anyone tried), the
/// `--tokens` columns left as placeholders (they may be secrets), and counts in words that
/// fit ("1 attempt", "1 row"; once "1 attempts", "1 rows; client i used row i mod 1").
#[test]
fn no_connection_names_the_url_tried_and_counts_in_words() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "token,user\nAbC1,ann\n").unwrap();
    let url = format!("ws://{closed}/rooms/{{room}}?user={{user}}&c={{client}}");
    let tokens = tokens.to_str().unwrap();
    let r = wirebench(&["load", &url, "--clients", "1", "-d", "200ms", "-q", "--tokens", tokens]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert_eq!(
        r.err,
        format!(
            "error: no client could connect to ws://{closed}/rooms/0?user={{user}}&c=0 (client 0's URL; 1 attempt failed): \
             is a WebSocket server running there? (start one with `wirebench room --listen {closed}`)\n"
        )
    );
    assert!(r.out.contains("tokens: 1 row; every client used it\n"), "{}", r.out);
    let r = wirebench(&["load", &url, "--clients", "3", "-d", "200ms", "-q", "--tokens", tokens]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(r.err.contains("/rooms/0?user={user}&c=0 (client 0's URL; 3 attempts failed)"), "{}", r.err);
    // a shard's first client is not client 0: its own URL, in its own room
    let r = wirebench(&[
        "load",
        &url,
        "--clients",
        "4",
        "--room-size",
        "2",
        "--shard",
        "2/2",
        "-d",
        "200ms",
        "-q",
        "--tokens",
        tokens,
    ]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(r.err.contains("/rooms/1?user={user}&c=2 (client 2's URL; 2 attempts failed)"), "{}", r.err);
}

/// A secret from the --tokens file (or a URL password) never reaches the terminal: not in
/// the line of a run nobody could connect to (before: client 0's URL with every placeholder
/// expanded), not in the line of a URL a token makes invalid (before: `URL '...' is not
/// valid` with the token in it), not in the header line.
#[test]
fn no_connection_and_invalid_url_errors_do_not_print_secrets() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "token,user\nS3cr3tT0ken,ann\n").unwrap();
    let tokens = tokens.to_str().unwrap();
    let url = format!("ws://{closed}/rooms/{{room}}?t={{token}}&c={{client}}");
    let r = wirebench(&["load", &url, "--clients", "1", "-d", "200ms", "--tokens", tokens]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(
        r.err.contains(&format!("no client could connect to ws://{closed}/rooms/0?t={{token}}&c=0 (client 0's URL;")),
        "{}",
        r.err
    );
    for text in [&r.out, &r.err] {
        assert!(!text.contains("S3cr3tT0ken"), "{text}");
    }
    // A password in the URL is refused (credentials go in a header), and not printed.
    let r = wirebench(&["load", &format!("ws://ann:Pa55word@{closed}/r"), "-d", "200ms"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.err.starts_with(&format!("error: URL 'ws://ann:***@{closed}/r' has a user or password")), "{}", r.err);
    assert!(!r.err.contains("Pa55word") && !r.out.contains("Pa55word"), "{r:?}");
    // A token that cannot go in a URL (a space) is refused before the run: exit 2, its row
    // named, the token not printed; the same for a header value.
    std::fs::write(dir.path().join("bad.csv"), "token\nok\nS3cr3t T0ken\n").unwrap();
    let bad = dir.path().join("bad.csv");
    let r = wirebench(&["load", &format!("ws://{closed}/r/{{room}}?t={{token}}"), "--tokens", bad.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.err.starts_with(&format!("error: URL 'ws://{closed}/r/0?t={{token}}' is not valid: ")), "{}", r.err);
    assert!(r.err.trim_end().ends_with("(--tokens row 2)") && !r.err.contains("S3cr3t"), "{}", r.err);
    std::fs::write(&bad, "token\nok\nS3cr3t\u{7}T0ken\n").unwrap();
    let r = wirebench(&[
        "load",
        &format!("ws://{closed}/r"),
        "-H",
        "Authorization: Bearer {token}",
        "--tokens",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.err.contains("header authorization: 'Bearer {token}' is not a valid value (--tokens row 2)"),
        "{}",
        r.err
    );
    assert!(!r.err.contains("S3cr3t"), "{}", r.err);
}

/// The room goes away mid-run: exit 1, a partial report printed and saved.
#[test]
fn a_server_killed_mid_run_gives_exit_1_and_a_partial_report() {
    let r = room();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("partial.json");
    let u = url(&r);
    let j = json.to_str().unwrap().to_owned();
    let t = std::thread::spawn(move || {
        wirebench(&["load", &u, "--clients", "10", "--rate", "50/s", "--duration", "60s", "--json", &j, "-q"])
    });
    wait_for_traffic(&r, 50);
    let _ = r.stop();
    let run = t.join().unwrap();
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(run.out.contains("partial results"), "{}", run.out);
    let rep = read_json(&json);
    assert_valid_report(&rep);
    assert_eq!(rep["outcome"], "peer_silent");
    assert!(ns(&rep["results"]["sent"]) >= 50);
    assert_eq!(rep["results"]["connections"]["disconnects"], 10);
}

#[test]
fn ctrl_c_stops_with_a_partial_report() {
    let r = room();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stopped.json");
    let stop = Shutdown::new();
    let (target, path, signal) = (url(&r), json.to_str().unwrap().to_owned(), stop.clone());
    let t = std::thread::spawn(move || {
        let a = ["load", &target, "--clients", "5", "--rate", "50/s", "--duration", "60s", "--json", &path, "-q"];
        wirebench_with(&a, signal)
    });
    wait_for_traffic(&r, 20);
    stop.trigger();
    let run = t.join().unwrap();
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let rep = read_json(&json);
    assert_eq!(rep["outcome"], "interrupted");
    assert!(ns(&rep["results"]["received"]) > 0);
    // Every client saw the stop and closed with the handshake (a client that missed it
    // would be dropped by its worker 3 s later: an abnormal close at the room).
    let c = r.stop();
    assert_eq!((c.closed_clean, c.closed_abnormal), (5, 0));
}

#[test]
fn preset_scenario_file_and_flags_layer() {
    use wirebench::load::{Args, Config};
    let parse = |a: &[&str]| Config::from_args(&wirebench::flags::parse_mode::<Args>("load", a).unwrap());
    let c = parse(&["ws://127.0.0.1:9/r", "--preset", "collab-ide"]).unwrap();
    assert_eq!((c.clients, c.room_size, c.duration, c.rate.per_sec()), (50, 5, Duration::from_secs(300), 2.0));
    assert!(c.percentiles.contains(&96.0));
    let names: Vec<&str> = c.mix.types().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["cursor", "modify", "save", "open", "list", "comment", "question"]);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.toml");
    std::fs::write(
        &f,
        r#"
preset = "collab-ide"
url = "ws://127.0.0.1:9/rooms/{room}"
clients = 7
duration = "2s"
link = "60.76mbit/10ms"
thresholds = ["p96<300ms"]
[[events]]
name = "key"
weight = 9
size = 300
[[events]]
name = "fetch"
weight = 1
request = true
"#,
    )
    .unwrap();
    let c = parse(&["--scenario", f.to_str().unwrap(), "--clients", "3"]).unwrap();
    assert_eq!(c.clients, 3, "the command line wins");
    assert_eq!(c.duration, Duration::from_secs(2));
    assert_eq!(c.mix.types()[0].size, 300);
    assert!(c.mix.types()[1].request);
    assert_eq!(c.link_up.unwrap().delay_ns, 10_000_000);
    assert_eq!(c.room_url(4), "ws://127.0.0.1:9/rooms/4");
    assert_eq!(c.thresholds.len(), 1);
    std::fs::write(&f, "clients = 1\nbogus = 2\n").unwrap();
    assert!(parse(&["ws://127.0.0.1:9/r", "--scenario", f.to_str().unwrap()]).is_err());
}

#[test]
fn room_cli_refuses_a_bad_address_and_prints_its_counters_on_ctrl_c() {
    let r = wirebench(&["room", "--listen", "nowhere"]);
    assert_eq!(r.code, 2, "{}", r.err);
    let stop = Shutdown::new();
    stop.trigger();
    let r = wirebench_with(&["room", "--listen", "127.0.0.1:0"], stop);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("ws://127.0.0.1:") && r.out.contains("room: received 0 sent 0"), "{}", r.out);
    assert!(r.out.contains("us per message event"), "{}", r.out);
}

fn run_json(args: &[&str], json: &std::path::Path) -> (crate::support::Run, Value) {
    let mut a = vec!["load"];
    a.extend_from_slice(args);
    a.extend(["--json", json.to_str().unwrap(), "-v"]);
    let run = wirebench(&a);
    let rep = read_json(json);
    assert_valid_report(&rep);
    (run, rep)
}

/// At 10,000 clients about 28 % of the expected deliveries went missing and nothing said so.
/// A server that skips relays to one member and withholds them from another, then closes it
/// with 1013: the report sets expected against arrived and names each cause, and every
/// delivery the server made is one the clients timed.
#[test]
fn missing_deliveries_are_counted_with_their_cause() {
    let relay = Relay::start(Script::Lossy {
        skip_every: 7,
        withhold_after: Duration::from_millis(300),
        close_at: Duration::from_millis(800),
    });
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lossy.json");
    let args = ["--clients", "10", "--rate", "40/s", "--duration", "1500ms", "--mix", "cursor=3,save=1"];
    let (run, rep) = run_json(&[&[relay.url().as_str()][..], &args[..]].concat(), &json);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let l = &rep["results"];
    let d = &l["deliveries"];
    let (expected, arrived, missing) = (ns(&d["expected"]), ns(&d["arrived"]), ns(&d["missing"]));
    let closed: u64 = d["closed"].as_object().unwrap().values().map(ns).sum();
    assert_eq!(expected, arrived + missing);
    assert_eq!(missing, ns(&d["dropped"]) + ns(&d["late"]) + closed);
    assert!(ns(&d["dropped"]) > 0, "{d}");
    assert!(ns(&d["closed"]["server close 1013 (try again later: overloaded)"]) > 0, "{d}");
    assert_eq!(l["connections"]["disconnects"], 2, "the third member of each room");
    let typed: u64 =
        l["types"].as_array().unwrap().iter().filter(|t| t["request"] == false).map(|t| ns(&t["missing"])).sum();
    assert_eq!(typed, missing, "per type and overall agree");
    assert_eq!(ns(&l["overall"]["received"]), relay.tally.relayed.load(std::sync::atomic::Ordering::Relaxed));
    // the only replies missing are the kicked members' own, lost with their connections
    let r = &l["replies"];
    let replies_closed: u64 = r["closed"].as_object().unwrap().values().map(ns).sum();
    assert_eq!((ns(&r["missing"]), ns(&r["dropped"]), ns(&r["late"])), (replies_closed, 0, 0), "{r}");
    assert!(run.out.contains(" dropped while connected"), "{}", run.out);
    assert!(run.out.contains("lost when connections closed early (server close 1013"), "{}", run.out);
}

/// A pure echo server gave a table of zeros and exit 0.
#[test]
fn an_echo_server_is_not_a_table_of_zeros() {
    let relay = Relay::start(Script::Echo);
    let url = relay.url();
    let run = wirebench(&[
        "load",
        &url,
        "--clients",
        "5",
        "--rate",
        "20/s",
        "--duration",
        "400ms",
        "--mix",
        "cursor=1",
        "-v",
    ]);
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(run.out.contains("no measurement: nothing was delivered to other members"), "{}", run.out);
    assert!(run.out.contains("came back to their own senders: an echo server?"), "{}", run.out);
    assert!(run.out.contains("nothing was delivered for: cursor ("), "{}", run.out);
    let row = run
        .out
        .lines()
        .skip_while(|l| !l.starts_with("delay from departure"))
        .find(|l| l.trim_start().starts_with("cursor"))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 6..], ["-"; 6], "mean, p50, p90, p99, p99.9, max: {row}");
    // a threshold on a type with nothing delivered fails
    let run = wirebench(&[
        "load",
        &url,
        "-c",
        "5",
        "--rate",
        "20/s",
        "-d",
        "300ms",
        "--mix",
        "cursor=1",
        "--threshold",
        "cursor:p99<10s",
        "-v",
    ]);
    // still no measurement: exit 1, which a failed threshold (3) does not hide
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(run.out.contains("threshold cursor:p99<10s: no data FAILED"), "{}", run.out);
}

fn time_wait_to(port: u16) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let remote_port = f.get(2).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            remote_port == Some(port) && f.get(3) == Some(&"06")
        })
        .count()
}

/// Clients ended with a reset (real servers log 1006). Now each does the close handshake
/// and the server closes TCP first, so no TIME_WAIT is left on the clients' side.
#[test]
fn clients_close_with_the_handshake_and_leave_no_time_wait() {
    let r = room();
    let run = wirebench(&["load", &url(&r), "--clients", "10", "--rate", "20/s", "--duration", "300ms", "-q"]);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    assert_eq!(time_wait_to(r.local_addr().port()), 0, "client-side TIME_WAIT");
    let c = r.stop();
    assert_eq!((c.closed_clean, c.closed_abnormal), (10, 0));
    assert!(!run.out.contains("close_handshake_timeout"), "{}", run.out);
}

/// `report --compare` of two load runs printed nothing.
#[test]
fn load_runs_compare_side_by_side() {
    let r = room();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (f, rate) in [(&a, "20/s"), (&b, "40/s")] {
        let (run, _) = run_json(&[url(&r).as_str(), "-c", "5", "--rate", rate, "-d", "400ms"], f);
        assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    }
    let run = wirebench(&["report", a.to_str().unwrap(), b.to_str().unwrap(), "--compare"]);
    assert_eq!(run.code, 0, "{}", run.err);
    let lines: Vec<&str> = run.out.lines().collect();
    assert_eq!(lines[0], "load runs (ratios against a)", "{}", run.out);
    for row in [
        "sent/s",
        "delivered/s",
        "deliveries missing",
        "replies missing",
        "delay p50",
        "delay p99",
        "delay max",
        "reply p50",
        "cpu/event",
    ] {
        assert!(lines.iter().any(|l| l.starts_with(&format!("{row} "))), "{row}: {}", run.out);
    }
    let missing = lines.iter().find(|l| l.starts_with("deliveries missing ")).unwrap();
    assert!(missing.contains("0.000%"), "{missing}");
    // the same figures in the text and the HTML of one run
    let rep = read_json(&a);
    let expected = ns(&rep["results"]["deliveries"]["expected"]);
    let text = wirebench(&["report", a.to_str().unwrap()]);
    assert_eq!(text.code, 0, "{}", text.err);
    assert!(
        text.out.contains(&format!("deliveries: {expected} expected, {expected} arrived (100.00%)")),
        "{}",
        text.out
    );
    let html = dir.path().join("a.html");
    let run = wirebench(&["report", a.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.err);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("100.00% of {expected} expected deliveries arrived")), "headline");
    assert!(page.contains("<th>expected</th>") && page.contains("<th>missing</th>"), "table");
}

/// The long flags in a mode's synopsis in docs/modes/MODE.md, and in its --help.
fn synopsis_and_help(mode: &str) -> (std::collections::BTreeSet<String>, std::collections::BTreeSet<String>) {
    let md = std::fs::read_to_string(format!("{}/../../docs/modes/{mode}.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let block = md.split("```").nth(1).expect("the synopsis is the first code block");
    let flags = |t: &str| {
        t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
    };
    let help = wirebench(&[mode, "--help"]);
    assert_eq!(help.code, 0, "{}", help.err);
    // A flag's aliases (`[alias: --vus]`, `[aliases: -t, --time]`) are not flags of their own.
    let own: String = help.out.lines().map(|l| l.split(" [alias").next().unwrap_or(l)).collect::<Vec<_>>().join("\n");
    let mut h = flags(&own);
    h.remove("--help");
    h.remove("--version");
    (flags(block), h)
}

/// load.md's synopsis fell behind the CLI.
#[test]
fn the_synopses_match_the_cli() {
    for mode in ["load", "room"] {
        let (doc, help) = synopsis_and_help(mode);
        assert_eq!(doc, help, "docs/modes/{mode}.md synopsis vs `wirebench {mode} --help`");
    }
}
