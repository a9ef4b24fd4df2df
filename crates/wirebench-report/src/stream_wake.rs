//! A stream receiver's own wake-up delay in words (`ReceiverResult::wake`: application read
//! time minus the kernel's software RX timestamp), and which time the stream's jitter and
//! gap figures use, so a user sees how much of them is the receiving host waking up. The
//! text, the HTML page (which shows the same summary) and the JSON carry the same numbers.

use wirebench_core::report::ReceiverResult;
use wirebench_core::stream::wake::WakeDelay;

use crate::words::{grouped, us};

#[expect(clippy::cast_precision_loss, reason = "display values")]
fn us_of(ns: u64) -> String {
    us(ns as f64)
}

/// The wake-up line of receiver `r`; `None` where it has no figures (TCP, an older serve).
pub fn line(r: &ReceiverResult) -> Option<String> {
    Some(words(&r.addr, &r.wake?))
}

/// The wake-up line of the receiver `who` (`listen`: its one socket, all publishers).
pub fn words(who: &str, w: &WakeDelay) -> String {
    let uses = "jitter and gap times use the application's receive times, so they include it";
    if !w.available {
        format!(
            "{who}: note: kernel RX timestamps unavailable at this receiver (SO_TIMESTAMPING refused or off): its \
             wake-up delay is not measured; jitter and gap times use the application's receive times"
        )
    } else if w.stamped == 0 {
        format!(
            "{who}: note: no datagram carried a kernel RX timestamp: the receiver's wake-up delay is not measured; \
             jitter and gap times use the application's receive times"
        )
    } else {
        let after = if w.after_read > 0 {
            format!(" ({} stamped after the read: the wall clock stepped)", grouped(w.after_read))
        } else {
            String::new()
        };
        format!(
            "{}: receiver wake-up (application read - kernel RX stamp, {} datagrams): p50 {} us, p99 {} us, max {} us{after}; {uses}",
            who,
            grouped(w.stamped),
            us_of(w.p50_ns),
            us_of(w.p99_ns),
            us_of(w.max_ns),
        )
    }
}

#[cfg(test)]
mod tests {
    use wirebench_core::report::Results;

    use super::*;

    fn receiver(wake: Option<WakeDelay>) -> ReceiverResult {
        let r = crate::fixtures::stream(1000, 1000);
        let Results::Stream(s) = r.results else { unreachable!() };
        ReceiverResult { wake, ..s.receivers[0].clone() }
    }

    #[test]
    fn measured_unavailable_and_unstamped() {
        let w = WakeDelay {
            available: true,
            stamped: 1_000,
            p50_ns: 12_300,
            p99_ns: 45_600,
            max_ns: 1_250_000,
            ..WakeDelay::default()
        };
        let l = line(&receiver(Some(w))).unwrap();
        assert!(
            l.ends_with(
                ": receiver wake-up (application read - kernel RX stamp, 1,000 datagrams): p50 12.3 us, p99 45.6 us, \
                 max 1250 us; jitter and gap times use the application's receive times, so they include it"
            ),
            "{l}"
        );
        let l = line(&receiver(Some(WakeDelay::default()))).unwrap();
        assert!(l.contains("note: kernel RX timestamps unavailable at this receiver"), "{l}");
        let l = line(&receiver(Some(WakeDelay { available: true, unstamped: 5, ..WakeDelay::default() }))).unwrap();
        assert!(l.contains("note: no datagram carried a kernel RX timestamp"), "{l}");
        assert_eq!(line(&receiver(None)), None);
    }
}
