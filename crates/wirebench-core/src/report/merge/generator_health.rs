//! The generators' health of merged load shards (`load --shard K/N`): counts, rates, CPU
//! and CPU wait (known only if every shard knows it) added, slip and CPU seconds merged by
//! second, and the verdict of the worst shard, with the names of the shards that missed
//! their rate (`generator::merge_verdicts`); the schedule accounts added (known only if
//! every shard has one), and never "kept" when the sum names lost clients.

use super::{MergeError, finite_sum, sat_sum};
use crate::generator::{self, CpuSecond, GeneratorVerdict, SlipSecond};
use crate::report::{GeneratorHealth, LoadResults, LoadSchedule};

/// The shards' generator health as one; `None` unless every shard reported one (a report
/// written before it existed leaves the merge without it rather than with a part); rates
/// that add up to a number that is not finite are refused.
pub(super) fn merge(parts: &[(&str, &LoadResults)]) -> Result<Option<GeneratorHealth>, MergeError> {
    let Some(hs) = parts
        .iter()
        .map(|(n, l)| l.generator.as_ref().map(|g| (*n, g)))
        .collect::<Option<Vec<(&str, &GeneratorHealth)>>>()
    else {
        return Ok(None);
    };
    if hs.is_empty() {
        return Ok(None);
    }
    // Numbers from files: added saturating (an overflow panicked here, or wrapped).
    let add = |f: fn(&GeneratorHealth) -> u64| sat_sum(hs.iter().map(|(_, g)| f(g)));
    let threads = add(|g| g.threads);
    let asked: Vec<f64> = hs.iter().filter_map(|(_, g)| g.asked_per_s).collect();
    let asked = if asked.is_empty() { None } else { Some(finite_sum("generator.asked_per_s", asked)?) };
    #[expect(clippy::cast_precision_loss, reason = "a share")]
    let share = if threads == 0 {
        0.0
    } else {
        finite_sum("generator.cpu_share", hs.iter().map(|(_, g)| g.cpu_share * g.threads as f64))? / threads as f64
    };
    let verdicts: Vec<_> = hs.iter().map(|(n, g)| (*n, g.verdict)).collect();
    let (mut verdict, behind) = generator::merge_verdicts(&verdicts);
    let schedule = schedules(&hs);
    // a shard that lost clients never says kept; files that disagree are held to it too
    if verdict == GeneratorVerdict::Kept && schedule.as_ref().is_some_and(generator::schedule::lost_clients) {
        verdict = GeneratorVerdict::ClientsLost;
    }
    let slips: Vec<Vec<SlipSecond>> = hs.iter().map(|(_, g)| g.slip_seconds.clone()).collect();
    let cpus: Vec<&[CpuSecond]> = hs.iter().map(|(_, g)| g.cpu_seconds.as_slice()).collect();
    Ok(Some(GeneratorHealth {
        threads,
        asked_per_s: asked,
        achieved_per_s: finite_sum("generator.achieved_per_s", hs.iter().map(|(_, g)| g.achieved_per_s))?,
        cpu_ns: add(|g| g.cpu_ns),
        cpu_share: share,
        wait_ns: hs.iter().try_fold(0u64, |a, (_, g)| Some(a.saturating_add(g.wait_ns?))),
        verdict,
        slip_seconds: generator::merge(&slips),
        cpu_seconds: generator::merge_cpu(&cpus),
        behind: behind.into_iter().map(str::to_owned).collect(),
        schedule,
    }))
}

