//! The client's side of a stream session while data flows, without sockets or a clock: what
//! each serve said (its interval snapshots and its result), when the run is over, when this
//! host takes its own snapshot, and when a serve's message ends the run. The binary's loop
//! feeds it control messages and times (ns since sending began); tests feed it virtual time.

use crate::counters::{Reading, reading};
use crate::report::IntervalRow;
use crate::snmp::Snmp;
use crate::stream::StreamCounts;
use crate::stream::wake::WakeDelay;
use crate::wire::control::{Control, PublisherCounts};

/// What a serve answered at the end of a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServeResult {
    /// Received per publisher (forward).
    pub received: Vec<StreamCounts>,
    /// Sent per publisher (reverse).
    pub sent: Vec<u64>,
    /// How long serve's sending took, ns (reverse; 0 from an older serve).
    pub send_ns: u64,
    /// Datagrams at serve that were not the session's.
    pub foreign: u64,
    /// Serve's host's kernel counters over the session.
    pub kernel: Option<Snmp>,
    /// Serve's receiving thread's wake-up delay (forward UDP).
    pub wake: Option<WakeDelay>,
    /// When it arrived, ns since sending began.
    pub at_ns: Option<u64>,
}

impl ServeResult {
    /// The fields of a `Result` message that arrived at `at_ns`; `None` for any other message.
    pub fn of(m: Control, at_ns: u64) -> Option<Self> {
        match m {
            Control::Result { received, sent, send_ns, foreign, kernel, wake } => {
                Some(Self { received: counts_of(&received), sent, send_ns, foreign, kernel, wake, at_ns: Some(at_ns) })
            }
            _ => None,
        }
    }
}

/// Sums per-publisher counts.
pub fn total(p: &[StreamCounts]) -> StreamCounts {
    let mut t = StreamCounts::default();
    for c in p {
        t.add(c);
    }
    t
}

/// Per-publisher counts out of a control message.
pub fn counts_of(p: &[PublisherCounts]) -> Vec<StreamCounts> {
    p.iter().map(|c| c.counts).collect()
}

/// Turns a series of (ns since sending began, lifetime total) snapshots into interval rows.
pub fn intervals(snaps: &[(u64, StreamCounts)]) -> Vec<IntervalRow> {
    let mut prev = StreamCounts::default();
    snaps
        .iter()
        .map(|(at, c)| {
            let row = IntervalRow { at_ns: *at, counts: c.since(&prev), loss_split: None };
            prev = *c;
            row
        })
        .collect()
}

/// Closes a receiver's rows with its final counts `total`, taken once the sending had
/// ended at `end_ns` (on the rows' clock). The part after the last row is a row of its own,
/// ending at `end_ns`. When the last row already ends at or after `end_ns` (serve's clock
/// for its reports starts at its `ready`, before the sending, and a report goes when its
/// control read next times out, so its last one can come after the sending ended), what
/// was counted after it (datagrams in flight, or newer than the report's snapshot) joins
/// that row, as it would join the row that ends the sending: a row of its own would end a
/// nanosecond later, two rows at one time, the second at billions of messages a second.
pub fn close_rows(snaps: &mut Vec<(u64, StreamCounts)>, end_ns: u64, total: StreamCounts) {
    match snaps.last_mut() {
        Some(last) if last.1 == total => {}
        Some(last) if last.0 >= end_ns => last.1 = total,
        _ => snaps.push((end_ns.max(1), total)),
    }
}

/// Interval rows kept per serve at most: the run's own (one per interval) and some slack for
/// the final partial row and timing, never more than about a million (bounded memory).
pub fn rows_cap(duration_ns: u64, interval_ns: u64) -> usize {
    let rows = duration_ns / interval_ns.max(1);
    usize::try_from(rows).unwrap_or(usize::MAX).saturating_add(64).min(1 << 20)
}

/// How long a run with no senders here waits for its serves' results beyond its duration.
pub const REVERSE_WAIT_NS: u64 = 5_000_000_000;

/// What the driver does after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Nothing to show.
    Nothing,
    /// Serve `i` has a new interval row (show it).
    Row(usize),
    /// The run is over for everyone: a serve ended it or failed (`peer_lost` says which).
    Stop,
}

