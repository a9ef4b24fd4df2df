//! Results of `wirebench stream` and `wirebench listen`.

use serde::{Deserialize, Serialize};

use crate::counters::{LossSplit, RunSizes};
use crate::generator::{CpuSecond, GeneratorVerdict, SlipSecond};
use crate::snmp::Snmp;
use crate::stream::StreamCounts;
use crate::stream::wake::WakeDelay;

mod receivers;
pub use receivers::{owed_of, owed_receivers, receivers_failed};

named! {
    /// A stream's transport.
    pub enum Transport {
        /// UDP datagrams.
        Udp = "udp",
        /// A TCP connection.
        Tcp = "tcp",
    }
}

named! {
    /// Which way a stream's data flowed.
    pub enum StreamDirection {
        /// The client sends, serve receives.
        Forward = "forward",
        /// Serve sends, the client receives.
        Reverse = "reverse",
        /// Both at once (a run's direction; each receiver is one of the two).
        Both = "both",
        /// A listen run: what publishers it heard sent.
        Listen = "listen",
    }
}

named! {
    /// How a rate search ended.
    #[derive(Default)]
    pub enum SearchEnding {
        /// Not recorded (reports from before the field).
        #[default]
        Unrecorded = "",
        /// The first trial, at the top, passed: the sender is the limit.
        TopPassed = "top_passed",
        /// A trial passed with the sender short of the rate asked.
        SenderLimited = "sender_limited",
        /// The bracket closed.
        Found = "found",
        /// Not even the floor passed.
        NothingPassed = "nothing_passed",
        /// Ctrl-C, a receiver gone, or out of trials.
        Stopped = "stopped",
    }
}

/// Results of a throughput and loss run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResults {
    /// `udp` or `tcp`.
    pub proto: Transport,
    /// `forward` (client sends), `reverse` (serve sends), `both`, or `listen` (a listen
    /// run: publishers it heard).
    pub direction: StreamDirection,
    /// Message size, bytes (UDP payload or TCP frame).
    pub size: usize,
    /// Parallel publishers per destination.
    pub publishers: u16,
    /// Messages per second asked for (`None`: flat out).
    pub rate_per_s: Option<f64>,
    /// What this client sent (forward).
    pub sender: Option<SenderResult>,
    /// One row per receiver: each serve (forward), or this client (reverse).
    pub receivers: Vec<ReceiverResult>,
    /// `--find-max-rate`: the trials and the answer.
    pub search: Option<SearchResult>,
    /// `--sizes`: one row per size.
    pub sweep: Vec<SweepRow>,
    /// Things the user should know (buffers capped by sysctls, GSO off, ...).
    pub warnings: Vec<String>,
    /// `listen`: what it kept, expired and refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<ListenTotals>,
    /// The sending side's own health (this client's senders; the last run of a search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<GeneratorHealth>,
}

/// The load generator's own health: its sending threads' CPU and schedule slip, and
/// whether it, rather than the system under test, missed the rate asked for
/// (`wirebench_core::generator`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorHealth {
    /// Sending threads (publishers x destinations).
    pub threads: u64,
    /// Messages per second asked of them all (`None`: flat out).
    pub asked_per_s: Option<f64>,
    /// Messages per second they achieved, over the sending time.
    pub achieved_per_s: f64,
    /// CPU time the sending threads used while sending, user and system (`CLOCK_THREAD_CPUTIME_ID`), ns.
    pub cpu_ns: u64,
    /// `cpu_ns` over threads x sending time: 1.0 is every thread busy all the time.
    pub cpu_share: f64,
    /// `load`: time the threads were ready to run but waited for a CPU (schedstat), ns; the
    /// verdict then counts it as busy (`generator::demand_share`). Absent for `stream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
    /// Kept, generator-limited, send-path-limited, flat out, or (load) clients lost.
    pub verdict: GeneratorVerdict,
    /// Paced runs: schedule slip per second (all threads merged).
    pub slip_seconds: Vec<SlipSecond>,
    /// `load`: the generator's CPU per second (its runtime's threads; absent for `stream`,
    /// whose threads' CPU is read once, at their end).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_seconds: Vec<CpuSecond>,
    /// A merge of shards: the reports (as named to `report --merge`) of the shards that
    /// missed their rate; the merged verdict is the worst of theirs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub behind: Vec<String>,
    /// `load`: the sends the scenario's schedules asked for and where those not made went,
    /// dropped and never-connected clients included (absent for `stream`, and in load
    /// reports written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<super::load::LoadSchedule>,
}

