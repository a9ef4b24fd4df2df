//! What load clients record: per event type the sends, the expected and arrived
//! deliveries, and the delay histograms, plus the run-wide histograms (connect time,
//! shaper holds) and error counts. The generator keeps one [`Recording`] per runtime
//! worker and merges them with [`Recording::add`] only when a report is built.

use hdrhistogram::Histogram;

use crate::latency;

/// A load histogram: integer ns, 3 significant digits, 1 µs lowest discernible value (the
/// messages' time stamps are µs), its counts grown to the largest value recorded (at most the
/// hour [`latency::record`] clamps to). Buckets and percentiles are those of one sized for
/// the hour from the start; the memory is not: a recording holds some thirty histograms,
/// most of them empty (16 KB) or holding delays under 10 ms (48 KB), where the hour's takes
/// 196 KB.
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1_000, 2_000, latency::SIGFIG).expect("constant bounds are valid");
    h.auto(true);
    h
}

/// Error kinds, counted per variant and named only in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A send failed (the connection broke while writing).
    Send,
    /// A received message had no `type` or `ts`.
    Malformed,
    /// A received message's type is not in the mix.
    UnknownType,
    /// A received message's send time is later than its arrival (other hosts' clocks).
    NegativeDelay,
    /// The connection attempt failed (no answer, refused, reset).
    Connect,
    /// The server answered the handshake with an HTTP error (e.g. 503: full).
    Refused,
    /// A read failed (reset, protocol error).
    Read,
    /// The close handshake did not finish in time (the socket was reset instead).
    CloseTimeout,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [Self; 8] = [
        Self::Send,
        Self::Malformed,
        Self::UnknownType,
        Self::NegativeDelay,
        Self::Connect,
        Self::Refused,
        Self::Read,
        Self::CloseTimeout,
    ];

    /// The report's name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Send => "send_failed",
            Self::Malformed => "malformed_message",
            Self::UnknownType => "unknown_type",
            Self::NegativeDelay => "negative_delay",
            Self::Connect => "connect_failed",
            Self::Refused => "handshake_refused",
            Self::Read => "read_failed",
            Self::CloseTimeout => "close_handshake_timeout",
        }
    }
}

/// One event type's recordings.
#[derive(Debug, Clone)]
pub struct TypeRec {
    /// Sent.
    pub sent: u64,
    /// Deliveries (relayed type) or replies (request type) expected when they were sent.
    pub expected: u64,
    /// Of those, arrived.
    pub arrived: u64,
    /// Arrivals nobody expected (before the receiver joined, an echo of a relayed type, a
    /// request relayed to others, from outside the room).
    pub unexpected: u64,
    /// Deliveries to other members: arrival minus embedded send time.
    pub delay: Histogram<u64>,
    /// Deliveries to other members: arrival minus intended send time.
    pub delay_intended: Histogram<u64>,
    /// Own messages back: arrival minus embedded send time.
    pub reply: Histogram<u64>,
}

impl TypeRec {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self {
            sent: 0,
            expected: 0,
            arrived: 0,
            unexpected: 0,
            delay: histogram(),
            delay_intended: histogram(),
            reply: histogram(),
        }
    }

    /// Adds `o`'s counts and histograms.
    pub fn add(&mut self, o: &Self) {
        self.sent += o.sent;
        self.expected += o.expected;
        self.arrived += o.arrived;
        self.unexpected += o.unexpected;
        let _ = self.delay.add(&o.delay);
        let _ = self.delay_intended.add(&o.delay_intended);
        let _ = self.reply.add(&o.reply);
    }
}

impl Default for TypeRec {
    fn default() -> Self {
        Self::new()
    }
}

/// One worker's recordings (or the merge of all of them).
#[derive(Debug, Clone)]
pub struct Recording {
    /// Per event type, in mix order.
    pub types: Vec<TypeRec>,
    /// Delays in the current second (the series).
    pub second: Histogram<u64>,
    /// Sent in the current second.
    pub second_sent: u64,
    /// Received in the current second (deliveries and replies).
    pub second_received: u64,
    /// Connect times.
    pub connect: Histogram<u64>,
    /// Upload: hand-over to the shaper until the frame was written to the socket.
    pub up_hold: Histogram<u64>,
    /// Download: the modelled hold of each received frame.
    pub down_hold: Histogram<u64>,
    /// Sum of send slips, ns.
    pub slip_sum: u128,
    /// Largest slip, ns.
    pub slip_max: u64,
    /// Sum of the current second's send slips, ns (the generator's health).
    pub second_slip_sum: u128,
    /// Largest slip in the current second, ns.
    pub second_slip_max: u64,
    /// Errors by [`ErrorKind`] index.
    pub errors: [u64; ErrorKind::ALL.len()],
}

