//! The scenario file's connection keys (`ca`, `insecure`, `headers`, `cookies`,
//! `subprotocols`, `tokens`): they reach the server as the flags do, the flags override or
//! extend them as documented, paths are relative to the file, bad values exit 2 with one
//! line naming the file and the key. The chosen subprotocol is the same in the text, the
//! JSON and the HTML.

use std::path::Path;

use crate::load_tls::{certs, recording_server, tls_room};
use crate::support::{assert_valid_report, read_json, wirebench};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn scenario_keys_reach_the_server_and_flags_override_or_extend_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens.csv"), "token\nt0\nt1\n").unwrap();
    let (addr, seen, stop, thread) = recording_server(Some("v2"));
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"url = "ws://{addr}/r{{room}}"
clients = 4
room_size = 2
rate = "1/s"
duration = "1s"
headers = ["Authorization: Bearer file", "X-File: f{{client}}", "X-Tok: {{token}}"]
cookies = ["sid=file", "theme=light"]
subprotocols = ["v2"]
tokens = "tokens.csv"
"#
        ),
    )
    .unwrap();
    let json = dir.path().join("a.json");
    let run = wirebench(&[
        "load",
        "--scenario",
        p(&scenario),
        "-v",
        "--json",
        p(&json),
        "-H",
        "Authorization: Bearer flag",
        "--cookie",
        "theme=dark",
    ]);
    // the recording server relays nothing: measured, but nothing arrived (exit 1)
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    let run_b = wirebench(&["load", "--scenario", p(&scenario), "-q", "--subprotocol", "v1", "--subprotocol", "v2"]);
    assert_eq!(run_b.code, 1, "{}{}", run_b.out, run_b.err);
    stop.trigger();
    thread.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 8, "{}{}", run.out, run.err);
    let (mut a, mut b) = (seen[..4].to_vec(), seen[4..].to_vec());
    for batch in [&mut a, &mut b] {
        batch.sort_by_key(|s| s.get("x-file")[0].to_owned());
    }
    for (i, s) in a.iter().enumerate() {
        // a header the command line names replaces the file's; the others stay
        assert_eq!(s.get("authorization"), ["Bearer flag"]);
        assert_eq!(s.get("x-file"), [format!("f{i}")]);
        // tokens.csv next to the scenario file, client i takes row i mod 2
        assert_eq!(s.get("x-tok"), [format!("t{}", i % 2)]);
        // a cookie the command line names replaces the file's
        assert_eq!(s.get("cookie"), ["sid=file; theme=dark"]);
        assert_eq!(s.get("sec-websocket-protocol"), ["v2"]);
    }
    for s in &b {
        assert_eq!(s.get("authorization"), ["Bearer file"]);
        assert_eq!(s.get("cookie"), ["sid=file; theme=light"]);
        // --subprotocol replaces the file's list
        assert_eq!(s.get("sec-websocket-protocol"), ["v1, v2"]);
    }
    // the chosen subprotocol: the same in the live text, the JSON, the saved text and HTML
    let line = "subprotocol: offered v2; the server chose v2 for 4 clients";
    assert!(run.out.contains(line), "{}", run.out);
    let v = read_json(&json);
    assert_valid_report(&v);
    assert_eq!(v["results"]["connections"]["subprotocols"], serde_json::json!({"v2": 4}));
    assert_eq!(v["config"]["connect"]["subprotocols"], serde_json::json!(["v2"]));
    assert_eq!(v["config"]["connect"]["token_rows"], 2);
    let text = wirebench(&["report", p(&json)]);
    assert!(text.out.contains(line), "{}", text.out);
    let html = dir.path().join("a.html");
    assert_eq!(wirebench(&["report", p(&json), "--html", p(&html)]).code, 0);
    assert!(std::fs::read_to_string(&html).unwrap().contains(line));
}

#[test]
fn scenario_ca_is_read_next_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path(), "toml", &["127.0.0.1"]);
    let room = tls_room(&c);
    let scenario = dir.path().join("wss.toml");
    let ca_name = c.ca.file_name().unwrap().to_str().unwrap();
    std::fs::write(
        &scenario,
        format!("url = \"wss://{}/rooms/t\"\nclients = 4\nduration = \"1s\"\nca = \"{ca_name}\"\n", room.local_addr()),
    )
    .unwrap();
    let json = dir.path().join("wss.json");
    let run = wirebench(&["load", "--scenario", p(&scenario), "-q", "--json", p(&json)]);
    room.stop();
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let v = read_json(&json);
    assert_eq!(v["results"]["connections"]["connected"], 4);
    assert_eq!(v["config"]["connect"]["ca"], p(&c.ca));
}

#[test]
fn bad_scenario_connection_keys_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    let missing = dir.path().join("missing.csv");
    let cases: [(&str, &str, String); 9] = [
        ("ws", r#"headers = ["NoColon"]"#, "headers 'NoColon' is not 'Name: value'".into()),
        ("ws", r#"headers = ["Bad Name: x"]"#, "headers 'Bad Name: x': 'Bad Name' is not a valid header name".into()),
        (
            "ws",
            r#"headers = ["Sec-WebSocket-Protocol: x"]"#,
            "sec-websocket-protocol is set by the WebSocket handshake: use --subprotocol".into(),
        ),
        ("ws", r#"cookies = ["novalue"]"#, "cookies 'novalue' is not NAME=VALUE".into()),
        ("ws", r#"subprotocols = ["a b"]"#, "subprotocols 'a b' is not a valid protocol name (an HTTP token)".into()),
        ("ws", r#"tokens = "missing.csv""#, format!("cannot read scenario {}: tokens {}", p(&file), p(&missing))),
        ("ws", "insecure = true", "ca and insecure are for wss:// URLs".into()),
        ("ws", r#"headers = "X: y""#, "invalid type".into()),
        ("wss", r#"ca = "missing.pem""#, format!("cannot read CA file {}", p(&dir.path().join("missing.pem")))),
    ];
    for (scheme, key, want) in cases {
        std::fs::write(&file, format!("url = \"{scheme}://127.0.0.1:1/r\"\nduration = \"1s\"\n{key}\n")).unwrap();
        let r = wirebench(&["load", "--scenario", p(&file)]);
        assert_eq!(r.code, 2, "{key}: {}", r.err);
        assert_eq!(r.err.trim().lines().count(), 1, "{key}: {}", r.err);
        assert!(r.err.contains(&want), "{key}: {}\nwant: {want}", r.err);
        if !want.starts_with("cannot read") && scheme == "ws" {
            assert!(r.err.starts_with(&format!("error: scenario {}", p(&file))), "{key}: {}", r.err);
        }
    }
}