/// What `wirebench listen` kept track of, within its budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenTotals {
    /// Publishers (source, session, publisher) seen.
    pub publishers_seen: u64,
    /// Publishers forgotten after going idle (their last report was printed).
    pub expired: u64,
    /// Finished publishers left out of `receivers` because the report was full.
    pub not_kept: u64,
    /// Datagrams from new publishers refused while the publisher table was full.
    pub refused_datagrams: u64,
    /// Datagrams that were not stream messages.
    pub foreign: u64,
    /// Its socket's wake-up delay, all publishers (`wirebench_core::stream::wake`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake: Option<WakeDelay>,
}

/// The sending side of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SenderResult {
    /// Messages sent (all publishers and destinations).
    pub messages: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Messages per second achieved over `send_ns` (TCP: the write rate, into the socket
    /// buffers; what arrived, and when, is the receivers').
    pub per_s: f64,
    /// Payload bits per second achieved over `send_ns` (TCP: the write rate).
    pub bits_per_s: f64,
    /// How long the sending took (first send to the end of the last), ns: the time base of
    /// every rate of a UDP run (TCP receivers: their `recv_ns`). 0 in reports written before
    /// it was recorded.
    #[serde(default)]
    pub send_ns: u64,
    /// Mean send slip behind the schedule, ns (paced runs).
    pub slip_mean_ns: u64,
    /// Largest slip, ns.
    pub slip_max_ns: u64,
    /// UDP GSO was used.
    pub gso: bool,
    /// TCP: segments retransmitted (from `TCP_INFO`).
    pub retransmits: Option<u64>,
    /// UDP: datagrams the sending host's kernel dropped after the application sent them
    /// (`Udp SndbufErrors` over the run, host-wide). Absent when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_errors: Option<u64>,
    /// UDP: packets the sending host's egress qdiscs dropped on the interfaces toward the
    /// receivers (the root qdiscs' drops over the run, netlink: what `tc -s qdisc` prints as
    /// `dropped`). They overlap `sndbuf_errors` (a packet refused whole counts in both; a
    /// GSO batch split and dropped in part only here), so the loss split takes the larger
    /// (`wirebench_core::counters::sender_drops`). Absent when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_drops: Option<u64>,
}

