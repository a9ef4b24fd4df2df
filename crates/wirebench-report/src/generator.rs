//! The load generator's own health in words: its threads' CPU, its worst second of schedule
//! slip and the verdict on a missed rate (`GeneratorHealth` in the report).

use wirebench_core::generator::GeneratorVerdict;
use wirebench_core::generator::schedule::lost_clients;
use wirebench_core::report::{GeneratorHealth, LoadSchedule};

use crate::words::rate_words;

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn dur(ns: u64) -> String {
    if ns >= 1_000_000 { format!("{:.1} ms", ns as f64 / 1e6) } else { format!("{:.1} us", ns as f64 / 1e3) }
}

/// What a generator's threads are and how their CPU was read, in words.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// What the threads are, e.g. `sending thread(s)`.
    pub threads: &'static str,
    /// The time their CPU is a share of, e.g. `the sending time`.
    pub over: &'static str,
    /// How the CPU was read, e.g. `thread CPU clock`.
    pub how: &'static str,
    /// What to do when the generator is the limit.
    pub remedy: &'static str,
}

/// `stream`'s sending threads.
pub const STREAM: Source = Source {
    threads: "sending thread(s)",
    over: "the sending time",
    how: "thread CPU clock",
    remedy: "add publishers with -P, larger messages, or a faster sender",
};

/// `load`'s runtime: the worker threads that run every client.
pub const LOAD: Source = Source {
    threads: "load runtime thread(s)",
    over: "the run",
    how: "schedstat",
    remedy: "split the clients over more processes or machines with --shard K/N, or use fewer clients per process",
};

/// `1 client(s) dropped before the end of sending and 1 never connected took 75 sends of
/// their schedules with them` (load's schedule account).
fn lost_words(s: &LoadSchedule) -> String {
    format!(
        "{} client(s) dropped before the end of sending and {} never connected took {} sends of their schedules \
         with them",
        s.dropped_clients, s.failed_clients, s.lost
    )
}

/// Whether the generator fell short of what it was asked, or lost clients that took sends
/// with them: a problem worth its line in a default view.
pub fn missed(g: &GeneratorHealth) -> bool {
    let short = !matches!(g.verdict, GeneratorVerdict::Kept | GeneratorVerdict::FlatOut) && g.asked_per_s.is_some();
    short || g.schedule.as_ref().is_some_and(lost_clients)
}

/// `stream`'s line: [`line_of`] with [`STREAM`].
pub fn line(g: &GeneratorHealth) -> String {
    line_of(g, &STREAM)
}

/// `generator: 1 sending thread(s) on a CPU 34% of the sending time (thread CPU clock); schedule
/// slip: worst second 2 s in, max 1.2 ms, mean 40.0 us; ...the verdict`, with the busiest
/// second's CPU when there is a CPU series, and the shards behind in a merged report.
pub fn line_of(g: &GeneratorHealth, src: &Source) -> String {
    let slip = g.slip_seconds.iter().max_by_key(|s| s.max_ns).map_or_else(String::new, |w| {
        format!("; schedule slip: worst second {} s in, max {}, mean {}", w.at_s, dur(w.max_ns), dur(w.mean_ns))
    });
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let busiest = g.cpu_seconds.iter().max_by_key(|c| c.cpu_ns).map_or_else(String::new, |c| {
        format!(" (busiest second {} s in: {:.0}%)", c.at_s, c.cpu_ns as f64 / 1e7 / g.threads.max(1) as f64)
    });
    let verdict = match (g.verdict, g.asked_per_s) {
        (GeneratorVerdict::Kept, _) => "it kept the rate asked for".to_owned(),
        (GeneratorVerdict::FlatOut, _) => "flat out: nothing to keep up with".to_owned(),
        (GeneratorVerdict::GeneratorLimited, Some(a)) => format!(
            "the GENERATOR missed the rate ({} of {} asked) with its threads busy{}: this host's sender is the \
             limit, not the system under test ({})",
            rate_words(g.achieved_per_s),
            rate_words(a),
            if g.wait_ns.is_some() { " or waiting for a CPU" } else { "" },
            src.remedy
        ),
        (GeneratorVerdict::SendPathLimited, Some(a)) => format!(
            "missed the rate ({} of {} asked) while its threads were idle part of the time: they waited in the send \
             path (socket buffer, qdisc, the path pushing back) or were descheduled, not on their own CPU",
            rate_words(g.achieved_per_s),
            rate_words(a)
        ),
        (GeneratorVerdict::ClientsLost, Some(a)) => format!(
            "the rate asked was NOT kept ({} of {} asked): {}; while connected, the clients kept their schedules",
            rate_words(g.achieved_per_s),
            rate_words(a),
            g.schedule.as_ref().map_or_else(|| "clients were dropped or never connected".to_owned(), lost_words)
        ),
        (_, None) => "flat out".to_owned(),
    };
    // clients lost beside a generator or send path that missed too: named all the same
    let lost = match &g.schedule {
        Some(s) if lost_clients(s) && g.verdict != GeneratorVerdict::ClientsLost => {
            format!("; also, {}", lost_words(s))
        }
        _ => String::new(),
    };
    let behind = if g.behind.is_empty() { String::new() } else { format!(" (shards behind: {})", g.behind.join(", ")) };
    // the share of the time spent ready but waiting for a CPU, where the scheduler says
    #[expect(clippy::cast_precision_loss, reason = "a share")]
    let waiting = g.wait_ns.filter(|_| g.cpu_share > 0.0).map_or_else(String::new, |w| {
        format!(" and waiting for one {:.0}%", g.cpu_share * 100.0 * w as f64 / g.cpu_ns.max(1) as f64)
    });
    format!(
        "generator: {} {} on a CPU {:.0}%{waiting} of {} ({}){busiest}{slip}; {verdict}{lost}{behind}",
        g.threads,
        src.threads,
        g.cpu_share * 100.0,
        src.over,
        src.how
    )
}

