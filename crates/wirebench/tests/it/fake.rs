//! The probe engine on the in-memory link (virtual clock, seeded loss): exact accounting
//! of loss, lateness and duplicates; multicast responders; coordinated-omission correction;
//! one-way delay with a known clock offset; silent peers. No sockets, no sleeps.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use wirebench::ping::engine::{self, EngineConfig, EngineError, EngineOutput};
use wirebench_core::latency::{self, value_at_percentile};
use wirebench_core::report::{GaveUp, Outcome, Stopped};
use wirebench_core::schedule::{Pacing, PoissonTimes, Stop};
use wirebench_core::units::MsgRate;
use wirebench_net::fake::{FakeClock, FakeLink, FakeResponder};
use wirebench_net::io::{ProbeIo, Received};

const WALL_MINUS_MONO: i64 = 1_700_000_000_000_000_000;

fn responder(n: u8, forward_us: u64, reverse_us: u64) -> FakeResponder {
    FakeResponder {
        addr: SocketAddr::from(([10, 0, 0, n], 7878)),
        forward_ns: forward_us * 1000,
        reverse_ns: reverse_us * 1000,
        dwell_ns: 2_000,
        clock_offset_ns: 0,
    }
}

fn cfg(count: u64, timeout_us: u64) -> EngineConfig {
    EngineConfig {
        size: 32,
        flags: 0,
        session: 0xABCD,
        pacing: Pacing::Closed,
        warmup: Stop::default(),
        stop: Stop { max_count: Some(count), deadline: None },
        timeout_ns: timeout_us * 1000,
        multicast: false,
        expect_responders: None,
        wall_minus_mono: WALL_MINUS_MONO,
        silence_ns: 1_000_000_000,
        intervals: false,
        cpu_probe: || None,
        stamp: None,
    }
}

fn link(responders: Vec<FakeResponder>, seed: u64) -> (FakeLink, FakeClock) {
    let clock = FakeClock::default();
    clock.advance_to(1_000_000);
    (FakeLink::new(clock.clone(), WALL_MINUS_MONO, responders, seed), clock)
}

fn run(io: &mut impl ProbeIo, clock: &FakeClock, c: &EngineConfig) -> EngineOutput {
    engine::run(io, clock, c, &AtomicBool::new(false)).expect("the run starts")
}

#[test]
fn random_loss_is_counted_exactly() {
    let (mut l, clock) = link(vec![responder(1, 50, 50)], 7);
    l.loss = 0.05;
    // The discovery probe must get through for the run to start: seed 7 lets it.
    let out = run(&mut l, &clock, &cfg(20_000, 1_000));
    let r = &out.responders[0].stats;
    assert_eq!(out.sent, 20_000);
    // Each probe lost either way is one probe without a reply.
    let lost = r.lost(out.sent, out.measure_start_seq);
    assert_eq!(r.received + lost, 20_000);
    // Every datagram dropped after discovery is one lost probe (discovery needed
    // `l.sent - 20_000` probes, all but the last of them dropped).
    let discovery_drops = l.sent - 20_000 - 1;
    assert_eq!(lost, l.dropped - discovery_drops, "every dropped datagram is one lost probe");
    assert_eq!((r.late, r.duplicates), (0, 0));
    assert_eq!(r.rtt.len(), r.received);
    // 1 - 0.95^2 = 9.75 %; binomial sd for n = 20000 is 0.21 %: within 5 sd.
    let rate = lost as f64 / 20_000.0;
    assert!((rate - 0.0975).abs() < 0.0105, "{rate}");
    // lost probes are not latencies: the largest recorded round trip is the link's
    assert!(r.rtt.max() < 110_000, "{}", r.rtt.max());
}

#[test]
fn late_replies_are_lost_and_counted_late() {
    let (mut l, clock) = link(vec![responder(1, 50, 50)], 1);
    // Every 10th datagram sent (discovery included) is answered 5 ms late; the timeout is 1 ms.
    l.hold_every = Some((10, 5_000_000));
    let out = run(&mut l, &clock, &cfg(1_000, 1_000));
    let r = &out.responders[0].stats;
    assert_eq!(r.lost(out.sent, out.measure_start_seq), 100);
    // The last few held replies would arrive after the run ended.
    assert!((90..=100).contains(&r.late), "{}", r.late);
    assert_eq!(r.received, 900);
    assert!(r.rtt.max() < 1_000_000, "no late reply is recorded as a latency");
}

