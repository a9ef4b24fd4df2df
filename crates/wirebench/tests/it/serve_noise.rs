//! Serve under a storm of bad datagrams while a ping runs: 100,000 random, truncated,
//! foreign-version, reply-kind and stale-session datagrams. The ping's results are
//! unaffected, serve's counters match what was sent, nothing crashes.

use std::net::UdpSocket;
use std::time::Instant;

use wirebench::serve::{CounterSnapshot, Server};
use wirebench_core::report::{Report, Results};
use wirebench_core::rng::SplitMix64;
use wirebench_core::wire::probe;

use crate::support::{read_json, serve, wirebench};

#[derive(Default, Debug)]
struct Sent {
    random: u64,
    truncated: u64,
    version: u64,
    reply_kind: u64,
    stale: u64,
}

impl Sent {
    fn total(&self) -> u64 {
        self.random + self.truncated + self.version + self.reply_kind + self.stale
    }
}

/// Bad datagrams serve has dropped so far (the ping adds nothing here).
fn dropped(c: &CounterSnapshot) -> u64 {
    c.malformed + c.foreign + c.bad_version + c.unexpected_kind
}

/// Sends `n` bad datagrams to `srv`, waiting for serve to catch up every 50 so the storm
/// never overflows its receive buffer (which would drop the ping's probes too: each small
/// datagram costs about 1 KiB of the default 208 KiB).
fn storm(srv: &Server, n: u64) -> Sent {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(srv.local_addr()).unwrap();
    let mut rng = SplitMix64::new(99);
    let mut sent = Sent::default();
    sock.set_nonblocking(true).unwrap();
    let mut echo = [0u8; 128];
    let mut echoes = 0u64;
    let mut good = vec![0u8; 64];
    probe::init(&mut good, 0xDEAD_BEEF, 0);
    for i in 0..n {
        let mut d: Vec<u8>;
        match i % 5 {
            0 => {
                d = (0..(rng.next_u64() % 200)).map(|_| rng.next_u64() as u8).collect();
                if d.len() >= 2 && d[0] == 0x57 && d[1] == 0x42 {
                    d[0] = 0;
                }
                if d.len() < 4 {
                    sent.truncated += 1; // too short to tell: malformed
                } else {
                    sent.random += 1;
                }
            }
            1 => {
                let cut = 4 + (rng.next_u64() % 28) as usize;
                d = good[..cut].to_vec();
                sent.truncated += 1;
            }
            2 => {
                d = good.clone();
                d[2] = 9;
                sent.version += 1;
            }
            3 => {
                d = good.clone();
                probe::make_reply(&mut d, 1, || 2);
                sent.reply_kind += 1;
            }
            _ => {
                d = good.clone();
                probe::stamp(&mut d, i, 0);
                sent.stale += 1;
            }
        }
        sock.send(&d).unwrap();
        if i % 50 == 49 {
            let t0 = Instant::now();
            // Serve has taken everything sent so far: it dropped every bad datagram, and
            // every stale probe came back here.
            while dropped(&srv.counters()) < sent.total() - sent.stale || echoes < sent.stale {
                assert!(t0.elapsed().as_secs() < 30, "serve stopped taking datagrams");
                if sock.recv(&mut echo).is_ok() {
                    echoes += 1;
                }
            }
        }
    }
    sent
}

#[test]
fn a_storm_of_bad_datagrams_does_not_disturb_a_ping() {
    let srv = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("storm.json");
    let target = srv.local_addr().to_string();
    let (run, sent) = std::thread::scope(|s| {
        let ping = s.spawn(|| {
            wirebench(&["ping", &target, "--count", "20000", "--warmup", "0", "--json", json.to_str().unwrap()])
        });
        let sent = storm(&srv, 100_000);
        (ping.join().unwrap(), sent)
    });
    let c = srv.stop();
    assert_eq!(run.code, 0, "{run:?}");
    let report: Report = serde_json::from_value(read_json(&json)).unwrap();
    let Results::Ping(p) = report.results else { panic!("ping results") };
    let r = &p.responders[0];
    assert_eq!((p.sent, r.received, r.lost, r.duplicates), (20_000, 20_000, 0, 0), "{r:?} {c:?} {sent:?}");
    assert_eq!(p.ignored, 0, "stale replies went to the storm's socket, not the ping's");
    // Serve's counters match exactly what each kind of datagram should give.
    assert_eq!(c.foreign, sent.random, "{c:?} {sent:?}");
    assert_eq!(c.malformed, sent.truncated, "{c:?} {sent:?}");
    assert_eq!(c.bad_version, sent.version);
    assert_eq!(c.unexpected_kind, sent.reply_kind);
    // Stale-session probes are valid probes: answered to their sender, never to the ping.
    let ping_probes = c.udp_probes - sent.stale;
    assert!((p.sent + p.warmup_sent + 1..=p.sent + p.warmup_sent + 4).contains(&ping_probes), "{c:?}");
    assert_eq!(c.send_errors, 0);
}
