//! A stream's loss split per interval row, adding up exactly to the whole run's split
//! ([`LossSplit::of`] over the run's counters, which stays the authority).
//!
//! Inputs per row: the missing count so far and the counters so far (the sender's
//! `SndbufErrors`, the receiving host's socket refusals and its NIC/softnet drops, each
//! read at the row's end, cumulative since the run began; `None` where a row has no
//! reading). Both are made monotone and capped by the whole run's figures, so the rows'
//! rises add up to the run's; the last row takes what came after the last reading (the
//! datagrams missing at the end, the counters' last rise).
//!
//! The kernel counts a drop when it happens and the receiver notices the gap only when a
//! later datagram is read, up to a full receive buffer later (and a row's counts are up to
//! one publish period older than its counters): counters lead. So a counter's rise that
//! finds no missing datagram in its own row is carried forward (oldest first) to explain
//! the next rows' missing ones. Each category is taken in the whole-run order (send buffer,
//! socket, NIC) within its whole-run share. A share that the counters rose for only after
//! the rows with room (a counter read late), and a counter read only for the whole run
//! (serve's `SndbufErrors` in a reverse run; its rise counts in the last row), go to the earliest rows
//! with unexplained missing datagrams left. What is left of a row is `elsewhere`; a row's
//! `excess` is what the counters rose in that row and never explained.

use super::LossSplit;

/// Counter readings at a row's end, cumulative since the run began: the sending host's
/// `SndbufErrors`, the receiving host's socket refusals (`Udp InErrors`) and its drops
/// below the sockets (`Nic` and `Softnet` tables).
pub type Reading = [Option<u64>; 3];

/// A queue of counter counts not yet matched to missing datagrams, by the row they rose in,
/// and their total (kept, not summed per row: that made a split quadratic in the rows).
#[derive(Default)]
struct Pending {
    counts: Vec<(usize, u64)>,
    head: usize,
    total: u64,
}

impl Pending {
    fn push(&mut self, row: usize, n: u64) {
        if n > 0 {
            self.counts.push((row, n));
            self.total = self.total.saturating_add(n);
        }
    }

    /// Takes `n` counts, oldest first (the caller never takes more than are queued).
    fn take(&mut self, mut n: u64) {
        self.total = self.total.saturating_sub(n);
        while n > 0 && self.head < self.counts.len() {
            let c = &mut self.counts[self.head].1;
            let t = n.min(*c);
            *c -= t;
            n -= t;
            if *c == 0 {
                self.head += 1;
            }
        }
    }

    const fn queued(&self) -> u64 {
        self.total
    }
}

/// Rises per row of a cumulative series made monotone and capped by `whole`; the last row
/// ends at `whole`.
fn rises(at: impl Iterator<Item = Option<u64>>, rows: usize, whole: u64) -> Vec<u64> {
    let mut prev = 0;
    let mut out: Vec<u64> = at
        .take(rows)
        .map(|r| {
            let now = r.unwrap_or(prev).clamp(prev, whole);
            let d = now - prev;
            prev = now;
            d
        })
        .collect();
    out.resize(rows, 0);
    if let Some(last) = out.last_mut() {
        *last += whole - prev;
    }
    out
}

