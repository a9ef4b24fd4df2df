//! Interarrival jitter as RFC 3550 (section 6.4.1 and appendix A.8) defines it, the figure
//! iperf reports: for consecutive packets i and j (in arrival order) the difference in
//! transit time `D(i,j) = (Rj - Ri) - (Sj - Si)`, smoothed as `J += (|D| - J) / 16`.
//! Send and receive times may be on different clocks: only differences are used.

/// Running RFC 3550 jitter, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jitter {
    last_transit: Option<i128>,
    j: f64,
}

impl Jitter {
    /// Adds a packet sent at `sent_ns` (sender's clock) and received at `recv_ns`.
    pub fn update(&mut self, sent_ns: u64, recv_ns: u64) {
        let transit = i128::from(recv_ns) - i128::from(sent_ns);
        if let Some(last) = self.last_transit {
            #[expect(clippy::cast_precision_loss, reason = "transit differences are far below 2^52 ns")]
            let d = (transit - last).unsigned_abs() as f64;
            self.j += (d - self.j) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    /// The current jitter, ns.
    pub const fn ns(&self) -> f64 {
        self.j
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_transit_has_no_jitter() {
        let mut j = Jitter::default();
        for i in 0..100u64 {
            j.update(i * 1000, i * 1000 + 5_000_000_000);
        }
        assert!(j.ns().abs() < f64::EPSILON);
    }

    /// A fixed trace worked by hand with the RFC's formula: transits 10, 14, 12, 12, 20.
    #[test]
    fn matches_a_hand_computed_trace() {
        let mut j = Jitter::default();
        for (s, r) in [(0, 10), (100, 114), (200, 212), (300, 312), (400, 420)] {
            j.update(s, r);
        }
        // D: 4, 2, 0, 8.  J1 = 4/16 = 0.25; J2 = 0.25 + (2 - 0.25)/16 = 0.359375;
        // J3 = 0.359375 - 0.359375/16 = 0.336914...; J4 = J3 + (8 - J3)/16 = 0.815857...
        let j1 = 0.25;
        let j2 = j1 + (2.0 - j1) / 16.0;
        let j3 = j2 + (0.0 - j2) / 16.0;
        let j4 = j3 + (8.0 - j3) / 16.0;
        assert!((j.ns() - j4).abs() < 1e-12);
        assert!((j4 - 0.815_857).abs() < 1e-6);
    }
}
