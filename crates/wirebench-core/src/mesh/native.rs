//! Prometheus native histograms (sparse exponential buckets) from an HdrHistogram of round
//! trips in ns, for `/metrics` in the protobuf format.
//!
//! A native histogram's buckets are fixed by its schema `s`: bucket `i` holds
//! `(b^(i-1), b^i]` with `b = 2^(2^-s)`, the same layout in every client and server, so the
//! histograms of many peers and agents add bucket by bucket and a quantile of the sum is a
//! quantile of all their samples (to the bucket). Each HdrHistogram bucket goes whole to the
//! native bucket holding its highest equivalent value, the value HdrHistogram reports for a
//! quantile: a quantile read from the native buckets (Prometheus's `histogram_quantile`) then
//! lies in the same native bucket as the HdrHistogram's quantile of the same samples, within
//! a factor `b` of it. Both pick the first bucket whose running count reaches `q x count`.
//! The layout and its rules: <https://prometheus.io/docs/specs/native_histograms/>.

use hdrhistogram::Histogram;

/// The schema exported: `b = 2^(1/8)`, buckets 9.05 % wide (about 8 per doubling: 1 us to
/// 10 s is 186 buckets, of which a window's round trips fill a few dozen).
pub const SCHEMA: i8 = 3;
/// The zero bucket's half width, seconds (`2^-128`, client_golang's default): round trips of
/// 0 ns fall there.
pub const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// A native histogram, values in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Native {
    /// The schema.
    pub schema: i8,
    /// Samples.
    pub count: u64,
    /// Sum of the samples, seconds (each HdrHistogram bucket at its middle value, as
    /// HdrHistogram's mean).
    pub sum: f64,
    /// Samples in the zero bucket.
    pub zero_count: u64,
    /// The positive buckets that hold samples: (index, count), by index.
    pub buckets: Vec<(i32, u64)>,
}

/// `v = frac * 2^exp` with `frac` in `[0.5, 1)`, for finite `v > 0` (C's `frexp`).
fn frexp(v: f64) -> (f64, i32) {
    let bits = v.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        // Subnormal: scale into the normal range first.
        let (f, x) = frexp(v * 2f64.powi(64));
        return (f, x - 64);
    }
    (f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52)), e - 1022)
}

/// `2^(i / 2^schema) / 2` for `i` in `0..2^schema`: the fractions at which a bucket of a
/// positive schema ends within one doubling.
fn fraction(schema: i8, i: i32) -> f64 {
    (f64::from(i) / f64::from(1_i32 << schema)).exp2() / 2.0
}

/// The index of the bucket holding `v` (finite, above the zero bucket) at `schema` (-4 to 8).
pub fn bucket_index(schema: i8, v: f64) -> i32 {
    let (frac, exp) = frexp(v);
    if schema > 0 {
        let n = 1_i32 << schema;
        // The first fraction at or above `frac` (buckets include their upper bound); past
        // the last one, the bucket ends at the next power of two.
        let i = (0..n).find(|&i| fraction(schema, i) >= frac).unwrap_or(n);
        i + (exp - 1) * n
    } else {
        // Bounds at powers of 2^(2^-schema): whole powers of two, every 2^-schema of them.
        let m = 1_i32 << -schema;
        // A power of two ends its bucket (frexp gives exactly 0.5 for one).
        let log2_ceil = if frac.to_bits() == 0.5_f64.to_bits() { exp - 1 } else { exp };
        -(-log2_ceil).div_euclid(m)
    }
}

/// The upper bound of bucket `index` at `schema`.
pub fn bucket_upper(schema: i8, index: i32) -> f64 {
    if schema > 0 {
        let n = 1_i32 << schema;
        fraction(schema, index.rem_euclid(n)) * 2f64.powi(index.div_euclid(n) + 1)
    } else {
        2f64.powi(index << -schema)
    }
}

/// The bounds `(lower, upper]` of bucket `index` at `schema`.
pub fn bucket_bounds(schema: i8, index: i32) -> (f64, f64) {
    (bucket_upper(schema, index - 1), bucket_upper(schema, index))
}

#[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The native histogram at `schema` of `h`'s samples (ns), in seconds.
pub fn native_seconds(h: &Histogram<u64>, schema: i8) -> Native {
    let mut buckets: Vec<(i32, u64)> = Vec::new();
    let (mut zero_count, mut sum_ns) = (0, 0.0);
    for rec in h.iter_recorded() {
        let count = rec.count_at_value();
        #[expect(clippy::cast_precision_loss, reason = "a sum of floats")]
        {
            sum_ns += h.median_equivalent(rec.value_iterated_to()) as f64 * count as f64;
        }
        let value = seconds(rec.value_iterated_to());
        if value <= ZERO_THRESHOLD {
            zero_count += count;
            continue;
        }
        let index = bucket_index(schema, value);
        match buckets.last_mut() {
            Some((last, c)) if *last == index => *c += count,
            _ => buckets.push((index, count)),
        }
    }
    Native { schema, count: h.len(), sum: sum_ns / 1e9, zero_count, buckets }
}