/// The state of one UDP stream session on the client, across its serves.
#[derive(Debug, Clone)]
pub struct ClientSession {
    names: Vec<String>,
    /// This side sends (forward or both, and its senders started).
    sends: bool,
    cap: usize,
    interval_ns: u64,
    next_local_ns: u64,
    deadline_ns: u64,
    /// Per serve: its interval snapshots (ns since sending began, lifetime totals)...
    pub snaps: Vec<Vec<(u64, StreamCounts)>>,
    /// ...and the host counters read with each.
    pub reads: Vec<Vec<Reading>>,
    /// Per serve: its result, once it came.
    pub results: Vec<Option<ServeResult>>,
    /// Interval rows beyond [`rows_cap`], ignored.
    pub ignored_rows: u64,
    /// Why the run ended early: a serve that ended or failed.
    pub peer_lost: Option<String>,
}

impl ClientSession {
    /// A session with the serves `names` (targets, in order) of a run of `duration_ns` with
    /// rows every `interval_ns`; `sends` when this side's senders run.
    pub fn new(names: Vec<String>, sends: bool, duration_ns: u64, interval_ns: u64) -> Self {
        let n = names.len();
        Self {
            names,
            sends,
            cap: rows_cap(duration_ns, interval_ns),
            interval_ns: interval_ns.max(1),
            next_local_ns: interval_ns.max(1),
            deadline_ns: duration_ns.saturating_add(REVERSE_WAIT_NS),
            snaps: vec![Vec::new(); n],
            reads: vec![Vec::new(); n],
            results: vec![None; n],
            ignored_rows: 0,
            peer_lost: None,
        }
    }

    /// Serve `i`'s message `m`, arrived at `at_ns`. `sender_drops` reads this host's drops
    /// after the send, for an interval row (read only when a row is kept).
    pub fn handle(&mut self, i: usize, at_ns: u64, m: Control, sender_drops: impl FnOnce() -> Option<u64>) -> Heard {
        if i >= self.names.len() {
            return Heard::Nothing;
        }
        match m {
            Control::Interval { publishers, kernel } => {
                if self.row(i, at_ns, &publishers, kernel.as_ref(), sender_drops) {
                    Heard::Row(i)
                } else {
                    Heard::Nothing
                }
            }
            m @ Control::Result { .. } => {
                self.results[i] = ServeResult::of(m, at_ns);
                if self.sends {
                    // Before our Finish: serve ended the session (it is shutting down).
                    self.lost(format!("{} ended the session early", self.names[i]));
                    return Heard::Stop;
                }
                Heard::Nothing
            }
            Control::Error { message } => {
                self.lost(format!("{}: {message}", self.names[i]));
                Heard::Stop
            }
            _ => Heard::Nothing,
        }
    }

    /// Keeps serve `i`'s interval row (its counts at `at_ns`) unless it has sent more than a
    /// run of this length can have; returns whether it was kept.
    pub fn row(
        &mut self,
        i: usize,
        at_ns: u64,
        publishers: &[PublisherCounts],
        kernel: Option<&Snmp>,
        sender_drops: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if self.snaps.get(i).is_none_or(|s| s.len() >= self.cap) {
            self.ignored_rows += 1;
            return false;
        }
        self.reads[i].push(reading(sender_drops(), kernel));
        self.snaps[i].push((at_ns, total(&counts_of(publishers))));
        true
    }

    /// Serve `i`'s name (its target as given).
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map_or("", String::as_str)
    }

    /// This side's senders are done and each serve was told what it was sent: from now on
    /// a result is the answer, not an early end.
    pub fn finished(&mut self) {
        self.sends = false;
    }

    fn lost(&mut self, why: String) {
        self.peer_lost = Some(why);
    }

    /// Whether this host's receivers take their snapshot at `now_ns` (once per interval).
    pub fn local_due(&mut self, now_ns: u64) -> bool {
        if now_ns < self.next_local_ns {
            return false;
        }
        self.next_local_ns = self.next_local_ns.saturating_add(self.interval_ns);
        true
    }

    /// Whether the flow is over at `now_ns`: this side's senders are done (`sending`
    /// false); with no senders here, every serve's result is in, the run was stopped, or
    /// the results are [`REVERSE_WAIT_NS`] late.
    pub fn flow_done(&self, now_ns: u64, sending: bool, stopped: bool) -> bool {
        if self.sends {
            return !sending;
        }
        self.results.iter().all(Option::is_some) || stopped || now_ns > self.deadline_ns
    }

    /// The serves whose result is still owed.
    pub fn owed(&self) -> Vec<usize> {
        (0..self.results.len()).filter(|&i| self.results[i].is_none()).collect()
    }

    /// The line that says rows were ignored, if any were.
    pub fn ignored_warning(&self) -> Option<String> {
        (self.ignored_rows > 0).then(|| {
            format!(
                "serve sent {} interval rows beyond the {} a run of this length can have: ignored",
                self.ignored_rows, self.cap
            )
        })
    }
}

#[cfg(test)]
mod tests;
