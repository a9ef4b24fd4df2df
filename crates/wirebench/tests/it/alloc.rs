//! The measured loop allocates nothing per probe: a counting allocator (per thread, so
//! serve's threads and other tests do not count) sees the same number of allocations for
//! 1,000 and for 10,000 probes; the stall meter likewise per wake-up, the stream receiver per
//! datagram (with its kernel RX stamps).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use wirebench::ping::engine::{self, EngineConfig};
use wirebench_core::schedule::{Pacing, Stop};
use wirebench_core::units::MsgRate;
use wirebench_net::alloc_count::{Counting, thread_allocations};
use wirebench_net::clock::MonoClock;
use wirebench_net::udp::{UdpProbeIo, Wait};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_for(count: u64, pacing: Pacing, target: std::net::SocketAddr) -> u64 {
    allocations_with(count, pacing, target, false)
}

fn allocations_with(count: u64, pacing: Pacing, target: std::net::SocketAddr, stamps: bool) -> u64 {
    allocations_of(count, pacing, target, stamps, None)
}

fn allocations_of(
    count: u64,
    pacing: Pacing,
    target: std::net::SocketAddr,
    stamps: bool,
    stamp: Option<wirebench_core::wire::stamp::Sender>,
) -> u64 {
    let clock = MonoClock::default();
    let mut io = UdpProbeIo::unicast(target, Wait::Block, Duration::from_secs(1)).unwrap();
    if stamps {
        io.enable_timestamps().unwrap();
    }
    let cfg = EngineConfig {
        size: if stamp.is_some() { 112 } else { 64 },
        flags: 0,
        session: 42,
        pacing,
        warmup: Stop::default(),
        stop: Stop { max_count: Some(count), deadline: None },
        timeout_ns: 1_000_000_000,
        multicast: false,
        expect_responders: None,
        wall_minus_mono: 0,
        silence_ns: 5_000_000_000,
        intervals: false,
        cpu_probe: wirebench_net::pin::current_cpu,
        stamp,
    };
    let before = thread_allocations();
    let out = engine::run(&mut io, &clock, &cfg, &AtomicBool::new(false)).unwrap();
    let after = thread_allocations();
    // Replies may be lost on a busy loopback (other tests run in parallel); what matters
    // here is that every probe was sent and every reply that came was accounted.
    assert_eq!(out.sent, count);
    after - before
}

#[test]
fn closed_loop_allocates_nothing_per_probe() {
    let srv = crate::support::serve();
    let a = allocations_for(1_000, Pacing::Closed, srv.local_addr());
    let b = allocations_for(10_000, Pacing::Closed, srv.local_addr());
    srv.stop();
    assert_eq!(a, b, "allocations grew with the probe count");
}

/// STAMP in authenticated mode: each packet is signed and each reflection checked (a keyed
/// HMAC state cloned on the stack), with kernel timestamps on.
#[test]
fn authenticated_stamp_allocates_nothing_per_probe() {
    use wirebench::stamp::StampConfig;
    use wirebench_core::wire::stamp::{ErrorEstimate, Key, Sender, TsFormat};
    let key = Key::new(&[5u8; 32]).unwrap();
    let cfg = wirebench::serve::Config {
        stamp: Some(StampConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            key: Some(key.clone()),
            stateful: false,
            format: TsFormat::Ntp,
            allow: Vec::new(),
            max_rate: None,
        }),
        ..wirebench::serve::Config::loopback()
    };
    let srv = wirebench::serve::Server::start(&cfg, wirebench::shutdown::Shutdown::new()).unwrap();
    let target = srv.stamp_addr().unwrap();
    let sender = Sender { key: Some(key), format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 9 };
    let a = allocations_of(1_000, Pacing::Closed, target, true, Some(sender.clone()));
    let b = allocations_of(10_000, Pacing::Closed, target, true, Some(sender));
    let c = srv.stop();
    assert!(c.stamp_reflected >= 11_000, "the reflector answered: {c}");
    assert_eq!(a, b, "allocations grew with the probe count");
}

#[test]
fn kernel_timestamps_allocate_nothing_per_probe() {
    // full-form probes: serve stamps t2 with its kernel time, the pinger reads RX stamps
    // with each reply and TX stamps from the error queue
    let srv = crate::support::serve();
    let a = allocations_with(1_000, Pacing::Closed, srv.local_addr(), true);
    let b = allocations_with(10_000, Pacing::Closed, srv.local_addr(), true);
    srv.stop();
    assert_eq!(a, b, "allocations grew with the probe count");
}

#[test]
fn open_loop_allocates_nothing_per_probe() {
    let srv = crate::support::serve();
    let rate = Pacing::Rate(MsgRate::new(5_000.0).unwrap());
    let a = allocations_for(1_000, rate, srv.local_addr());
    let b = allocations_for(10_000, rate, srv.local_addr());
    srv.stop();
    assert_eq!(a, b, "allocations grew with the probe count");
}

