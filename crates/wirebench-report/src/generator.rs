//! The load generator's own health in words: its threads' CPU, its worst second of schedule
//! slip and the verdict on a missed rate (`GeneratorHealth` in the report).

use wirebench_core::generator::GeneratorVerdict;
use wirebench_core::report::GeneratorHealth;

use crate::text::rate_words;

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn dur(ns: u64) -> String {
    if ns >= 1_000_000 { format!("{:.1} ms", ns as f64 / 1e6) } else { format!("{:.1} us", ns as f64 / 1e3) }
}

/// `generator: 1 sending thread(s) on a CPU 34% of the sending time (getrusage); schedule
/// slip: worst second 2 s in, max 1.2 ms, mean 40.0 us; ...the verdict`.
pub fn line(g: &GeneratorHealth) -> String {
    let slip = g.slip_seconds.iter().max_by_key(|s| s.max_ns).map_or_else(String::new, |w| {
        format!("; schedule slip: worst second {} s in, max {}, mean {}", w.at_s, dur(w.max_ns), dur(w.mean_ns))
    });
    let verdict = match (g.verdict, g.asked_per_s) {
        (GeneratorVerdict::Kept, _) => "it kept the rate asked for".to_owned(),
        (GeneratorVerdict::FlatOut, _) => "flat out: nothing to keep up with".to_owned(),
        (GeneratorVerdict::GeneratorLimited, Some(a)) => format!(
            "the GENERATOR missed the rate ({} of {} asked) with its threads busy: this host's sender is the limit, \
             not the system under test (add publishers with -P, larger messages, or a faster sender)",
            rate_words(g.achieved_per_s),
            rate_words(a)
        ),
        (GeneratorVerdict::SendPathLimited, Some(a)) => format!(
            "missed the rate ({} of {} asked) while its threads were idle part of the time: they waited in the send \
             path (socket buffer, qdisc, the path pushing back) or were descheduled, not on their own CPU",
            rate_words(g.achieved_per_s),
            rate_words(a)
        ),
        (_, None) => "flat out".to_owned(),
    };
    format!(
        "generator: {} sending thread(s) on a CPU {:.0}% of the sending time (getrusage){slip}; {verdict}",
        g.threads,
        g.cpu_share * 100.0
    )
}

#[cfg(test)]
mod tests {
    use wirebench_core::generator::SlipSecond;

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
        }
    }

    #[test]
    fn each_verdict_in_words() {
        let g = line(&health(GeneratorVerdict::GeneratorLimited, Some(1000.0)));
        assert!(g.starts_with("generator: 2 sending thread(s) on a CPU 90% of the sending time (getrusage); schedule slip: worst second 1 s in, max 1.2 ms, mean 40.0 us; the GENERATOR missed the rate (500 msg/s of 1.0k msg/s asked)"), "{g}");
        assert!(line(&health(GeneratorVerdict::SendPathLimited, Some(1000.0))).contains("waited in the send path"));
        assert!(line(&health(GeneratorVerdict::Kept, Some(500.0))).ends_with("it kept the rate asked for"));
        let mut flat = health(GeneratorVerdict::FlatOut, None);
        flat.slip_seconds.clear();
        assert_eq!(
            line(&flat),
            "generator: 2 sending thread(s) on a CPU 90% of the sending time (getrusage); flat out: nothing to keep up with"
        );
    }
}
