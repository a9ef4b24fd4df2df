//! Closing windows: every target's decided windows collected, each closed window published
//! whole (a matrix report with one cell per target and its histogram, plain V2: a window's
//! cells are hundreds of sparse histograms, for which DEFLATE costs far more than it saves)
//! with the running totals.

use wirebench_core::mesh::api::{API_VERSION, CellReport, MatrixReport, NodeRef, WindowRef};
use wirebench_core::mesh::peer::Peer;
use wirebench_core::mesh::window::{RttSummary, Tally, histogram_of};
use wirebench_core::report::encode_histogram_plain;

use super::Prober;

impl Prober {
    /// Collects every target's decided windows and publishes the newest.
    pub(super) fn close_windows(&mut self, now: u64) {
        let w = &self.windows;
        let Some(last) = (now.saturating_sub(w.start_ns + w.timeout_ns) / w.len_ns).checked_sub(1) else { return };
        if self.published.is_some_and(|p| p >= last) {
            return;
        }
        for (&id, slot) in &mut self.slots {
            while let Some((k, tally)) = slot.target.take_closed(now, w) {
                self.closed.entry(k).or_default().push((id, tally));
            }
        }
        let first = self.published.map_or(0, |p| p + 1);
        for k in first..=last {
            let tallies = self.closed.remove(&k).unwrap_or_default();
            self.publish(k, tallies);
        }
        self.published = Some(last);
    }

    fn publish(&mut self, k: u64, tallies: Vec<(u64, Tally)>) {
        let mut cells = Vec::with_capacity(tallies.len());
        for (id, mut t) in tallies {
            let Some(slot) = self.slots.get(&id) else { continue };
            t.samples.sort_unstable();
            let h = histogram_of(&t.samples);
            let rtt = RttSummary::of_sorted(&h, &t.samples);
            let e = self.totals.entry((slot.peer.addr.to_string(), slot.proto)).or_default();
            e.sent += t.sent;
            e.lost += t.lost;
            cells.push(CellReport {
                peer: node_ref(&slot.peer),
                proto: slot.proto,
                sent: t.sent,
                received: t.received,
                lost: t.lost,
                late: t.late,
                duplicates: t.duplicates,
                rtt,
                histogram: rtt.map(|_| encode_histogram_plain(&h)),
            });
        }
        cells.sort_by(|a, b| (&a.peer.addr, a.proto).cmp(&(&b.peer.addr, b.proto)));
        let start = i128::from(self.windows.start(k)) + i128::from(self.wall_offset);
        let report = MatrixReport {
            api_version: API_VERSION,
            agent: self.cfg.me.clone(),
            window: Some(WindowRef {
                index: k,
                len_ns: self.windows.len_ns,
                start_unix_ns: u64::try_from(start).unwrap_or(0),
            }),
            cells,
        };
        self.shared.set_matrix(report, self.totals.clone());
    }
}

pub(super) fn node_ref(p: &Peer) -> NodeRef {
    NodeRef { addr: p.addr.to_string(), name: p.name.clone(), zone: p.zone.clone(), stamp: p.stamp }
}