#[test]
fn duplicates_are_counted_not_recorded() {
    let (mut l, clock) = link(vec![responder(1, 20, 20)], 1);
    l.duplicate_every = Some(7);
    let out = run(&mut l, &clock, &cfg(700, 1_000));
    let r = &out.responders[0].stats;
    // Sends 1..=701 (one discovery probe first); those divisible by 7 are answered twice.
    // The duplicate of the last measured probe may still be in flight when the run ends.
    let dup_sends = (2..=701u64).filter(|s| s % 7 == 0).count() as u64;
    assert!(r.duplicates == dup_sends || r.duplicates + 1 == dup_sends, "{} vs {dup_sends}", r.duplicates);
    assert_eq!((r.received, r.rtt.len()), (700, 700));
}

#[test]
fn multicast_gives_every_responder_its_own_histogram() {
    let (mut l, clock) = link(vec![responder(1, 10, 10), responder(2, 40, 40), responder(3, 100, 100)], 1);
    let mut c = cfg(500, 2_000);
    c.multicast = true;
    let out = run(&mut l, &clock, &c);
    assert_eq!(out.responders.len(), 3);
    for (r, rtt_us) in out.responders.iter().zip([20u64, 80, 200]) {
        assert_eq!((r.stats.received, r.stats.rtt.len()), (500, 500), "{}", r.addr);
        // round trip = forward + dwell + reverse
        let want = (rtt_us + 2) * 1000;
        assert!(value_at_percentile(&r.stats.rtt, 50.0).abs_diff(want) <= want / 500, "{}", r.addr);
    }
}

#[test]
fn a_dead_multicast_responder_is_named_and_not_waited_for() {
    let (mut l, clock) = link(vec![responder(1, 10, 10), responder(2, 20, 20)], 1);
    // Responder 2 answers nothing from send 101 on: measured probes 0..=98 (the discovery
    // probe was send 1).
    l.mute_from = vec![u64::MAX, 101];
    let mut c = cfg(1_000, 10_000);
    c.multicast = true;
    c.expect_responders = Some(2);
    let out = run(&mut l, &clock, &c);
    let (alive, dead) = (&out.responders[0], &out.responders[1]);
    assert_eq!((alive.stats.received, dead.stats.received), (1_000, 99));
    assert_eq!(dead.stats.lost(out.sent, out.measure_start_seq), 901);
    assert_eq!(out.outcome, Outcome::Completed);
    // Its last reply (to probe 98) came 99 round trips of 42 us after the start.
    assert_eq!(dead.stopped, Some(Stopped { at_ns: 99 * 42_000, unanswered: 901 }));
    assert_eq!(dead.stats.runs.longest(), 901);
    assert_eq!(alive.stopped, None);
    // Time: 99 probes at 42 us while both answered, then 901 at 22 us, plus at most two
    // graces of 1 ms (4 x 42 us is less) for the probes right after it stopped. Waiting out
    // the 10 ms timeout three times, as before, took 30 ms more.
    let took = wirebench_net::io::Clock::now_ns(&clock) - out.start_ns;
    let base = 99 * 42_000 + 901 * 22_000;
    assert!(took <= base + 2 * latency::patience::GRACE_MIN_NS, "{took} vs {base}");
    assert!(took > base, "it did wait a grace for the first missing reply");
}

#[test]
fn a_multicast_responder_that_loses_one_reply_is_still_waited_for() {
    // Responder 2's replies to every 50th send are held back past the grace but within the
    // timeout: they count on time, and the loop keeps waiting for it.
    let (mut l, clock) = link(vec![responder(1, 10, 10), responder(2, 20, 20)], 1);
    l.hold_every = Some((50, 3_000_000));
    let mut c = cfg(500, 10_000);
    c.multicast = true;
    c.expect_responders = Some(2);
    let out = run(&mut l, &clock, &c);
    for r in &out.responders {
        assert_eq!((r.stats.received, r.stats.late, r.stopped), (500, 0, None), "{}", r.addr);
    }
}

