//! The one percentile definition every view uses: HdrHistogram Java's
//! `AbstractHistogram.getValueAtPercentile` (2.2.2), rank for rank.
//!
//! The value at percentile `p` of `N` samples is the value of the sample of rank
//! `ceil(p * N / 100)` (at least 1), as the highest value equivalent to it (the lowest for
//! `p = 0`). In floating point `p * N / 100` can land a hair above an integer: 99.9/100 is
//! 0.9990000000000001, so the Rust crate's `value_at_percentile(99.9)` (its
//! `value_at_quantile` of that quotient) of 1,000 samples takes rank 1,000 (the maximum)
//! instead of 999. Java guards against that by stepping `p` one ulp
//! down before multiplying (`Math.nextAfter(p, -inf)`); [`rank`] does the same, in the same
//! order of operations, so the two libraries agree to the rank. `bench/hdr-java.sh` checks it
//! against the Java library on recorded runs.
//!
//! The percentile distribution (`--table`, `--hgrm`, the HTML charts) visits the percentile
//! levels of Java's `PercentileIterator` and takes each row at the same rank.

use hdrhistogram::Histogram;

/// Java's `countAtPercentile`: the 1-based rank of the sample at percentile `p` among
/// `total` samples (`p` is clamped to 0..=100; NaN gives rank 1).
#[must_use]
pub fn rank(total: u64, p: f64) -> u64 {
    // Java: min(max(nextAfter(p, -inf), 0), 100); NaN stays NaN there and ends at rank 1,
    // which `as u64` (NaN -> 0) and the max(1) below give too.
    let requested = if p.is_nan() { p } else { p.next_down().clamp(0.0, 100.0) };
    #[expect(clippy::cast_precision_loss, reason = "Java multiplies the same double")]
    let fractional = requested * total as f64 / 100.0;
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "Java's (long) cast of ceil")]
    let r = fractional.ceil() as u64;
    r.max(1)
}

/// The index of the sample of rank `r` (1-based): its highest equivalent value and the count
/// of samples at or below it. `None` when the histogram is empty.
fn at_rank(h: &Histogram<u64>, r: u64) -> Option<(u64, u64)> {
    let mut total = 0u64;
    let mut last = None;
    for v in h.iter_recorded() {
        total = total.saturating_add(v.count_at_value());
        last = Some((v.value_iterated_to(), total));
        if total >= r {
            break;
        }
    }
    last
}

/// The value at percentile `p` (0..=100) of `h`, exactly as HdrHistogram Java's
/// `getValueAtPercentile(p)` returns it; 0 for an empty histogram.
#[must_use]
pub fn value_at_percentile(h: &Histogram<u64>, p: f64) -> u64 {
    match at_rank(h, rank(h.len(), p)) {
        // Java: lowestEquivalentValue only for exactly 0 (`percentile == 0.0`).
        Some((v, _)) if p == 0.0 => h.lowest_equivalent(v),
        Some((v, _)) => v,
        None => 0,
    }
}

/// The values at many percentiles at once, each exactly [`value_at_percentile`]`(h, p)`, in
/// the order of `ps`: the ranks are sorted and the recorded values walked once, so the cost
/// is `O(P log P + B)` for `P` percentiles and `B` recorded buckets, not `O(P x B)`. (A saved
/// report may list a million percentiles; `report` recomputes each from the histogram.)
#[must_use]
pub fn values_at_percentiles(h: &Histogram<u64>, ps: &[f64]) -> Vec<u64> {
    let n = h.len();
    let mut order: Vec<(u64, usize)> = ps.iter().enumerate().map(|(i, &p)| (rank(n, p), i)).collect();
    order.sort_unstable();
    let mut out = vec![0; ps.len()];
    let mut recorded = h.iter_recorded().fuse();
    let (mut total, mut last) = (0u64, None);
    for (r, i) in order {
        // As `at_rank`: the first value whose running total reaches the rank (the last
        // recorded one if none does). Ranks only grow, so the walk never goes back.
        while last.is_none() || total < r {
            let Some(v) = recorded.next() else { break };
            total = total.saturating_add(v.count_at_value());
            last = Some(v.value_iterated_to());
        }
        out[i] = match last {
            Some(v) if ps[i] == 0.0 => h.lowest_equivalent(v),
            Some(v) => v,
            None => 0,
        };
    }
    out
}