/// The split of each of `missing_at.len()` rows. `missing`: the run's missing datagrams;
/// `whole`: the run's counters (send buffer, socket, NIC) as [`LossSplit::of`] takes them;
/// `missing_at[i]`: the missing datagrams counted by row `i`'s end; `reading_at[i]`: the
/// counters then (a shorter slice: no readings for the rest). The rows' fields add up to
/// `LossSplit::of(missing, whole...)`, each row's parts to its `missing`.
pub fn split_rows(missing: u64, whole: [u64; 3], missing_at: &[u64], reading_at: &[Reading]) -> Vec<LossSplit> {
    let n = missing_at.len();
    if n == 0 {
        return Vec::new();
    }
    let w = LossSplit::of(missing, whole[0], whole[1], whole[2]);
    let mut quota = [w.send_buffer, w.socket, w.nic];
    let missing_rows = rises(missing_at.iter().map(|&m| Some(m)), n, missing);
    let counter_rises: Vec<Vec<u64>> = (0..3).map(|c| rises(reading_at.iter().map(|r| r[c]), n, whole[c])).collect();
    let mut rows: Vec<LossSplit> =
        missing_rows.iter().map(|&m| LossSplit { missing: m, elsewhere: m, ..LossSplit::default() }).collect();
    let mut pending: [Pending; 3] = Default::default();
    // A counter never read per row rose at an unknown time: second pass only.
    let per_row: Vec<bool> = (0..3).map(|c| reading_at.iter().take(n).any(|r| r[c].is_some())).collect();
    // First pass: counters explain their own row's and later rows' missing datagrams.
    for (i, row) in rows.iter_mut().enumerate() {
        for c in 0..3 {
            pending[c].push(i, counter_rises[c][i]);
            if !per_row[c] {
                continue;
            }
            let t = row.elsewhere.min(quota[c]).min(pending[c].queued());
            pending[c].take(t);
            quota[c] -= t;
            row.elsewhere -= t;
            *share(row, c) += t;
        }
    }
    // Second pass: shares whose counters rose only after the rows they explain.
    for c in 0..3 {
        for row in &mut rows {
            let t = row.elsewhere.min(quota[c]);
            pending[c].take(t);
            quota[c] -= t;
            row.elsewhere -= t;
            *share(row, c) += t;
        }
    }
    for p in &pending {
        for &(i, left) in &p.counts[p.head..] {
            rows[i].excess = rows[i].excess.saturating_add(left);
        }
    }
    rows
}

fn share(s: &mut LossSplit, c: usize) -> &mut u64 {
    match c {
        0 => &mut s.send_buffer,
        1 => &mut s.socket,
        _ => &mut s.nic,
    }
}

impl LossSplit {
    /// Field by field sum (for rows that add up to a run).
    #[must_use]
    pub const fn plus(self, o: Self) -> Self {
        Self {
            missing: self.missing.saturating_add(o.missing),
            send_buffer: self.send_buffer.saturating_add(o.send_buffer),
            socket: self.socket.saturating_add(o.socket),
            nic: self.nic.saturating_add(o.nic),
            elsewhere: self.elsewhere.saturating_add(o.elsewhere),
            excess: self.excess.saturating_add(o.excess),
            uncertain: self.uncertain.saturating_add(o.uncertain),
        }
    }
}