/// Whether an arrival was expected (it counts against its sender's expectation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Expected by the accounting.
    Expected,
    /// Not expected (see [`TypeRec::unexpected`]).
    Unexpected,
}

impl Recording {
    /// Empty recordings for a mix of `types` event types.
    pub fn new(types: usize) -> Self {
        Self {
            types: (0..types).map(|_| TypeRec::new()).collect(),
            second: histogram(),
            second_sent: 0,
            second_received: 0,
            connect: histogram(),
            up_hold: histogram(),
            down_hold: histogram(),
            slip_sum: 0,
            slip_max: 0,
            second_slip_sum: 0,
            second_slip_max: 0,
            errors: [0; ErrorKind::ALL.len()],
        }
    }

    /// Counts an error.
    pub fn error(&mut self, k: ErrorKind) {
        self.errors[k as usize] += 1;
    }

    /// A send of type `t`, `slip` ns behind its intended time, expected at `expected`
    /// receivers (or back at its sender: 1).
    pub fn on_send(&mut self, t: usize, slip: u64, expected: u64) {
        let r = &mut self.types[t];
        r.sent += 1;
        r.expected += expected;
        self.second_sent += 1;
        self.slip_sum += u128::from(slip);
        self.slip_max = self.slip_max.max(slip);
        self.second_slip_sum += u128::from(slip);
        self.second_slip_max = self.second_slip_max.max(slip);
    }

    fn count(&mut self, t: usize, a: Arrival) {
        let r = &mut self.types[t];
        match a {
            Arrival::Expected => r.arrived += 1,
            Arrival::Unexpected => r.unexpected += 1,
        }
        self.second_received += 1;
    }

    /// A delivery of type `t` from another member.
    pub fn on_delivery(&mut self, t: usize, delay: u64, intended: Option<u64>, a: Arrival) {
        self.count(t, a);
        let r = &mut self.types[t];
        latency::record(&mut r.delay, delay);
        if let Some(d) = intended {
            latency::record(&mut r.delay_intended, d);
        }
        latency::record(&mut self.second, delay);
    }

    /// One of this client's own messages back (a reply to a request, or an echo).
    pub fn on_reply(&mut self, t: usize, rtt: u64, a: Arrival) {
        self.count(t, a);
        latency::record(&mut self.types[t].reply, rtt);
    }

    /// Moves the current second's delays into `into`; returns its (sent, received).
    pub fn take_second(&mut self, into: &mut Histogram<u64>) -> (u64, u64) {
        let _ = into.add(&self.second);
        self.second.reset();
        (std::mem::take(&mut self.second_sent), std::mem::take(&mut self.second_received))
    }

    /// Takes the current second's slips: (sum, max), ns. Take them with
    /// [`Self::take_second`], under the same lock, so the second's sends and slips agree.
    pub fn take_second_slip(&mut self) -> (u128, u64) {
        (std::mem::take(&mut self.second_slip_sum), std::mem::take(&mut self.second_slip_max))
    }