/// One row of a percentile distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The percentile level of the row, 0..=100.
    pub level: f64,
    /// The value at that level (its highest equivalent, as Java's table shows even at 0).
    pub value: u64,
    /// Samples at or below `value`.
    pub total: u64,
}

/// The rows HdrHistogram Java's `outputPercentileDistribution` prints: the levels of its
/// `PercentileIterator` (`ticks` per half distance to 100 %, then a last row at 100 %), each
/// at [`rank`] of its level. Empty for an empty histogram.
#[must_use]
pub fn distribution(h: &Histogram<u64>, ticks: u32) -> Vec<Step> {
    let n = h.len();
    let mut rows = Vec::new();
    if n == 0 {
        return rows;
    }
    let mut recorded = h.iter_recorded();
    let (mut value, mut total) = (0u64, 0u64);
    let mut level = 0.0f64;
    // Java emits rows while the running count has not reached the total; the row that
    // reaches it is the last before the 100 % row.
    while total < n {
        let want = rank(n, level);
        while total < want {
            let Some(v) = recorded.next() else { break };
            value = v.value_iterated_to();
            total = total.saturating_add(v.count_at_value());
        }
        rows.push(Step { level, value, total });
        level += 100.0 / reporting_ticks(ticks, level);
    }
    rows.push(Step { level: 100.0, value, total });
    rows
}