/// Gives each row its part of the run's `uncertain` datagrams, in proportion to its socket
/// share (the rounding carried from row to row, so the parts add up to `uncertain`; all on
/// the last row when no row has a socket share).
pub fn spread_uncertain(rows: &mut [LossSplit], uncertain: u64) {
    let total: u64 = rows.iter().map(|r| r.socket).sum();
    let (mut so_far, mut given) = (0u128, 0u64);
    let n = rows.len();
    for (i, row) in rows.iter_mut().enumerate() {
        so_far += u128::from(row.socket);
        let due = if total == 0 {
            if i + 1 == n { uncertain } else { 0 }
        } else {
            u64::try_from(u128::from(uncertain) * so_far / u128::from(total)).unwrap_or(uncertain)
        };
        row.uncertain = due - given;
        given = due;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncertainty_spreads_over_the_rows_by_socket_share_and_adds_up() {
        let mut rows = [
            LossSplit { socket: 1, ..LossSplit::default() },
            LossSplit { socket: 0, ..LossSplit::default() },
            LossSplit { socket: 2, ..LossSplit::default() },
        ];
        spread_uncertain(&mut rows, 10);
        assert_eq!(rows.map(|r| r.uncertain), [3, 0, 7]);
        let mut none = [LossSplit::default(); 2];
        spread_uncertain(&mut none, 4);
        assert_eq!(none.map(|r| r.uncertain), [0, 4]);
        spread_uncertain(&mut [], 4);
    }

    fn sum(rows: &[LossSplit]) -> LossSplit {
        rows.iter().fold(LossSplit::default(), |a, &r| a.plus(r))
    }

    fn socket_at(v: &[u64]) -> Vec<Reading> {
        v.iter().map(|&s| [Some(0), Some(s), Some(0)]).collect()
    }

    #[test]
    fn a_burst_in_the_second_row_is_that_rows() {
        // 1000 dropped by the buffer in second 2, seen missing in second 2 (980) and 3 (20:
        // the gap noticed after the buffer drained); 5 elsewhere in second 1
        let rows = split_rows(1_005, [0, 1_000, 0], &[5, 985, 1_005], &socket_at(&[0, 1_000, 1_000]));
        assert_eq!(rows[0], LossSplit { missing: 5, elsewhere: 5, ..LossSplit::default() });
        assert_eq!(rows[1], LossSplit { missing: 980, socket: 980, ..LossSplit::default() });
        assert_eq!(rows[2], LossSplit { missing: 20, socket: 20, ..LossSplit::default() });
        assert_eq!(sum(&rows), LossSplit::of(1_005, 0, 1_000, 0));
    }

    #[test]
    fn counters_beyond_the_rows_missing_are_that_rows_excess() {
        // 7 refusals in row 1 and 3 in row 2, 3 missing in row 2: the oldest counts explain
        // them (counters lead), the rest of each row's rise is its excess
        let rows = split_rows(3, [0, 10, 0], &[0, 3], &socket_at(&[7, 10]));
        assert_eq!(rows[0], LossSplit { excess: 4, ..LossSplit::default() });
        assert_eq!(rows[1], LossSplit { missing: 3, socket: 3, excess: 3, ..LossSplit::default() });
        assert_eq!(sum(&rows), LossSplit::of(3, 0, 10, 0));
    }

    #[test]
    fn a_counter_read_only_for_the_whole_run_fills_the_earliest_rows() {
        // serve's SndbufErrors in a reverse run: no per-row reading
        let at = [[None, Some(0), Some(0)], [None, Some(2), Some(0)]];
        let rows = split_rows(10, [6, 2, 0], &[8, 10], &at);
        assert_eq!(rows[0], LossSplit { missing: 8, send_buffer: 6, elsewhere: 2, ..LossSplit::default() });
        assert_eq!(rows[1], LossSplit { missing: 2, socket: 2, ..LossSplit::default() });
        assert_eq!(sum(&rows), LossSplit::of(10, 6, 2, 0));
    }

    /// A long lossless run on a busy host: the counters rise in every row and no datagram is
    /// missing, so every rise stays queued. Summing the queue for each row made the split
    /// quadratic in the rows (a day of 100 ms rows: 864,000 rows, about 10^12 additions, a
    /// hang at the end of the run); the queue keeps its total.
    #[test]
    fn a_long_run_whose_counters_rise_in_every_row_splits_in_one_pass() {
        let n = 200_000u64;
        let at: Vec<Reading> = (1..=n).map(|i| [Some(i), Some(2 * i), Some(3 * i)]).collect();
        let rows = split_rows(0, [n, 2 * n, 3 * n], &vec![0; at.len()], &at);
        assert_eq!(rows.len(), at.len());
        assert_eq!(sum(&rows), LossSplit { excess: 6 * n, ..LossSplit::default() });
        assert!(rows.iter().all(|r| r.excess == 6 && r.missing == 0));
    }

    #[test]
    fn readings_from_a_far_end_that_go_back_or_overshoot_are_clamped() {
        let at = [[Some(u64::MAX), Some(50), Some(0)], [Some(0), Some(3), Some(9)]];
        let rows = split_rows(4, [1, 5, 0], &[9, 2], &at);
        assert_eq!(sum(&rows), LossSplit::of(4, 1, 5, 0));
        assert!(rows.iter().all(|r| r.send_buffer + r.socket + r.nic + r.elsewhere == r.missing));
        assert!(split_rows(4, [1, 5, 0], &[], &at).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn rows_add_up_to_the_whole_run(
            missing in 0u64..1 << 30,
            whole in proptest::array::uniform3(0u64..1 << 30),
            steps in proptest::collection::vec((0u64..1 << 30, proptest::array::uniform3(proptest::option::of(0u64..1 << 30))), 1..12),
        ) {
            let missing_at: Vec<u64> = steps.iter().map(|s| s.0).collect();
            let reading_at: Vec<Reading> = steps.iter().map(|s| s.1).collect();
            let rows = split_rows(missing, whole, &missing_at, &reading_at);
            proptest::prop_assert_eq!(rows.len(), steps.len());
            proptest::prop_assert_eq!(sum(&rows), LossSplit::of(missing, whole[0], whole[1], whole[2]));
            for r in &rows {
                proptest::prop_assert_eq!(r.send_buffer + r.socket + r.nic + r.elsewhere, r.missing);
            }
        }
    }
}