/// Counts per classic bucket (`le` each of `bounds`, seconds, ascending, then `+Inf`; not
/// cumulative), each HdrHistogram bucket at its highest equivalent value as above.
pub fn classic_seconds(h: &Histogram<u64>, bounds: &[f64]) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = bounds.iter().map(|&b| (b, 0)).chain([(f64::INFINITY, 0)]).collect();
    for v in h.iter_recorded() {
        let s = seconds(v.value_iterated_to());
        let at = out.partition_point(|&(le, _)| le < s);
        out[at].1 += v.count_at_value();
    }
    out
}

impl Native {
    /// The positive buckets as the exposition carries them: spans `(offset, length)` of
    /// consecutive buckets (the first offset is the first index, each next one the gap after
    /// the previous span), and each bucket's count as the difference from the one before.
    pub fn spans_and_deltas(&self) -> (Vec<(i32, u32)>, Vec<i64>) {
        let (mut spans, mut deltas): (Vec<(i32, u32)>, Vec<i64>) = (Vec::new(), Vec::new());
        let (mut prev_index, mut prev_count) = (None::<i32>, 0_i64);
        for &(i, c) in &self.buckets {
            match (prev_index, spans.last_mut()) {
                (Some(p), Some(span)) if i == p + 1 => span.1 += 1,
                (Some(p), _) => spans.push((i - p - 1, 1)),
                (None, _) => spans.push((i, 1)),
            }
            let c = i64::try_from(c).unwrap_or(i64::MAX);
            deltas.push(c - prev_count);
            (prev_index, prev_count) = (Some(i), c);
        }
        (spans, deltas)
    }
}

#[cfg(test)]
#[expect(clippy::float_cmp, clippy::cast_precision_loss, reason = "exact bounds; counts far below 2^52")]
mod tests {
    use super::*;

