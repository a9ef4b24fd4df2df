//! HdrHistogram interval logs (one histogram per interval), the format jHiccup writes and
//! `HistogramLogProcessor` reads.

use std::io::{self, Write};
use std::time::SystemTime;

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use wirebench_core::latency::Interval;

/// Writes `intervals` as an interval log whose StartTime is `start`. Max values are written
/// in ms (divisor 1e6), as HdrHistogram's tools expect for ns data.
pub fn write(intervals: &[Interval], start: SystemTime, comment: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut out = out;
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .add_comment("values in ns")
        .with_start_time(start)
        .with_base_time(start)
        .with_max_value_divisor(1e6)
        .begin_log_with(&mut out, &mut ser)?;
    w.write_comment("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
    for i in intervals {
        w.write_histogram(&i.histogram, i.start, i.length, None).map_err(|e| io::Error::other(format!("{e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use std::time::Duration;

    #[test]
    fn hdrhistogram_reads_it_back() {
        let mut intervals = Vec::new();
        for s in 0..3u64 {
            let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            for v in 0..100 {
                h.record(10_000 + v + s * 1000).unwrap();
            }
            intervals.push(Interval { start: Duration::from_secs(s), length: Duration::from_secs(1), histogram: h });
        }
        let mut out = Vec::new();
        write(&intervals, SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000), "test", &mut out).unwrap();
        let mut read = 0;
        for entry in IntervalLogIterator::new(&out) {
            if let Ok(LogEntry::Interval(ilh)) = entry {
                let h = wirebench_core::report::decode_histogram(ilh.encoded_histogram()).unwrap();
                assert_eq!(h, intervals[read].histogram);
                assert_eq!(ilh.start_timestamp(), intervals[read].start);
                read += 1;
            }
        }
        assert_eq!(read, 3);
    }
}
