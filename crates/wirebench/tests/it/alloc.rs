//! The measured loop allocates nothing per probe: a counting allocator (per thread, so
//! serve's threads and other tests do not count) sees the same number of allocations for
//! 1,000 and for 10,000 probes; the stall meter likewise per wake-up.

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
    let clock = MonoClock::default();
    let mut io = UdpProbeIo::unicast(target, Wait::Block, Duration::from_secs(1)).unwrap();
    if stamps {
        io.enable_timestamps().unwrap();
    }
    let cfg = EngineConfig {
        size: 64,
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
    let rec = wirebench::hiccup::record_until(interval, &stop, until);
    let after = thread_allocations();
    assert!(rec.wakeups() > 0);
    drop(rec);
    after - before
}

#[test]
fn the_stall_meter_allocates_nothing_per_wakeup() {
    // its histograms and a hour of series are allocated up front: the same count for 300
    // wake-ups as for 3,000
    assert_eq!(meter_allocations(300), meter_allocations(3_000), "allocations grew with the wake-ups");
}