    fn hist(values_ns: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for &v in values_ns {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn frexp_splits_like_c() {
        assert_eq!(frexp(1.0), (0.5, 1));
        assert_eq!(frexp(0.75), (0.75, 0));
        assert_eq!(frexp(8.0), (0.5, 4));
        assert_eq!(frexp(f64::MIN_POSITIVE / 4.0), (0.5, -1023));
    }

    #[test]
    fn powers_of_two_end_buckets_at_every_schema() {
        // 2^k is the upper bound (inclusive) of bucket k * 2^schema; the next float above it
        // is in the next bucket.
        for schema in -4..=8_i8 {
            for k in [-30, -10, -1, 0, 1, 3, 16] {
                let v = 2f64.powi(k);
                let want = if schema >= 0 { k << schema } else { -(-k).div_euclid(1 << -schema) };
                assert_eq!(bucket_index(schema, v), want, "schema {schema}, 2^{k}");
                if schema >= 0 || k % (1 << -schema) == 0 {
                    assert_eq!(bucket_upper(schema, want), v, "schema {schema}, 2^{k}");
                    assert_eq!(bucket_index(schema, v.next_up()), want + 1, "schema {schema}, above 2^{k}");
                }
            }
        }
    }

    #[test]
    fn every_value_lies_within_its_bucket_and_buckets_grow_by_the_base() {
        for schema in -4..=8_i8 {
            let base = 2f64.powf(2f64.powi(-i32::from(schema)));
            let mut v = 1.3e-7;
            while v < 30.0 {
                let i = bucket_index(schema, v);
                let (lo, hi) = bucket_bounds(schema, i);
                assert!(lo < v && v <= hi, "schema {schema}: {v} in bucket {i} ({lo}, {hi}]");
                assert!((hi / lo / base - 1.0).abs() < 1e-12, "schema {schema}: width {}", hi / lo);
                v *= 1.037;
            }
        }
        // Schema 3: 8 buckets per doubling, 2^(1/8) apart.
        assert_eq!(bucket_index(3, 1.0), 0);
        assert_eq!(bucket_index(3, 1.05), 1);
        assert_eq!(bucket_index(3, 2f64.powf(1.0 / 8.0) + 1e-9), 2);
        assert_eq!(bucket_index(3, 0.999), 0);
        assert_eq!(bucket_index(3, 0.9), -1);
    }

    #[test]
    fn counts_are_preserved_and_land_in_the_bucket_of_their_value() {
        // Round trips from 3 us to 900 ms, some repeated.
        let values: Vec<u64> = (0..2_000_u64).map(|i| 3_000 + (i * i * 7_919) % 900_000_000).collect();
        let h = hist(&values);
        let n = native_seconds(&h, SCHEMA);
        assert_eq!(n.count, values.len() as u64);
        assert_eq!(n.zero_count + n.buckets.iter().map(|b| b.1).sum::<u64>(), n.count);
        assert!(n.buckets.windows(2).all(|w| w[0].0 < w[1].0), "ascending, one entry per bucket");
        // Each bucket holds exactly the samples whose HdrHistogram value falls in its bounds.
        for &(i, c) in &n.buckets {
            let (lo, hi) = bucket_bounds(SCHEMA, i);
            let inside = values.iter().filter(|&&v| {
                let s = seconds(h.highest_equivalent(v));
                lo < s && s <= hi
            });
            assert_eq!(inside.count() as u64, c, "bucket {i} ({lo}, {hi}]");
        }
        let mean = n.sum / n.count as f64;
        assert!((mean - h.mean() / 1e9).abs() < 1e-12, "{mean} vs {}", h.mean() / 1e9);
        // Classic buckets: the same samples, each once.
        let classic = classic_seconds(&h, &[1e-3, 0.1, 0.5]);
        assert_eq!(classic.iter().map(|b| b.1).sum::<u64>(), n.count);
        assert_eq!(classic[3].0, f64::INFINITY);
        let below_1ms = values.iter().filter(|&&v| seconds(h.highest_equivalent(v)) <= 1e-3).count() as u64;
        assert_eq!(classic[0].1, below_1ms);
    }

    /// Round trips of 0 ns (a clock too coarse to see the wire) go to the zero bucket, the
    /// rest to their positive buckets: every sample is counted once.
    #[test]
    fn zero_round_trips_count_in_the_zero_bucket() {
        let h = hist(&[0, 0, 5_000]);
        let n = native_seconds(&h, SCHEMA);
        assert_eq!((n.count, n.zero_count), (3, 2));
        assert_eq!(n.buckets, [(bucket_index(SCHEMA, seconds(h.highest_equivalent(5_000))), 1)]);
    }

    /// A classic bucket includes its bound (`le`): 1,000 ns is exact in the histogram and
    /// exactly 1e-6 s, so it counts below that bound and 1,001 ns above it.
    #[test]
    fn a_value_on_a_classic_bound_counts_in_that_bucket() {
        let h = hist(&[1_000, 1_001]);
        assert_eq!(h.highest_equivalent(1_000), 1_000);
        assert_eq!(classic_seconds(&h, &[1e-6]), [(1e-6, 1), (f64::INFINITY, 1)]);
    }

    #[test]
    fn a_quantile_from_the_buckets_is_in_the_bucket_of_hdrhistograms() {
        // Prometheus's rule (histogram_quantile on native buckets): the first bucket whose
        // running count reaches q x count, interpolated within it.
        let values: Vec<u64> = (1..=997_u64).map(|i| 40_000 + i * i * 31).collect();
        let h = hist(&values);
        let n = native_seconds(&h, SCHEMA);
        for q in [0.5, 0.9, 0.99, 0.999] {
            let rank = q * n.count as f64;
            let mut run = 0;
            let &(i, _) = n
                .buckets
                .iter()
                .find(|b| {
                    run += b.1;
                    run as f64 >= rank
                })
                .unwrap();
            let hdr = seconds(h.value_at_quantile(q));
            let (lo, hi) = bucket_bounds(SCHEMA, i);
            assert!(lo < hdr && hdr <= hi, "q {q}: {hdr} in ({lo}, {hi}]");
        }
    }

    #[test]
    fn spans_join_neighbours_and_deltas_rebuild_the_counts() {
        let n =
            Native { schema: 3, count: 16, sum: 0.0, zero_count: 0, buckets: vec![(-5, 2), (-4, 7), (0, 3), (9, 4)] };
        let (spans, deltas) = n.spans_and_deltas();
        assert_eq!(spans, [(-5, 2), (3, 1), (8, 1)]);
        assert_eq!(deltas, [2, 5, -4, 1]);
        let mut run = 0;
        let rebuilt: Vec<i64> = deltas
            .iter()
            .map(|d| {
                run += d;
                run
            })
            .collect();
        assert_eq!(rebuilt, [2, 7, 3, 4]);
        let empty = Native { schema: 3, count: 0, sum: 0.0, zero_count: 0, buckets: vec![] };
        assert_eq!(empty.spans_and_deltas(), (vec![], vec![]));
    }
}