/// One receiver's view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiverResult {
    /// The receiver (a serve's address, or `local` for this client in reverse runs).
    pub addr: String,
    /// Which way this receiver's data flowed: `forward`, `reverse`, or `listen`.
    pub direction: StreamDirection,
    /// Messages the sender says it sent to this receiver.
    pub sent: u64,
    /// All publishers together.
    pub total: StreamCounts,
    /// Per publisher.
    pub publishers: Vec<StreamCounts>,
    /// One row per interval, all publishers together.
    pub intervals: Vec<IntervalRow>,
    /// The time base of this receiver's rates: how long its sender sent (first send to the
    /// end of the last, on the sender's clock), ns. 0 in reports written before it was
    /// recorded (and for `listen`, which knows no sender): then the receiver's own first to
    /// last arrival.
    #[serde(default)]
    pub send_ns: u64,
    /// TCP: the receiving time, ns: the receiver's first to last arrival of a message (on
    /// its own clock), each connection's start moved one mean gap before its first message
    /// (`n` messages arrive over `n - 1` gaps; `StreamCounts::receiving_ns_of`). When set, it is the time base of this receiver's rates instead of `send_ns`:
    /// a TCP sender's last write returns while what it wrote still sits in the socket
    /// buffers and queues, so its writing time is shorter than the time the bytes took to
    /// arrive. 0 for UDP and in reports written before it was recorded.
    #[serde(default)]
    pub recv_ns: u64,
    /// Datagrams at this receiver that were not this session's stream messages.
    #[serde(default)]
    pub foreign: u64,
    /// The receiving host's kernel counters over the run: the difference of its
    /// `/proc/net/snmp` `Udp` and `Tcp` tables. Host-wide: every socket on that host counts.
    /// Its tables `Softnet` and `Nic` (the receiving interfaces) are the counters below
    /// the sockets (`wirebench_core::counters::SOFTNET`, `NIC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Snmp>,
    /// The missing messages (`sent - received`) split by the counters of both hosts: the
    /// sender's drops after the send (`SndbufErrors` or its egress qdiscs' drops, the
    /// larger), this receiver's sockets and NIC, and the rest elsewhere on the path
    /// (`wirebench_core::counters::split_stream`). UDP runs with counters only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_split: Option<LossSplit>,
    /// UDP: the receiving thread's own wake-up delay (application receive time minus the
    /// kernel's software RX timestamp, `wirebench_core::stream::wake`); absent from an older
    /// serve and for TCP. Jitter and gap times above use the application's receive times,
    /// so they include it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake: Option<WakeDelay>,
}

impl ReceiverResult {
    /// The time base of the rates, ns: the receiving time (TCP), the sending time (UDP), or
    /// (old reports, `listen`) the receiver's first to last arrival.
    pub const fn time_base_ns(&self) -> u64 {
        if self.recv_ns > 0 {
            self.recv_ns
        } else if self.send_ns > 0 {
            self.send_ns
        } else {
            self.total.span_ns()
        }
    }

    /// True when the rates are over the receiving time ([`Self::recv_ns`], TCP).
    pub const fn over_receive_time(&self) -> bool {
        self.recv_ns > 0
    }

    /// True when the rates are over the sender's sending time.
    pub const fn over_send_time(&self) -> bool {
        self.send_ns > 0 && self.recv_ns == 0
    }

    /// Unique messages received per second of the time base.
    pub fn per_s(&self) -> f64 {
        self.total.per_sec(self.time_base_ns())
    }

    /// Received payload bits per second of the time base.
    pub fn bits_per_s(&self) -> f64 {
        self.total.bits_per_sec(self.time_base_ns())
    }

    /// Messages sent and not received, as a share of those sent (0 when none were sent).
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    pub fn loss(&self) -> f64 {
        if self.sent == 0 { 0.0 } else { self.sent.saturating_sub(self.total.received) as f64 / self.sent as f64 }
    }

    /// Times the receiving host's UDP receive buffers overflowed during the run
    /// (`Udp RcvbufErrors`, host-wide; one overflow drops one datagram or one whole GRO run).
    pub fn rcvbuf_errors(&self) -> Option<i64> {
        self.kernel.as_ref()?.get("Udp", "RcvbufErrors")
    }

    /// Messages sent and not received.
    pub const fn missing(&self) -> u64 {
        self.sent.saturating_sub(self.total.received)
    }