#[test]
fn open_loop_drains_every_reply_still_in_flight() {
    // 20 ms round trip at 10k/s: 200 probes are in flight when the last one is sent.
    let (mut l, clock) = link(vec![responder(1, 10_000, 10_000)], 1);
    let mut c = cfg(2_000, 1_000_000);
    c.pacing = Pacing::Rate(MsgRate::new(10_000.0).unwrap());
    let out = run(&mut l, &clock, &c);
    let r = &out.responders[0];
    assert_eq!((r.stats.received, r.stats.lost(out.sent, out.measure_start_seq), r.stopped), (2_000, 0, None));
}

#[test]
fn open_loop_does_not_wait_out_a_dead_responder_at_the_end() {
    let (mut l, clock) = link(vec![responder(1, 10, 10), responder(2, 20, 20)], 1);
    l.mute_from = vec![u64::MAX, 501];
    let mut c = cfg(2_000, 1_000_000);
    c.pacing = Pacing::Rate(MsgRate::new(10_000.0).unwrap());
    c.multicast = true;
    c.expect_responders = Some(2);
    let out = run(&mut l, &clock, &c);
    let (alive, dead) = (&out.responders[0], &out.responders[1]);
    assert_eq!((alive.stats.received, dead.stats.received), (2_000, 499));
    assert_eq!(dead.stopped.map(|s| s.unanswered), Some(1_501));
    // Sending ends when the 2001st probe would be due (200 ms); the live responder's last
    // replies were in by then, and the dead one's 1 s timeout was not waited out.
    let took = wirebench_net::io::Clock::now_ns(&clock) - out.start_ns;
    assert!(took < 200_000_000 + 100_000, "{took}");
}

/// Drops the probes of sends `drop.0..drop.1` (1-based, discovery included).
struct DropSends {
    inner: FakeLink,
    sends: u64,
    drop: (u64, u64),
}

impl ProbeIo for DropSends {
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        self.sends += 1;
        if (self.drop.0..self.drop.1).contains(&self.sends) {
            return Ok(());
        }
        self.inner.send(buf)
    }
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        self.inner.recv_until(buf, deadline_ns)
    }
}

#[test]
fn timeouts_in_a_row_do_not_end_the_run_and_are_counted() {
    let (l, clock) = link(vec![responder(1, 10, 10)], 1);
    // Twelve probes in a row lost (sends 102..=113), then two, on a 1 ms timeout: 12 ms
    // without a reply, more than the five timeouts that used to end a run.
    let mut io = DropSends { inner: l, sends: 0, drop: (102, 114) };
    let mut c = cfg(1_000, 1_000);
    c.silence_ns = 30_000_000;
    let out = run(&mut io, &clock, &c);
    assert_eq!(out.outcome, Outcome::Completed);
    assert_eq!(out.gave_up, None);
    let r = &out.responders[0];
    assert_eq!(r.stats.lost(out.sent, out.measure_start_seq), 12);
    assert_eq!((r.stats.runs.longest(), r.stats.runs.lost(), r.stats.runs.trailing()), (12, 12, 0));
    assert_eq!(r.stopped, None);
}

#[test]
fn expected_responders_end_discovery_early() {
    let (mut l, clock) = link(vec![responder(1, 10, 10), responder(2, 20, 20)], 1);
    let mut c = cfg(10, 1_000_000);
    c.multicast = true;
    c.expect_responders = Some(2);
    let out = run(&mut l, &clock, &c);
    assert_eq!(out.responders.len(), 2);
    // discovery took one round trip to the slower responder, not the 1 s timeout
    assert!(out.start_ns < 1_000_000 + 100_000, "{}", out.start_ns);
}

/// Stalls the pinger's thread once, in its `at`th wait for replies (as a preemption or a
/// page fault would): the clock jumps `stall_ns` before the wait returns.
struct StallingWait {
    inner: FakeLink,
    clock: FakeClock,
    waits: u64,
    at: u64,
    stall_ns: u64,
}

impl ProbeIo for StallingWait {
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.send(buf)
    }
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        let r = self.inner.recv_until(buf, deadline_ns);
        self.waits += 1;
        if self.waits == self.at {
            let now = wirebench_net::io::Clock::now_ns(&self.clock);
            self.clock.advance_to(now + self.stall_ns);
        }
        r
    }
}

