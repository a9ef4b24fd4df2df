//! The relay's sends meeting a full send buffer, for real: a socket with the smallest
//! `SO_SNDBUF` behind a slow `tbf` on its own veth (the queued datagrams stay charged to the
//! socket, so `sendmmsg` meets `EAGAIN` after a handful). A batch must wait for room and
//! resume where it stopped: every copy delivered once, in order, every full-buffer call
//! waited out (the first version stepped one message at a time and lost every copy after the first
//! `EAGAIN`: up to 32 x peers calls and most of the batch gone). And the relay itself: a
//! re-emitted batch's runs (one per emitting socket) share one wait, so a burst from many
//! senders behind a full buffer holds the loop up for 20 ms a batch, not 20 ms a run.

#![cfg(feature = "netns-tests")]

use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use nix::sys::socket::{setsockopt, sockopt::SndBuf};
use wirebench_net::fanout::{Burst, FAN_BATCH, FanOut, SendWait};

use crate::lab::{Lab, sh};
use crate::multicast_relay::in_ns;

fn v4(s: &UdpSocket) -> SocketAddrV4 {
    match s.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        std::net::SocketAddr::V6(_) => unreachable!(),
    }
}

/// Reads `n` datagrams from `rx` (5 s each at most) and checks they are `0..n` in order,
/// then that nothing else came.
fn expect_in_order(rx: &UdpSocket, n: usize, what: &str) {
    rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 512];
    for _ in 0..n {
        let len = rx.recv(&mut b).unwrap_or_else(|e| panic!("{what}: datagram {} of {n} missing: {e}", got.len()));
        assert_eq!(len, 200, "{what}");
        got.push(u64::from_be_bytes(b[..8].try_into().unwrap()));
    }
    assert_eq!(got, (0..n as u64).collect::<Vec<_>>(), "{what}: each once, in order");
    rx.set_nonblocking(true).unwrap();
    assert!(rx.recv(&mut b).is_err(), "{what}: nothing more");
}