/// Java's `percentileReportingTicks`: `ticks * 2^(floor(log2(100 / (100 - level))) + 1)`,
/// with the logarithm taken as Java takes it (`Math.log(x) / Math.log(2)`).
fn reporting_ticks(ticks: u32, level: f64) -> f64 {
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "Java's (long) cast")]
    let halvings = ((100.0 / (100.0 - level)).ln() / 2f64.ln()) as u32;
    f64::from(ticks) * 2f64.powi(i32::try_from(halvings).unwrap_or(i32::MAX).saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{histogram, record};
    use proptest::prelude::*;

    /// `ceil(num / den * total / 100)` in integers: the rank with no floating point at all.
    fn exact_rank(total: u64, num: u64, den: u64) -> u64 {
        let n = u128::from(num) * u128::from(total);
        let d = u128::from(den) * 100;
        u64::try_from(n.div_ceil(d)).unwrap().max(1)
    }

    /// Percentiles as written (num / den) with up to four decimals.
    const PS: [(u64, u64); 14] = [
        (1, 10),
        (1, 1),
        (125, 10),
        (333, 10),
        (50, 1),
        (90, 1),
        (96, 1),
        (99, 1),
        (995, 10),
        (999, 10),
        (9995, 100),
        (9999, 100),
        (99999, 1000),
        (999_999, 10_000),
    ];

    #[expect(clippy::cast_precision_loss, reason = "small exact numbers")]
    fn as_f64((num, den): (u64, u64)) -> f64 {
        num as f64 / den as f64
    }

    #[test]
    fn ranks_by_hand() {
        // 99.9 % of 1,000 samples is the 999th: the one the Rust crate misses.
        assert_eq!(rank(1_000, 99.9), 999);
        assert_eq!(rank(10_000, 99.99), 9_999);
        assert_eq!(rank(20_000, 99.9), 19_980);
        assert_eq!(rank(3, 50.0), 2);
        assert_eq!(rank(1, 0.0), 1);
        assert_eq!(rank(7, 100.0), 7);
        assert_eq!(rank(7, 250.0), 7, "clamped to 100");
        assert_eq!(rank(7, -3.0), 1, "clamped to 0");
        assert_eq!(rank(7, f64::NAN), 1);
        assert_eq!(rank(0, 50.0), 1);
    }

    proptest! {
        /// For run sizes up to 10^9 and percentiles with up to four decimals, the guarded
        /// floating-point rank is the exact one (the Rust crate's is one high for 99.9).
        #[test]
        fn rank_is_the_exact_rank(total in 1u64..1_000_000_000, i in 0usize..PS.len()) {
            let (num, den) = PS[i];
            prop_assert_eq!(rank(total, as_f64(PS[i])), exact_rank(total, num, den));
        }
    }

    #[test]
    fn value_at_999_is_rank_999_of_1000_not_the_maximum() {
        // 1..=1000 ns are recorded exactly (unit resolution below 2048).
        let mut h = histogram();
        for v in 1..=1_000 {
            record(&mut h, v);
        }
        assert_eq!(value_at_percentile(&h, 99.9), 999);
        assert_eq!(h.value_at_percentile(99.9), 1_000, "the crate's own answer, one rank high");
        assert_eq!(value_at_percentile(&h, 50.0), 500);
        assert_eq!(value_at_percentile(&h, 100.0), 1_000);
        assert_eq!(value_at_percentile(&h, 0.0), 1);
        assert_eq!(value_at_percentile(&histogram(), 99.0), 0);
    }

    #[test]
    fn zero_takes_the_lowest_equivalent_and_others_the_highest() {
        let mut h = histogram();
        record(&mut h, 1_000_000); // bucket [999_936, 1_000_447] at 3 significant digits
        assert_eq!(value_at_percentile(&h, 0.0), h.lowest_equivalent(1_000_000));
        assert_eq!(value_at_percentile(&h, 1e-9), h.highest_equivalent(1_000_000));
        assert_eq!(value_at_percentile(&h, 100.0), h.highest_equivalent(1_000_000));
    }

    proptest! {
        /// Against sorted samples: the value is the sample of the exact rank, to the
        /// histogram's resolution.
        #[test]
        fn value_is_the_sample_of_that_rank(mut xs in proptest::collection::vec(1u64..5_000_000, 1..400),
                                            i in 0usize..PS.len()) {
            let mut h = histogram();
            for &x in &xs {
                record(&mut h, x);
            }
            xs.sort_unstable();
            let (num, den) = PS[i];
            let r = exact_rank(xs.len() as u64, num, den);
            let want = h.highest_equivalent(xs[usize::try_from(r).unwrap() - 1]);
            prop_assert_eq!(value_at_percentile(&h, as_f64(PS[i])), want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The one-pass batch is the single lookup, percentile by percentile, in any order,
        /// edge values included (0, 100, outside 0..=100, NaN).
        #[test]
        fn the_batch_is_each_single_lookup(xs in proptest::collection::vec(1u64..5_000_000, 0..300),
                                           ps in proptest::collection::vec(
                                               prop_oneof![0.0..=100.0f64, Just(0.0), Just(100.0), Just(-1.0),
                                                           Just(250.0), Just(f64::NAN), Just(99.9)], 0..40)) {
            let mut h = histogram();
            for &x in &xs {
                record(&mut h, x);
            }
            let single: Vec<u64> = ps.iter().map(|&p| value_at_percentile(&h, p)).collect();
            prop_assert_eq!(values_at_percentiles(&h, &ps), single);
        }
    }

    #[test]
    fn distribution_levels_and_rows_by_hand() {
        // 20,000 samples: 15,000 of 10 ns, 5,000 of 20 ns. The 75 % row is rank 15,000, so
        // it still shows 10 ns (the Rust crate's own iterator steps to 0.7500000000000001
        // and shows 20 ns there).
        let mut h = histogram();
        h.record_n(10, 15_000).unwrap();
        h.record_n(20, 5_000).unwrap();
        let rows = distribution(&h, 5);
        let levels: Vec<f64> = rows.iter().map(|r| r.level).collect();
        assert_eq!(
            levels,
            [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 55.0, 60.0, 65.0, 70.0, 75.0, 77.5, 100.0],
            "Java's PercentileIterator levels, then 100"
        );
        let at75 = rows[10];
        assert_eq!((at75.value, at75.total), (10, 15_000));
        assert_eq!((rows[11].value, rows[11].total), (20, 20_000), "the row that reaches the total");
        assert_eq!((rows[12].value, rows[12].total), (20, 20_000));
        assert!(rows[..11].iter().all(|r| r.value == 10));
        assert!(distribution(&histogram(), 5).is_empty());
    }

    #[test]
    fn distribution_rows_agree_with_value_at_percentile() {
        let mut h = histogram();
        for v in 1..=100_000u64 {
            record(&mut h, v * 37 % 1_000_003 + 1);
        }
        for s in distribution(&h, 5).iter().skip(1) {
            assert_eq!(s.value, value_at_percentile(&h, s.level), "level {}", s.level);
        }
    }
}
