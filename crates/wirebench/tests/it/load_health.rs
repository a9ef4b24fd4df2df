//! The load generator's own health (issue 13 item 4): a rate it keeps is "kept"; a rate no
//! generator here reaches is "missed", by the generator or its send path, never "kept";
//! the figures add up (slip rows to the sends, CPU rows to the CPU) and the terminal, the
//! JSON, `report` and the HTML say the same (merging shards: core `report::merge::generator_health`).

use wirebench::room::{self, RoomServer};
use wirebench_core::generator::GeneratorVerdict;
use wirebench_core::report::{GeneratorHealth, LoadResults, Report, Results};
use wirebench_report::generator::{LOAD, line_of};

use crate::support::{Run, assert_valid_report, read_json, wirebench};

fn load(url: &str, rate: &str, dur: &str, json: &std::path::Path) -> (Run, LoadResults, serde_json::Value) {
    let run = wirebench(&[
        "load",
        url,
        "-c",
        "2",
        "--room-size",
        "2",
        "--mix",
        "cursor=1",
        "--arrivals",
        "fixed",
        "--rate",
        rate,
        "-d",
        dur,
        "--no-hiccup",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let v = read_json(json);
    assert_valid_report(&v);
    let rep: Report = serde_json::from_value(v.clone()).unwrap();
    let Results::Load(l) = rep.results else { panic!("a load report") };
    (run, l, v)
}

fn adds_up(l: &LoadResults, g: &GeneratorHealth) {
    assert_eq!(g.slip_seconds.iter().map(|s| s.sends).sum::<u64>(), l.sent, "{:?}", g.slip_seconds);
    assert_eq!(g.cpu_seconds.iter().map(|c| c.cpu_ns).sum::<u64>(), g.cpu_ns, "{:?}", g.cpu_seconds);
    assert_eq!(g.slip_seconds.iter().map(|s| s.max_ns).max().unwrap_or(0), l.slip_max_ns);
    assert_eq!(g.threads, 1, "one worker thread");
    assert!((g.achieved_per_s - l.achieved_send_per_s).abs() < 1e-9);
    // asked: what the clients' schedules made due (sent, and due but never made)
    let asked = g.asked_per_s.expect("a rate was asked");
    assert!(asked >= g.achieved_per_s && asked <= l.requested_send_per_s * 1.05, "{asked} {g:?}");
}

#[test]
fn the_load_generator_says_whether_it_kept_the_rate() {
    let server = RoomServer::start(&room::Config::loopback()).expect("room starts on loopback");
    let url = format!("ws://{}/rooms/t", server.local_addr());
    let dir = tempfile::tempdir().unwrap();

    // 2 clients at 20/s for 2 s: about 80 sends (a random phase each), every one on time
    let kept = dir.path().join("kept.json");
    let (run, l, json) = load(&url, "20/s", "2s", &kept);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let g = l.generator.clone().expect("the generator's health");
    assert_eq!(g.verdict, GeneratorVerdict::Kept, "{g:?}");
    assert_eq!(g.asked_per_s, Some(g.achieved_per_s), "every send due was made");
    assert!((78..=80).contains(&l.sent), "{}", l.sent);
    adds_up(&l, &g);
    assert!(g.cpu_ns > 0 && g.cpu_share > 0.0 && g.cpu_share < 1.0, "{g:?}");
    assert!((2..=4).contains(&g.slip_seconds.len()), "{:?}", g.slip_seconds);
    assert_eq!(json["results"]["generator"]["verdict"], "kept");
    let line = line_of(&g, &LOAD);
    assert!(
        line.starts_with("generator: 1 load runtime thread(s) on a CPU ")
            && line.ends_with("it kept the rate asked for")
    );
    assert!(run.out.lines().any(|x| x == line), "{line}\n{}", run.out);
    // the same line from the saved report, in text and in the HTML
    let text = wirebench(&["report", kept.to_str().unwrap()]);
    assert!(text.out.lines().any(|x| x == line), "{}", text.out);
    let html = dir.path().join("kept.html");
    let page = wirebench(&["report", kept.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(page.code, 0, "{}", page.err);
    assert!(std::fs::read_to_string(&html).unwrap().contains(&format!("<p class=\"generator\">{line}</p>")));

    // 1M sends/s asked of two clients for 1 s: far past what this process can make
    let missed = dir.path().join("missed.json");
    let (run, l, _) = load(&url, "500k/s", "1s", &missed);
    let g = l.generator.clone().expect("the generator's health");
    assert!(matches!(g.verdict, GeneratorVerdict::GeneratorLimited | GeneratorVerdict::SendPathLimited), "{g:?}");
    assert!(g.achieved_per_s < 0.97e6, "{g:?}");
    adds_up(&l, &g);
    let line = line_of(&g, &LOAD);
    assert!(line.contains("missed the rate"), "{line}");
    assert!(run.out.lines().any(|x| x == line), "{line}\n{}", run.out);
    let _ = server.stop();
}