#[test]
fn open_loop_corrects_for_coordinated_omission() {
    let (l, clock) = link(vec![responder(1, 25, 25)], 1);
    let mut io = StallingWait { inner: l, clock: clock.clone(), waits: 0, at: 1_000, stall_ns: 10_000_000 };
    let mut c = cfg(2_000, 100_000);
    c.pacing = Pacing::Rate(MsgRate::new(10_000.0).unwrap());
    let out = run(&mut io, &clock, &c);
    let r = &out.responders[0].stats;
    assert_eq!(r.received, 2_000);
    let unc = r.rtt_uncorrected.as_ref().unwrap();
    // Uncorrected: every probe took one round trip (52 us) once it was sent.
    assert!(unc.max() < 60_000, "{}", unc.max());
    // Corrected: the probe due when the stall began waited ~10 ms before it could go,
    // and the ~100 probes due during the stall waited less and less.
    assert!(r.rtt.max() >= 9_900_000, "{}", r.rtt.max());
    let delayed = r.rtt.count_between(1_000_000, u64::MAX);
    assert!((90..=101).contains(&delayed), "{delayed}");
    assert!(out.slip.max_ns() >= 9_900_000);
    // After the stall the sender catches up: the achieved rate is the requested one.
    let achieved = out.slip.achieved_per_sec().unwrap();
    assert!((achieved - 10_000.0).abs() < 10.0, "{achieved}");
}

/// Wakes `late_ns` after every wait that ended with nothing read, as a sleeping thread
/// woken late by its host does.
struct LateWake {
    inner: FakeLink,
    clock: FakeClock,
    late_ns: u64,
}

impl ProbeIo for LateWake {
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.send(buf)
    }
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        let r = self.inner.recv_until(buf, deadline_ns)?;
        if r.is_none() {
            let now = wirebench_net::io::Clock::now_ns(&self.clock);
            self.clock.advance_to(now + self.late_ns);
        }
        Ok(r)
    }
}

/// The sender's own lateness is measured probe by probe and kept apart: the corrected round
/// trip includes it, the lateness histogram says how much of it was the sender's.
#[test]
fn open_loop_measures_the_senders_own_lateness() {
    let (l, clock) = link(vec![responder(1, 25, 25)], 1);
    let mut io = LateWake { inner: l, clock: clock.clone(), late_ns: 40_000 };
    let mut c = cfg(2_000, 100_000);
    c.warmup = Stop { max_count: Some(100), deadline: None };
    c.pacing = Pacing::Rate(MsgRate::new(1_000.0).unwrap());
    let out = run(&mut io, &clock, &c);
    let r = &out.responders[0].stats;
    assert_eq!(r.received, 2_000);
    assert_eq!(out.lateness.len(), 2_000, "one per measured probe, the warm-up's not counted");
    let late = value_at_percentile(&out.lateness, 50.0);
    assert!(out.lateness.equivalent(late, 40_000), "{late}");
    assert!(out.lateness.equivalent(out.lateness.max(), 40_000), "{}", out.lateness.max());
    let (corrected, unc) =
        (value_at_percentile(&r.rtt, 50.0), value_at_percentile(r.rtt_uncorrected.as_ref().unwrap(), 50.0));
    assert!(r.rtt.equivalent(corrected, unc + 40_000), "{corrected} vs {unc} + 40 us");
}

#[test]
fn poisson_open_loop_follows_its_seeded_schedule_and_corrects_for_coordinated_omission() {
    let (l, clock) = link(vec![responder(1, 25, 25)], 1);
    let mut io = StallingWait { inner: l, clock: clock.clone(), waits: 0, at: 1_000, stall_ns: 10_000_000 };
    let mut c = cfg(2_000, 100_000);
    let rate = MsgRate::new(10_000.0).unwrap();
    c.pacing = Pacing::Poisson { rate, seed: 0x00C0_FFEE };
    let out = run(&mut io, &clock, &c);
    let r = &out.responders[0].stats;
    assert_eq!(r.received, 2_000);
    // Uncorrected, a probe took one round trip (52 us) once sent, except a reply that was in
    // flight when the wait stalled (Poisson gaps can be shorter than the round trip).
    let unc = r.rtt_uncorrected.as_ref().unwrap();
    assert!(unc.count_between(60_000, u64::MAX) <= 1, "{}", unc.count_between(60_000, u64::MAX));
    // Latency is from the intended (Poisson) send time: the stall shows as latency.
    assert!(r.rtt.max() >= 9_900_000, "{}", r.rtt.max());
    assert!(out.slip.max_ns() >= 9_900_000);
    let delayed = r.rtt.count_between(1_000_000, u64::MAX);
    assert!((40..=200).contains(&delayed), "{delayed}");
    // The sends follow the seeded schedule from the run's start: after the stall the sender
    // caught up, so the first and last sends are at probe 0's and probe 1999's intended
    // times, and the achieved rate is exactly that schedule's (not 10k/s to the digit).
    let mut times = PoissonTimes::new(out.start_ns, rate, 0x00C0_FFEE);
    let t: Vec<u64> = (0..2_000).map(|_| times.next_due()).collect();
    #[expect(clippy::cast_precision_loss, reason = "test arithmetic")]
    let want = 1_999e9 / (t[1_999] - t[0]) as f64;
    let achieved = out.slip.achieved_per_sec().unwrap();
    assert!((achieved - want).abs() < 1e-6, "{achieved} vs {want}");
    assert!((out.slip.scheduled_per_sec().unwrap() - want).abs() < 1e-6);
    assert!((achieved - 10_000.0).abs() > 1e-3, "a fixed period would give 10k/s exactly");
}