    /// Adds `o` (another worker's recordings of the same mix).
    pub fn add(&mut self, o: &Self) {
        for (m, r) in self.types.iter_mut().zip(&o.types) {
            m.add(r);
        }
        let _ = self.second.add(&o.second);
        self.second_sent += o.second_sent;
        self.second_received += o.second_received;
        let _ = self.connect.add(&o.connect);
        let _ = self.up_hold.add(&o.up_hold);
        let _ = self.down_hold.add(&o.down_hold);
        self.slip_sum += o.slip_sum;
        self.slip_max = self.slip_max.max(o.slip_max);
        self.second_slip_sum += o.second_slip_sum;
        self.second_slip_max = self.second_slip_max.max(o.second_slip_max);
        for (e, v) in self.errors.iter_mut().zip(o.errors) {
            *e += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_histogram_grows_and_reads_as_one_sized_for_the_hour() {
        let mut full = Histogram::<u64>::new_with_bounds(1_000, latency::MAX_TRACKABLE_NS, latency::SIGFIG).unwrap();
        let mut grown = histogram();
        assert!(grown.distinct_values() * 8 < full.distinct_values(), "an empty one is small");
        let mut other = histogram();
        for (i, v) in [1, 999, 1_000, 48_123, 2_500_000, 31_000_000_000, u64::MAX].into_iter().enumerate() {
            latency::record(&mut full, v);
            latency::record(if i % 2 == 0 { &mut grown } else { &mut other }, v);
        }
        grown.add(&other).unwrap();
        assert_eq!(grown.len(), full.len());
        assert_eq!((grown.min(), grown.max()), (full.min(), full.max()), "clamped to the hour like the full one");
        for q in [0.0, 0.1, 0.5, 0.75, 0.9, 0.99, 1.0] {
            assert_eq!(grown.value_at_quantile(q), full.value_at_quantile(q), "quantile {q}");
        }
        let back = crate::report::decode_histogram(&crate::report::encode_histogram(&grown)).unwrap();
        assert_eq!(back.value_at_quantile(0.5), full.value_at_quantile(0.5), "its encoding reads back");
    }

    #[test]
    fn a_seconds_slips_are_taken_with_it_and_the_run_keeps_its_own() {
        let mut a = Recording::new(1);
        a.on_send(0, 100, 1);
        a.on_send(0, 700, 1);
        let mut h = histogram();
        assert_eq!((a.take_second(&mut h), a.take_second_slip()), ((2, 0), (800, 700)));
        a.on_send(0, 50, 1);
        let mut b = Recording::new(1);
        b.on_send(0, 20, 1);
        a.add(&b);
        assert_eq!(a.take_second_slip(), (70, 50));
        assert_eq!(a.take_second_slip(), (0, 0));
        // the run's totals are untouched by the seconds taken
        assert_eq!((a.slip_sum, a.slip_max, a.types[0].sent), (870, 700, 4));
    }

    #[test]
    fn arrivals_count_against_their_type_and_only_deliveries_make_the_seconds_delays() {
        let mut a = Recording::new(2);
        a.on_send(1, 0, 3);
        a.on_send(1, 0, 3);
        a.on_delivery(1, 5_000, Some(7_000), Arrival::Expected);
        a.on_delivery(1, 6_000, None, Arrival::Unexpected);
        a.on_reply(0, 9_000, Arrival::Expected);
        let r = &a.types[1];
        assert_eq!((r.sent, r.expected, r.arrived, r.unexpected), (2, 6, 1, 1));
        assert_eq!((r.delay.len(), r.delay_intended.len(), r.reply.len()), (2, 1, 0));
        let q = &a.types[0];
        assert_eq!((q.arrived, q.unexpected, q.delay.len(), q.reply.len()), (1, 0, 0, 1));
        let mut into = histogram();
        assert_eq!(a.take_second(&mut into), (2, 3), "two sends; two deliveries and a reply");
        assert_eq!(into.len(), 2, "the reply is not a delivery delay");
        assert!(a.second.is_empty());
        assert_eq!(a.take_second(&mut into), (0, 0));
    }

    #[test]
    fn adding_a_workers_recording_sums_every_count_and_merges_every_histogram() {
        let mut a = Recording::new(1);
        a.on_send(0, 10, 2);
        a.on_delivery(0, 1_000, Some(1_500), Arrival::Expected);
        a.error(ErrorKind::Refused);
        let mut b = Recording::new(1);
        b.on_send(0, 30, 3);
        b.on_send(0, 5, 3);
        b.on_delivery(0, 2_000, Some(2_500), Arrival::Unexpected);
        b.on_delivery(0, 2_000, None, Arrival::Expected);
        b.on_reply(0, 4_000, Arrival::Expected);
        for h in [&mut b.connect, &mut b.up_hold, &mut b.down_hold] {
            latency::record(h, 3_000);
        }
        b.error(ErrorKind::Refused);
        b.error(ErrorKind::Refused);
        b.error(ErrorKind::Send);
        a.add(&b);
        let r = &a.types[0];
        assert_eq!((r.sent, r.expected, r.arrived, r.unexpected), (3, 8, 3, 1));
        assert_eq!((r.delay.len(), r.delay_intended.len(), r.reply.len()), (3, 2, 1));
        assert_eq!((a.second.len(), a.second_sent, a.second_received), (3, 3, 4));
        assert_eq!((a.connect.len(), a.up_hold.len(), a.down_hold.len()), (1, 1, 1));
        assert_eq!((a.slip_sum, a.slip_max), (45, 30));
        let count = |k: ErrorKind| a.errors[ErrorKind::ALL.iter().position(|&x| x == k).unwrap()];
        assert_eq!((count(ErrorKind::Refused), count(ErrorKind::Send), count(ErrorKind::Read)), (3, 1, 0));
    }

    #[test]
    fn error_kinds_have_their_report_names() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "send_failed",
                "malformed_message",
                "unknown_type",
                "negative_delay",
                "connect_failed",
                "handshake_refused",
                "read_failed",
                "close_handshake_timeout"
            ]
        );
    }
}
