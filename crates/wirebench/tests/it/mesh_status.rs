//! `wirebench mesh status` against agents with nothing judged yet (no window closed: "not
//! judged", exit 1, in every view), and against many and misbehaving agents (fake ones, HTTP
//! servers in the test): a fixed number of fetches in flight, the per-agent cap, the total
//! budget, every agent named.

use std::sync::Arc;

use wirebench::Shutdown;
use wirebench::mesh::agent::Agent;
use wirebench::mesh::{AgentArgs, AgentConfig};
use wirebench_core::report::{Report, Results};

use crate::support::{assert_valid_report, read_json, wirebench};

/// An agent probing a peer that never answers, whose first window (1 h) will not close
/// while the test runs: its `/v1/matrix` has no window and no cell.
fn fresh_agent() -> Agent {
    let args = ["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--advertise", "127.0.0.1:1"];
    let args = [&args[..], &["--peers", "127.0.0.1:1", "--window", "1h", "--timeout", "1s"]].concat();
    let a = wirebench::cli::parse_mode::<AgentArgs>("agent", &args).expect("flags parse");
    let cfg = AgentConfig::from_args(&a).expect("valid config");
    let quiet: wirebench::discovery::Log = Arc::new(|_| {});
    Agent::start(&cfg, Shutdown::new(), &quiet).expect("agent starts")
}

/// Agents that answer but closed no window (before: "verdict: no problems", exit 0): every
/// view says nothing is judged yet, and the exit code is 1.
#[test]
fn agents_with_no_closed_window_are_not_judged_in_every_view_and_exit_1() {
    let agent = fresh_agent();
    let url = format!("http://{}", agent.http_addr());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let r = wirebench(&["mesh", "status", &url, "--timeout", "5s", "--json", json.to_str().unwrap()]);
    agent.stop();
    let want =
        "verdict: no cell judged yet: no closed window holds 5 probes of any cell (just started? wait one window)";
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.out.contains("mesh: 1 nodes, 1 reporting (from agents)"), "{}", r.out);
    assert!(r.out.contains(want), "{}", r.out);
    assert!(!r.out.contains("no problems"), "{}", r.out);
    let v = read_json(&json);
    assert_valid_report(&v);
    let report: Report = serde_json::from_value(v).unwrap();
    let Results::Mesh(m) = &report.results else { panic!("a mesh report") };
    let kinds: Vec<(&str, &str)> = m.problems.iter().map(|p| (p.scope.as_str(), p.kind.as_str())).collect();
    assert_eq!(kinds, [("agents", "not_judged")]);
    assert!(m.has_rows() && !m.judged());
    let text = wirebench(&["report", json.to_str().unwrap()]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.out.contains(want) && !text.out.contains("no problems"), "{}", text.out);
    let html = dir.path().join("m.html");
    let page = wirebench(&["report", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(page.code, 0, "{page:?}");
    let page = std::fs::read_to_string(html).unwrap();
    assert!(page.contains("no cell judged yet") && page.contains("not_judged"), "{page}");
    assert!(!page.contains("no problems"), "{page}");
}