    /// Sets [`Self::loss_split`] from the counters it carries and the sending host's drops
    /// after the send (when known: `counters::sender_drops`), and each interval row's split
    /// from `readings` (one per row, cumulative since the run began,
    /// `wirebench_core::counters::reading`; fewer: none for the rest), so that the rows add
    /// up to the run (`counters::split_rows`). The receiving socket's counts are taken in
    /// datagrams, by the runs the receiver read (`counters::RunSizes`, from [`Self::wake`]),
    /// and the split says how far that may be off (`LossSplit::uncertain`).
    pub fn attribute(&mut self, sender_sndbuf: Option<u64>, readings: &[crate::counters::Reading]) {
        let Some([send, socket, nic]) = self.kernel.as_ref().and_then(|k| crate::counters::whole(sender_sndbuf, k))
        else {
            self.loss_split = None;
            for row in &mut self.intervals {
                row.loss_split = None;
            }
            return;
        };
        let sizes = self.wake.as_ref().and_then(RunSizes::of);
        let in_datagrams = |packets: u64| sizes.map_or(packets, |z| z.datagrams(packets));
        let whole = [send, in_datagrams(socket), nic];
        let mut split = LossSplit::of(self.missing(), whole[0], whole[1], whole[2]);
        if let Some(z) = sizes {
            split = split.with_socket_range(z.range(socket));
        }
        self.loss_split = Some(split);
        let (mut expected, mut received) = (0u64, 0u64);
        let missing_at: Vec<u64> = self
            .intervals
            .iter()
            .map(|row| {
                expected = expected.saturating_add(row.counts.expected);
                received = received.saturating_add(row.counts.received);
                expected.saturating_sub(received)
            })
            .collect();
        let readings: Vec<crate::counters::Reading> =
            readings.iter().map(|r| [r[0], r[1].map(in_datagrams), r[2]]).collect();
        let mut rows = crate::counters::split_rows(self.missing(), whole, &missing_at, &readings);
        crate::counters::spread_uncertain(&mut rows, split.uncertain);
        for (row, split) in self.intervals.iter_mut().zip(rows) {
            row.loss_split = Some(split);
        }
    }
}

/// One interval of a receiver.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    /// End of the interval, ns since the run began.
    pub at_ns: u64,
    /// What arrived in it.
    pub counts: StreamCounts,
    /// Its part of the receiver's `loss_split`: the rows' splits add up to it, field by
    /// field (`wirebench_core::counters::split_rows`: counters carried forward to the gaps
    /// they explain; the last row holds the datagrams missing at the end). UDP runs with
    /// counters only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_split: Option<LossSplit>,
}

/// The highest loss-free rate search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Loss allowed, as a share (0.001 = 0.1 %).
    pub loss_target: f64,
    /// Each trial in order.
    pub trials: Vec<TrialRow>,
    /// The highest passing rate, messages/s (0 if none passed).
    pub best_per_s: f64,
    /// The same in payload bits/s.
    pub best_bits_per_s: f64,
    /// How it ended: `top_passed` (the first trial, at the top, passed: the sender is the
    /// limit), `sender_limited` (a trial passed with the sender short of the rate asked),
    /// `found` (the bracket closed), `nothing_passed` (not even `floor_per_s`), or
    /// `stopped` (Ctrl-C, a receiver gone, or out of trials). Empty in older reports.
    #[serde(default)]
    pub ending: SearchEnding,
    /// The slowest rate the search would try, messages/s.
    #[serde(default)]
    pub floor_per_s: f64,
}

/// One trial of a search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    /// Rate asked for, messages/s (`None`: flat out).
    pub rate_per_s: Option<f64>,
    /// Rate achieved by the sender, messages/s.
    pub sent_per_s: f64,
    /// Messages sent.
    pub sent: u64,
    /// Unique messages received.
    pub received: u64,
    /// Loss share.
    pub loss: f64,
    /// Within the target, and no queue built?
    pub passed: bool,
    /// How much the one-way delay rose during the trial, ns (`StreamCounts::delay`, of the
    /// receiver whose rose most); absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_rise_ns: Option<i64>,
    /// A queue built on the path during the trial (`ratesearch::queue_built`): the trial
    /// failed however little it lost.
    #[serde(default)]
    pub queue: bool,
}

/// One size of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// Message size.
    pub size: usize,
    /// Messages per second received, over the sending time.
    pub per_s: f64,
    /// Payload bits per second received.
    pub bits_per_s: f64,
    /// Loss share.
    pub loss: f64,
    /// Messages per second the sender achieved (forward runs).
    #[serde(default)]
    pub sent_per_s: Option<f64>,
}

#[cfg(test)]
mod tests;
