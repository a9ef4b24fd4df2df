//! The percentile distribution in HdrHistogram's own text layout
//! (`AbstractHistogram.outputPercentileDistribution` in the Java library): the table Aeron's
//! Ping prints, and the `.hgrm` format that HdrHistogram's plotter and tools read. The rows
//! are `wirebench_core::latency::distribution`: Java's percentile levels, each at the same
//! rank as every other percentile wirebench shows (`bench/hdr-java.sh` compares the file with
//! the Java library's output line for line).

use std::io::{self, Write};

use hdrhistogram::Histogram;
use wirebench_core::latency;

/// Ticks per half distance, as Aeron and `HistogramLogProcessor` use by default.
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// Writes the distribution of `h` with values divided by `scale` (1000 turns ns into µs).
pub fn write(h: &Histogram<u64>, scale: f64, out: &mut dyn Write) -> io::Result<()> {
    let digits = usize::from(h.sigfig());
    writeln!(out, "{:>12} {:>14} {:>10} {:>14}\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")?;
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let value = |v: u64| v as f64 / scale;
    let fixed = |x: f64, d: usize| java_fixed(x, d);
    for s in latency::distribution(h, TICKS_PER_HALF_DISTANCE) {
        let (v, q, total) = (fixed(value(s.value), digits), s.level / 100.0, s.total);
        if q < 1.0 {
            writeln!(out, "{v:>12} {:>2} {total:>10} {:>14}", fixed(q, 12), fixed(1.0 / (1.0 - q), 2))?;
        } else {
            writeln!(out, "{v:>12} {:>2} {total:>10}", fixed(q, 12))?;
        }
    }
    let (mean, sd, max) =
        if h.is_empty() { (0.0, 0.0, 0.0) } else { (h.mean() / scale, h.stdev() / scale, value(h.max())) };
    writeln!(out, "#[Mean    = {:>12}, StdDeviation   = {:>12}]", fixed(mean, digits), fixed(sd, digits))?;
    writeln!(out, "#[Max     = {:>12}, Total count    = {:>12}]", fixed(max, digits), h.len())?;
    writeln!(out, "#[Buckets = {:>12}, SubBuckets     = {:>12}]", h.buckets(), sub_buckets(h.sigfig()))
}

/// `x` with `decimals` digits after the point as Java's `String.format("%.Nf")` writes it:
/// its shortest round-trip digits rounded half up (Rust rounds the exact binary value, so
/// 0.9997802734375 would end in 7 where Java writes 8).
pub fn java_fixed(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let shortest = format!("{}", x.abs());
    let (int, frac) = shortest.split_once('.').unwrap_or((&shortest, ""));
    if frac.len() <= decimals {
        return format!("{x:.decimals$}");
    }
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().take(decimals)).map(|b| b - b'0').collect();
    if frac.as_bytes()[decimals] >= b'5' {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, 1);
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - decimals;
    let text = |d: &[u8]| d.iter().map(|&b| char::from(b'0' + b)).collect::<String>();
    let sign = if x.is_sign_negative() && digits.iter().any(|&d| d != 0) { "-" } else { "" };
    if decimals == 0 {
        format!("{sign}{}", text(&digits))
    } else {
        format!("{sign}{}.{}", text(&digits[..split]), text(&digits[split..]))
    }
}

/// HdrHistogram's sub-bucket count for `sigfig` digits: the power of two that holds
/// `2 * 10^sigfig` at unit resolution.
fn sub_buckets(sigfig: u8) -> u32 {
    let largest = 2 * 10u32.pow(u32::from(sigfig));
    largest.next_power_of_two()
}

/// One parsed line of a distribution: value, quantile, total count.
pub type Row = (f64, f64, u64);

/// Reads back the rows of a distribution written by [`write`] (or by HdrHistogram itself).
pub fn parse(text: &str) -> Option<Vec<Row>> {
    let mut rows = Vec::new();
    for line in text.lines().skip(2) {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut f = line.split_whitespace();
        let v = f.next()?.parse().ok()?;
        let q = f.next()?.parse().ok()?;
        let n = f.next()?.parse().ok()?;
        rows.push((v, q, n));
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in 1..=10_000u64 {
            h.record(5_000 + v * 3).unwrap();
        }
        h
    }

    #[test]
    fn layout_matches_hdrhistogram() {
        let mut out = Vec::new();
        write(&sample(), 1000.0, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "       Value     Percentile TotalCount 1/(1-Percentile)");
        assert_eq!(lines[1], "");
        // first row: the minimum at quantile 0
        assert!(lines[2].starts_with("       5.003 0.000000000000          1           1.00"), "{}", lines[2]);
        let last_row = lines.iter().rev().find(|l| !l.starts_with('#')).unwrap();
        assert!(last_row.contains(" 1.000000000000      10000"), "{last_row}");
        assert!(lines.iter().any(|l| l.starts_with("#[Mean    = ")));
        assert!(text.ends_with(&format!("#[Buckets = {:>12}, SubBuckets     = {:>12}]\n", sample().buckets(), 2048)));
    }

    #[test]
    fn fixed_point_as_java_writes_it() {
        assert_eq!(java_fixed(0.999_780_273_437_5, 12), "0.999780273438", "a tie: half up");
        assert_eq!(format!("{:.12}", 0.999_780_273_437_5), "0.999780273437", "where Rust rounds to even");
        assert_eq!(java_fixed(0.15, 1), "0.2", "Java rounds the shortest digits, 0.15");
        assert_eq!(java_fixed(0.5, 12), "0.500000000000");
        assert_eq!(java_fixed(9.9996, 3), "10.000");
        assert_eq!(java_fixed(999.9995, 3), "1000.000");
        assert_eq!(java_fixed(4_551.111_111_1, 2), "4551.11");
        assert_eq!(java_fixed(1.0, 2), "1.00");
        assert_eq!(java_fixed(0.0, 3), "0.000");
        assert_eq!(java_fixed(-2.25, 1), "-2.3");
        assert_eq!(java_fixed(2.5, 0), "3");
    }

    #[test]
    fn parses_back_and_counts_are_monotonic() {
        let mut out = Vec::new();
        write(&sample(), 1000.0, &mut out).unwrap();
        let rows = parse(&String::from_utf8(out).unwrap()).unwrap();
        assert!(rows.len() > 20);
        assert!(rows.windows(2).all(|w| w[0].1 <= w[1].1 && w[0].2 <= w[1].2 && w[0].0 <= w[1].0));
        assert_eq!(rows.last().unwrap().2, 10_000);
    }
}