/// The shards' schedule accounts added (saturating: numbers from files), or `None` unless
/// every shard has one.
fn schedules(hs: &[(&str, &GeneratorHealth)]) -> Option<LoadSchedule> {
    let all: Vec<LoadSchedule> = hs.iter().map(|(_, g)| g.schedule).collect::<Option<_>>()?;
    let add = |f: fn(&LoadSchedule) -> u64| sat_sum(all.iter().map(f));
    Some(LoadSchedule {
        asked: add(|s| s.asked),
        sent: add(|s| s.sent),
        unsent: add(|s| s.unsent),
        lost: add(|s| s.lost),
        dropped_clients: add(|s| s.dropped_clients),
        failed_clients: add(|s| s.failed_clients),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::GeneratorVerdict;

    fn health(threads: u64, share: f64, achieved: f64, verdict: GeneratorVerdict, at: u64) -> GeneratorHealth {
        GeneratorHealth {
            threads,
            asked_per_s: Some(1_000.0),
            achieved_per_s: achieved,
            cpu_ns: 1_000 * threads,
            cpu_share: share,
            wait_ns: Some(3 * threads),
            verdict,
            slip_seconds: vec![SlipSecond { at_s: at, sends: 10, mean_ns: 100, max_ns: 500 }],
            cpu_seconds: vec![CpuSecond { at_s: at, cpu_ns: 7, wait_ns: 1 }],
            behind: Vec::new(),
            schedule: Some(LoadSchedule { asked: 100, sent: 90, unsent: 10, ..LoadSchedule::default() }),
        }
    }

    fn base() -> LoadResults {
        crate::load::results::quiet_room()
    }

    #[test]
    fn shards_add_up_and_the_one_behind_is_named() {
        let base = base();
        let mut a = base.clone();
        a.generator = Some(health(2, 0.2, 1_000.0, GeneratorVerdict::Kept, 1));
        let mut b = base.clone();
        b.generator = Some(health(2, 0.95, 600.0, GeneratorVerdict::GeneratorLimited, 1));
        let g = merge(&[("a.json", &a), ("b.json", &b)]).unwrap().expect("both have one");
        assert_eq!((g.threads, g.asked_per_s, g.cpu_ns), (4, Some(2_000.0), 4_000));
        assert!((g.achieved_per_s - 1_600.0).abs() < 1e-9);
        assert!((g.cpu_share - 0.575).abs() < 1e-12, "{}", g.cpu_share);
        assert_eq!((g.verdict, g.behind), (GeneratorVerdict::GeneratorLimited, vec!["b.json".to_owned()]));
        assert_eq!(g.slip_seconds, [SlipSecond { at_s: 1, sends: 20, mean_ns: 100, max_ns: 500 }]);
        assert_eq!(g.cpu_seconds, [CpuSecond { at_s: 1, cpu_ns: 14, wait_ns: 2 }]);
        assert_eq!(g.wait_ns, Some(12));
        // counts from files that do not fit: saturated, not a panic
        let (mut big, mut wait) = (a.clone(), b.clone());
        for l in [&mut big, &mut wait] {
            let g = l.generator.as_mut().unwrap();
            (g.threads, g.cpu_ns, g.wait_ns) = (u64::MAX, u64::MAX, Some(u64::MAX));
        }
        let g = merge(&[("a.json", &big), ("b.json", &wait)]).unwrap().expect("both have one");
        assert_eq!((g.threads, g.cpu_ns, g.wait_ns), (u64::MAX, u64::MAX, Some(u64::MAX)));
        wait.generator.as_mut().unwrap().wait_ns = None;
        assert_eq!(
            merge(&[("a.json", &big), ("b.json", &wait)]).unwrap().unwrap().wait_ns,
            None,
            "known only if every shard knows it"
        );
        // one report without it (written before it existed): none, rather than a part
        assert!(merge(&[("a.json", &a), ("old.json", &base)]).unwrap().is_none());
    }

    #[test]
    fn schedule_accounts_add_up_and_a_shard_that_lost_clients_is_named() {
        let base = base();
        let (mut a, mut b) = (base.clone(), base);
        a.generator = Some(health(1, 0.2, 1_000.0, GeneratorVerdict::Kept, 1));
        let mut lost = health(1, 0.2, 600.0, GeneratorVerdict::ClientsLost, 1);
        lost.schedule =
            Some(LoadSchedule { asked: 120, sent: 45, unsent: 0, lost: 75, dropped_clients: 1, failed_clients: 1 });
        b.generator = Some(lost);
        let g = merge(&[("a.json", &a), ("b.json", &b)]).unwrap().expect("both have one");
        assert_eq!(
            g.schedule,
            Some(LoadSchedule { asked: 220, sent: 135, unsent: 10, lost: 75, dropped_clients: 1, failed_clients: 1 })
        );
        assert_eq!((g.verdict, g.behind), (GeneratorVerdict::ClientsLost, vec!["b.json".to_owned()]));
        // a file that says kept beside lost clients is not believed
        b.generator.as_mut().unwrap().verdict = GeneratorVerdict::Kept;
        assert_eq!(merge(&[("a.json", &a), ("b.json", &b)]).unwrap().unwrap().verdict, GeneratorVerdict::ClientsLost);
        // one shard without an account (stream-like, or older): no account, the rest merges
        b.generator.as_mut().unwrap().schedule = None;
        let g = merge(&[("a.json", &a), ("b.json", &b)]).unwrap().expect("both have one");
        assert_eq!((g.schedule, g.verdict), (None, GeneratorVerdict::Kept));
        // counts from files that do not fit: saturated
        let mut big = a.clone();
        big.generator.as_mut().unwrap().schedule =
            Some(LoadSchedule { asked: u64::MAX, lost: u64::MAX, ..LoadSchedule::default() });
        let g = merge(&[("a.json", &a), ("big.json", &big)]).unwrap().unwrap();
        assert_eq!(g.schedule.map(|s| (s.asked, s.lost)), Some((u64::MAX, u64::MAX)));
    }
}