#[test]
fn a_full_send_buffer_delays_a_batch_and_loses_nothing() {
    let mut lab = Lab::new("rsb");
    let a = lab.ns("a");
    let b = lab.ns("b");
    Lab::link(&a, "eth0", "10.77.231.1/24", &b, "eth0", Some("10.77.231.2/24"));
    // 2 Mbit/s: about a millisecond per datagram; a queue of a second, so the qdisc never
    // drops (the socket's buffer fills first and pushes back).
    sh(&[
        "tc", "-n", &a, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "2mbit", "burst", "3000", "latency", "1s",
    ]);
    let rx: Vec<UdpSocket> = in_ns(&b, || (0..2).map(|_| UdpSocket::bind("10.77.231.2:0").unwrap()).collect());
    let dests: Vec<SocketAddrV4> = rx.iter().map(v4).collect();
    let tx = in_ns(&a, || {
        let s = UdpSocket::bind("10.77.231.1:0").unwrap();
        // The kernel raises it to its minimum (about 4.6 KB: a few datagrams).
        setsockopt(&s, SndBuf, &1).unwrap();
        s
    });
    let bufs: Vec<Vec<u8>> = (0..FAN_BATCH as u64)
        .map(|k| {
            let mut d = vec![0u8; 200];
            d[..8].copy_from_slice(&k.to_be_bytes());
            d
        })
        .collect();
    let all: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
    let stop = AtomicBool::new(false);
    let wait = SendWait { budget: Duration::from_secs(10), stop: &stop };

    // The fan-out: 32 datagrams to two peers, 64 copies.
    let mut fan = FanOut::new(&dests);
    assert_eq!(fan.send_batch(&tx, &all, wait), 2 * FAN_BATCH, "{:?}", fan.stats());
    assert!((0..FAN_BATCH).all(|k| !fan.failed_at(k, 0) && !fan.failed_at(k, 1)));
    let st = fan.stats();
    assert!(st.waits > 0, "the buffer was full at least once (else this test shows nothing): {st:?}");
    // How many calls a wait takes depends on when the qdisc frees room (a partial send ends
    // at the full buffer without an error, and a datagram may leave between two calls while
    // this thread is descheduled: two sending calls for one wait), so the exact count is
    // asserted against a scripted kernel
    // (`fanout::tests::a_full_buffer_waits_and_resumes_at_the_message_that_did_not_go`).
    assert_eq!(st.full, 0);
    for (i, r) in rx.iter().enumerate() {
        expect_in_order(r, FAN_BATCH, &format!("fan-out to peer {i}"));
    }

    // The re-emission's burst to one address: the same rules.
    let mut burst = Burst::default();
    rx[0].set_nonblocking(false).unwrap();
    assert_eq!(burst.send(&tx, &all, dests[0], wait), FAN_BATCH, "{:?}", burst.stats());
    let st = burst.stats();
    assert!(st.waits > 0 && st.full == 0, "{st:?}");
    expect_in_order(&rx[0], FAN_BATCH, "burst");

    // A stop during a wait ends it at once: the rest of the batch fails as a whole (one
    // count), and the call returns well before its 10 s budget.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    let sent = fan.send_batch(&tx, &all, wait);
    let st = fan.stats();
    assert!(sent < 2 * FAN_BATCH && st.full == 2 * FAN_BATCH - sent && st.waits == 0, "{sent} {st:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    drop(lab);
}

/// The re-emission's runs share their batch's wait. A batch of 32 datagrams from two
/// original senders in turn is 32 runs on two emitting sockets; with both sockets' buffers
/// full (a group interface that sends 1 kB/s), the first version gave each run its own
/// 20 ms (640 ms a batch, 5 s for the 8 batches of one drain) while the loop read nothing
/// else, so a local datagram queued behind the burst waited seconds to be forwarded. Now a
/// batch waits 20 ms in all, and the local datagram goes out after at most a drain or two
/// (8 batches each: well under a second).
#[test]
fn a_reemitted_batch_of_many_senders_waits_once_in_all_for_full_buffers() {
    use crate::multicast_relay::{Proc, relay_args, relay_results};
    use wirebench_core::wire::relay::{self as wire, Header, RelayKind};
    const BURST: u64 = 512;

    let mut lab = Lab::new("rsr");
    let relay_ns = lab.ns("r");
    let peer_ns = lab.ns("p");
    // The peer's side: a plain veth.
    Lab::link(&relay_ns, "eth0", "10.77.233.1/24", &peer_ns, "eth0", Some("10.77.233.2/24"));
    // The group's side: a veth to a third namespace, whose qdisc sends 1 kB/s and queues
    // 10 MB, so the emitting sockets' buffers fill after a few dozen datagrams and stay full.
    let group_ns = lab.ns("g");
    Lab::link(&relay_ns, "grp0", "10.77.234.1/24", &group_ns, "eth0", Some("10.77.234.2/24"));
    sh(&[
        "tc", "-n", &relay_ns, "qdisc", "add", "dev", "grp0", "root", "tbf", "rate", "8kbit", "burst", "1600", "limit",
        "10000000",
    ]);
    let group = "239.255.79.33:5233";
    let gaddr: SocketAddrV4 = group.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let relay = Proc::start(
        &relay_ns,
        &relay_args("10.77.234.1", "10.77.233.2:7880", &[group], json.to_str().unwrap()),
        "relay listening",
    );
    let peer = in_ns(&peer_ns, || UdpSocket::bind("10.77.233.2:7880").unwrap());
    let local = in_ns(&relay_ns, move || {
        let s = UdpSocket::bind("10.77.234.1:0").unwrap();
        let o = wirebench_net::multicast::SenderOpts {
            interface: Some("10.77.234.1".parse().unwrap()),
            ttl: 1,
            loopback: true,
        };
        wirebench_net::multicast::set_sender(&s, gaddr.into(), &o).unwrap();
        s
    });

    // The burst: 512 datagrams of 4,000 bytes (3 fragments each on the group's side) from
    // two original senders in turn, then one local datagram into the group.
    let target: SocketAddrV4 = "10.77.233.1:7880".parse().unwrap();
    let mut buf = vec![0u8; 8192];
    let payload = vec![0x5au8; 4000];
    for seq in 0..BURST {
        let sender = SocketAddrV4::new("10.77.233.2".parse().unwrap(), 4000 + u16::try_from(seq % 2).unwrap());
        let h = Header { kind: RelayKind::Data, origin: 7, seq, wall_ns: 1, group: gaddr, sender };
        let n = wire::encode(&mut buf, &h, &payload, None).unwrap();
        peer.send_to(&buf[..n], target).unwrap();
    }
    let t0 = std::time::Instant::now();
    local.send_to(b"behind the burst", gaddr).unwrap();

    // The local datagram, forwarded to the peer.
    let deadline = t0 + Duration::from_secs(60);
    let took = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "the local datagram is forwarded within 60 s");
        peer.set_read_timeout(Some(left)).unwrap();
        let Ok(n) = peer.recv(&mut buf) else { continue };
        let d = wire::decode(&buf[..n]).unwrap();
        if d.header.kind == RelayKind::Data && d.payload == b"behind the burst" {
            break t0.elapsed();
        }
    };
    let text = relay.stop();
    let grp = &relay_results(&json).groups[0];
    assert!(
        grp.drops.send_errors > 0,
        "the emitting sockets' buffers were full (else this test shows nothing): {text}"
    );
    assert!(grp.reemitted.datagrams + grp.drops.send_errors <= BURST, "{text}");
    assert_eq!(grp.forwarded.datagrams, 1, "{text}");
    // 20 ms a batch, at most two drains of 8 batches before the group's turn: 320 ms; the
    // first version: 32 x 20 ms a batch, seconds.
    assert!(took < Duration::from_secs(2), "forwarded {took:?} after the burst: the loop was held up\n{text}");
    drop(lab);
}