fn meter_allocations(wakeups: u64) -> u64 {
    let interval = 100_000;
    let until = wirebench_net::timer::mono_now_ns() + wakeups * interval;
    let stop = AtomicBool::new(false);
    let before = thread_allocations();
    let rec = wirebench::stall::record_until(interval, &stop, until);
    let after = thread_allocations();
    assert!(rec.wakeups() > 0);
    drop(rec);
    after - before
}

#[test]
fn reading_a_threads_schedstat_allocates_only_its_path() {
    // The stall meter reads it at its start and end: an allocation count that varied with the
    // line's length (read_to_string grew its string past 32 bytes) made the meter's count
    // depend on the host's load.
    let me = wirebench_net::rusage::thread_id();
    for _ in 0..3 {
        let before = thread_allocations();
        assert!(wirebench_net::rusage::task_sched(me).is_some());
        assert_eq!(thread_allocations() - before, 1, "the path, and nothing for the line");
    }
}

#[test]
fn the_stall_meter_allocates_nothing_per_wakeup() {
    // its histograms and a hour of series are allocated up front: the same count for 300
    // wake-ups as for 3,000
    assert_eq!(meter_allocations(300), meter_allocations(3_000), "allocations grew with the wake-ups");
}

/// The stream receive loop with kernel RX stamps on (serve's and the reverse client's):
/// `n` 64-byte stream datagrams queued up front, read until all arrived (so no thread races
/// the drain).
fn stream_receiver_allocations(n: u64) -> u64 {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use wirebench::flow::recv::{self, Accounts, Progress};
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    wirebench_net::batch::size_buffers(&sock, 16 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.connect(sock.local_addr().unwrap()).unwrap();
    let mut rx = wirebench_net::batch::UdpBatchReceiver::new(sock);
    assert!(recv::stamp_rx(&mut rx));
    let mut m = [0u8; 64];
    wirebench_core::wire::stream::init(&mut m, 7, 0);
    for seq in 0..n {
        wirebench_core::wire::stream::stamp(&mut m, seq, 1);
        tx.send(&m).unwrap();
    }
    let p = Arc::new(Progress::default());
    p.expected.store(n, Ordering::Relaxed);
    p.finish.store(true, Ordering::Relaxed);
    let mut acc = Accounts::new(7, 1);
    acc.wake = wirebench_core::stream::wake::WakeRecorder::new(true);
    let before = thread_allocations();
    recv::udp(&mut rx, &mut acc, &p, &AtomicBool::new(false)).unwrap();
    let after = thread_allocations();
    assert_eq!(acc.received(), n, "every queued datagram read");
    let w = acc.wake.summary();
    assert_eq!((w.stamped + w.unstamped, w.after_read), (n, 0), "{w:?}");
    after - before
}

#[test]
fn the_stream_receiver_with_rx_stamps_allocates_nothing_per_datagram() {
    // few enough to sit queued in the default receive buffer (no root needed)
    assert_eq!(
        stream_receiver_allocations(50),
        stream_receiver_allocations(200),
        "allocations grew with the datagrams"
    );
}

/// What a mesh agent does per probe to a `stamp:` peer beside the window accounting: restamp
/// the kept test packet (and sign it, authenticated) and read the reflection (its HMAC
/// checked): nothing allocated, in either mode.
#[test]
fn a_stamp_peers_probe_and_reflection_allocate_nothing() {
    use wirebench_core::wire::stamp::{AUTH_LEN, ErrorEstimate, Key, Reflector, Sender, TsFormat, base_len};
    for key in [None, Key::new(&[7; 16])] {
        let s = Sender { key: key.clone(), format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 9 };
        let r = Reflector { key, format: TsFormat::Ntp, error: ErrorEstimate(1) };
        let len = base_len(s.key.is_some());
        let (mut pkt, mut out) = ([0u8; AUTH_LEN], [0u8; AUTH_LEN]);
        s.init(&mut pkt[..len]);
        let mut codec = 0;
        for seq in 0..1_000u32 {
            let t1 = 1_800_000_000_000_000_000 + u64::from(seq);
            let before = thread_allocations();
            s.stamp(&mut pkt[..len], seq, t1);
            codec += thread_allocations() - before;
            r.reflect(&pkt[..len], &mut out, seq, t1 + 1, 64, || t1 + 2).unwrap();
            let before = thread_allocations();
            let back = s.parse(&out[..len]).unwrap();
            codec += thread_allocations() - before;
            assert_eq!(back.sender_seq, seq);
        }
        assert_eq!(codec, 0, "allocations in the STAMP sender's per-probe path");
    }
}