#[test]
fn one_way_delay_with_a_known_clock_offset() {
    let mut far = responder(1, 30, 10);
    far.clock_offset_ns = 3_000_000_000; // responder's clock 3 s ahead
    let (mut l, clock) = link(vec![far], 1);
    let mut c = cfg(1_000, 1_000);
    c.size = 48;
    let out = run(&mut l, &clock, &c);
    let st = &out.responders[0].stats;
    let ow = st.offset.result().expect("full-form probes give an estimate");
    // The path is asymmetric (30 us out, 10 us back); the estimate cannot know that, but
    // must stay within its bound, half the network round trip.
    assert_eq!(ow.bound_ns, 20_000);
    let within = |est: u64, truth: u64| est.abs_diff(truth) <= ow.bound_ns + 100;
    assert!(within(ow.forward.p50_ns, 30_000), "{ow:?}");
    assert!(within(ow.reverse.p50_ns, 10_000), "{ow:?}");
    assert!((ow.offset_ns - 3_000_000_000).unsigned_abs() <= ow.bound_ns);
    // dwell is subtracted: the network round trip is 40 us, the full one 42 us
    assert!(value_at_percentile(&st.network, 50.0).abs_diff(40_000) < 100);
    assert!(value_at_percentile(&st.dwell, 50.0).abs_diff(2_000) < 10);
}

#[test]
fn nobody_answers_is_an_error_within_the_timeout() {
    let (mut l, clock) = link(vec![responder(1, 10, 10)], 1);
    l.loss = 1.0;
    let err = engine::run(&mut l, &clock, &cfg(10, 500_000), &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(err, EngineError::NoResponder { refused: false }));
    let waited = wirebench_net::io::Clock::now_ns(&clock) - 1_000_000;
    assert_eq!(waited, 500_000_000, "gave up exactly at the timeout");
}

/// Delivers normally until send number `dies_at`, then drops everything.
struct DyingPeer {
    inner: FakeLink,
    sends: u64,
    dies_at: u64,
}

impl ProbeIo for DyingPeer {
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        self.sends += 1;
        if self.sends >= self.dies_at {
            self.inner.loss = 1.0;
        }
        self.inner.send(buf)
    }
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        self.inner.recv_until(buf, deadline_ns)
    }
}

#[test]
fn a_peer_that_goes_silent_ends_the_run_with_what_was_measured() {
    let (l, clock) = link(vec![responder(1, 10, 10)], 1);
    let mut io = DyingPeer { inner: l, sends: 0, dies_at: 301 };
    let mut c = cfg(1_000_000, 1_000);
    c.silence_ns = Duration::from_millis(5).as_nanos() as u64;
    let out = run(&mut io, &clock, &c);
    assert_eq!(out.outcome, Outcome::PeerSilent);
    let r = &out.responders[0];
    assert_eq!(r.stats.received, 299, "sends 2..=300 were answered");
    // it gave up after about 5 ms of silence (five 1 ms timeouts), not after a million probes
    assert!(out.sent < 310, "{}", out.sent);
    let Some(GaveUp::Silence { for_ns }) = out.gave_up else { panic!("{:?}", out.gave_up) };
    assert!((5_000_000..=6_100_000).contains(&for_ns), "{for_ns}");
    let stopped = r.stopped.expect("it stopped answering");
    assert_eq!(stopped.unanswered, out.sent - 299);
}