#[cfg(test)]
mod tests {
    use wirebench_core::generator::{CpuSecond, SlipSecond};

    use super::*;

    fn health(verdict: GeneratorVerdict, asked: Option<f64>) -> GeneratorHealth {
        GeneratorHealth {
            threads: 2,
            asked_per_s: asked,
            achieved_per_s: 500.0,
            cpu_ns: 1_800_000_000,
            cpu_share: 0.9,
            verdict,
            slip_seconds: vec![
                SlipSecond { at_s: 0, sends: 10, mean_ns: 1_000, max_ns: 2_000 },
                SlipSecond { at_s: 1, sends: 10, mean_ns: 40_000, max_ns: 1_200_000 },
            ],
            cpu_seconds: Vec::new(),
            behind: Vec::new(),
            schedule: None,
            wait_ns: None,
        }
    }

    #[test]
    fn each_verdict_in_words() {
        let g = line(&health(GeneratorVerdict::GeneratorLimited, Some(1000.0)));
        assert!(g.starts_with("generator: 2 sending thread(s) on a CPU 90% of the sending time (thread CPU clock); schedule slip: worst second 1 s in, max 1.2 ms, mean 40.0 us; the GENERATOR missed the rate (500 msg/s of 1.0k msg/s asked)"), "{g}");
        assert!(line(&health(GeneratorVerdict::SendPathLimited, Some(1000.0))).contains("waited in the send path"));
        assert!(line(&health(GeneratorVerdict::Kept, Some(500.0))).ends_with("it kept the rate asked for"));
        let mut flat = health(GeneratorVerdict::FlatOut, None);
        flat.slip_seconds.clear();
        assert_eq!(
            line(&flat),
            "generator: 2 sending thread(s) on a CPU 90% of the sending time (thread CPU clock); flat out: nothing to keep up with"
        );
    }

    #[test]
    fn the_load_line_names_its_runtime_its_busiest_second_and_the_shards_behind() {
        let mut g = health(GeneratorVerdict::GeneratorLimited, Some(1000.0));
        g.cpu_seconds = vec![
            CpuSecond { at_s: 1, cpu_ns: 600_000_000, wait_ns: 0 },
            CpuSecond { at_s: 2, cpu_ns: 1_900_000_000, wait_ns: 0 },
        ];
        g.behind = vec!["b.json".into()];
        let l = line_of(&g, &LOAD);
        assert!(
            l.starts_with(
                "generator: 2 load runtime thread(s) on a CPU 90% of the run (schedstat) (busiest second 2 s in: 95%); \
                 schedule slip: worst second 1 s in"
            ),
            "{l}"
        );
        assert!(l.contains("--shard K/N") && l.ends_with(" (shards behind: b.json)"), "{l}");
        // on a CPU 10 % and waiting for one 80 % of the time: the host's CPU was the limit
        g.cpu_share = 0.1;
        g.cpu_ns = 200_000_000;
        g.wait_ns = Some(1_600_000_000);
        let l = line_of(&g, &LOAD);
        assert!(
            l.starts_with("generator: 2 load runtime thread(s) on a CPU 10% and waiting for one 80% of the run"),
            "{l}"
        );
        assert!(l.contains("with its threads busy or waiting for a CPU: this host's sender is the limit"), "{l}");
    }

    #[test]
    fn clients_lost_are_named_whatever_the_verdict() {
        let account = LoadSchedule { asked: 120, sent: 45, unsent: 0, lost: 75, dropped_clients: 1, failed_clients: 1 };
        let mut g = health(GeneratorVerdict::ClientsLost, Some(60.0));
        g.achieved_per_s = 22.0;
        g.schedule = Some(account);
        let l = line_of(&g, &LOAD);
        assert!(
            l.ends_with(
                "; the rate asked was NOT kept (22 msg/s of 60 msg/s asked): 1 client(s) dropped before the end of \
                 sending and 1 never connected took 75 sends of their schedules with them; while connected, the \
                 clients kept their schedules"
            ),
            "{l}"
        );
        // a generator that missed too: its own verdict, and the lost clients after it
        g.verdict = GeneratorVerdict::GeneratorLimited;
        let l = line_of(&g, &LOAD);
        assert!(l.contains("the GENERATOR missed the rate (22 msg/s of 60 msg/s asked)"), "{l}");
        assert!(
            l.ends_with("; also, 1 client(s) dropped before the end of sending and 1 never connected took 75 sends of their schedules with them"),
            "{l}"
        );
        // none lost: nothing added
        g.schedule = Some(LoadSchedule { lost: 0, dropped_clients: 0, failed_clients: 0, ..account });
        assert!(!line_of(&g, &LOAD).contains("dropped"));
    }
}
