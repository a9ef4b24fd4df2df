use super::*;
use crate::relay::CLOSED_PORT_HORIZON_NS;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const GROUP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 255, 0, 1), 5000);
const ME: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 5), 7880);
const APP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 7), 40_000);

/// A relay on 10.0.0.5 relaying `GROUP`: emitting sockets on ports 50,000 to 50,009, peers
/// 10.0.0.3 and 10.0.0.9 (port 7880), the given mates and cap.
struct Relay {
    own_ports: EmitPorts,
    peers: PeerSlots,
    mates: Mates,
    rate: RateCap,
    key: Option<Key>,
    relaying: bool,
    force: bool,
}

impl Relay {
    fn new() -> Self {
        let mut peers = PeerSlots::new(8, 60 * S);
        let listed = [3, 9].map(|last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7880));
        peers.set_list(&listed, 0);
        let mut own_ports = EmitPorts::default();
        (50_000..50_010).for_each(|p| own_ports.opened(p));
        Self {
            own_ports,
            peers,
            mates: Mates::default(),
            rate: RateCap::new(1_000),
            key: None,
            relaying: true,
            force: false,
        }
    }

    fn judge(&mut self, src: SocketAddrV4, data: &[u8], now: u64) -> Local {
        let mut v = LocalView {
            me: ME,
            interface: *ME.ip(),
            group: GROUP,
            own_ports: &self.own_ports,
            peers: &self.peers,
            key: self.key.as_ref(),
            relaying: self.relaying,
            force: self.force,
            mates: &self.mates,
            rate: &mut self.rate,
        };
        judge(&mut v, src, data, now)
    }

    /// What the relay's loop does on a probe it judged: the prober is a segment mate.
    fn heard(&mut self, src: SocketAddrV4, data: &[u8], now: u64) -> Local {
        let l = self.judge(src, data, now);
        if let Local::Probe(p) = l {
            self.mates.probed(src, p.origin, p.seq, now);
        }
        l
    }
}

fn probe(group: SocketAddrV4, seq: u64, key: Option<&Key>) -> Vec<u8> {
    let h = Header {
        kind: RelayKind::Probe,
        origin: 42,
        seq,
        wall_ns: 1,
        group,
        sender: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
    };
    let mut out = vec![0; 256];
    let n = wire::encode(&mut out, &h, &[], key).unwrap();
    out.truncate(n);
    out
}

/// A mate with a lower address on the segment carries the group: the relay is passive from
/// its first probe until it has been silent for the mate TTL, then forwards again. A mate
/// with a higher address changes nothing.
#[test]
fn a_lower_mate_carries_the_group_until_it_falls_silent() {
    let mut r = Relay::new();
    assert_eq!(r.judge(APP, b"app", S), Local::Forward);
    let low = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 7880);
    let high = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7880);
    assert!(matches!(r.heard(high, &probe(GROUP, 1, None), S), Local::Probe(_)));
    assert_eq!(r.judge(APP, b"app", S + MS), Local::Forward, "a higher mate: still ours");
    assert!(matches!(r.heard(low, &probe(GROUP, 1, None), 2 * S), Local::Probe(_)));
    assert_eq!(r.judge(APP, b"app", 2 * S + MS), Local::Passive);
    assert_eq!(r.judge(APP, b"app", 2 * S + MATE_TTL_NS), Local::Passive, "alive to the TTL");
    assert_eq!(r.judge(APP, b"app", 2 * S + MATE_TTL_NS + 1), Local::Forward, "silent past it");
    // its probe again: passive again; a replay of an old one does not count
    assert!(matches!(r.heard(low, &probe(GROUP, 2, None), 10 * S), Local::Probe(_)));
    assert_eq!(r.judge(APP, b"app", 10 * S + MS), Local::Passive);
    r.heard(low, &probe(GROUP, 2, None), 10 * S + MATE_TTL_NS);
    assert_eq!(r.judge(APP, b"app", 10 * S + MATE_TTL_NS + 2), Local::Forward, "a replayed probe keeps no one");
}

/// What comes back from this relay is never forwarded: its probe, and its emitting
/// sockets' datagrams, open ones and, for the horizon, closed ones (their loopback copies
/// may still wait in the group socket). The same port on another host is an application's.
#[test]
fn what_the_relay_sent_is_not_forwarded_again() {
    let mut r = Relay::new();
    assert_eq!(r.judge(ME, b"anything", S), Local::Own);
    let emitter = SocketAddrV4::new(*ME.ip(), 50_003);
    assert_eq!(r.judge(emitter, b"x", S), Local::Looped);
    r.own_ports.closed(50_003, S);
    assert_eq!(r.judge(emitter, b"x", S + CLOSED_PORT_HORIZON_NS - 1), Local::Looped, "closed, within the horizon");
    assert_eq!(r.judge(emitter, b"x", S + CLOSED_PORT_HORIZON_NS), Local::Forward, "past it: a local sender's");
    let other_port = SocketAddrV4::new(*ME.ip(), 40_001);
    let later = S + CLOSED_PORT_HORIZON_NS + MS;
    assert_eq!(r.judge(other_port, b"x", later), Local::Forward, "a local sender's");
    let other_host = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 8), 50_004);
    assert_eq!(r.judge(other_host, b"x", later), Local::Forward, "another host's datagram");
}

/// Relay datagrams are never forwarded; a probe counts only from a listed peer, for this
/// group, with the MAC the relays share.
#[test]
fn relay_datagrams_are_never_forwarded() {
    let mut r = Relay::new();
    let peer = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 7880);
    let stranger = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 4), 7880);
    assert_eq!(r.judge(stranger, &probe(GROUP, 1, None), S), Local::Relay);
    let other_group = SocketAddrV4::new(Ipv4Addr::new(239, 255, 0, 2), 5000);
    assert_eq!(r.judge(peer, &probe(other_group, 1, None), S), Local::Relay);
    let key = Key::new(b"shared");
    r.key = Some(Key::new(b"shared"));
    assert_eq!(r.judge(peer, &probe(GROUP, 1, None), S), Local::Relay, "no MAC");
    assert_eq!(r.judge(peer, &probe(GROUP, 1, Some(&Key::new(b"other"))), S), Local::Relay, "another key");
    assert!(matches!(r.judge(peer, &probe(GROUP, 1, Some(&key)), S), Local::Probe(h) if h.seq == 1));
    let mut v2 = probe(GROUP, 1, None);
    v2[2] = wire::VERSION + 1;
    assert_eq!(r.judge(peer, &v2, S), Local::OtherVersion(wire::VERSION + 1));
}

/// Before the startup check ends nothing is forwarded; then each group is capped (a burst
/// of a tenth of a second, at least 16), and too big a datagram is refused before the cap.
#[test]
fn the_check_the_size_and_the_cap_hold_datagrams_back() {
    let mut r = Relay::new();
    r.relaying = false;
    assert_eq!(r.judge(APP, b"app", S), Local::Checking);
    r.relaying = true;
    r.rate = RateCap::new(100);
    assert_eq!(r.judge(APP, &vec![0; MAX_PAYLOAD + 1], S), Local::TooBig);
    let passed = (0..40).filter(|_| r.judge(APP, b"app", S) == Local::Forward).count();
    assert_eq!(passed, 16, "the burst");
    assert_eq!(r.judge(APP, b"app", S), Local::RateCapped);
    assert_eq!(r.judge(APP, b"app", S + 10 * MS), Local::Forward, "a token 10 ms later");
    assert_eq!(r.judge(APP, b"app", S + 10 * MS), Local::RateCapped);
}

/// `--force` carries the group whoever else is on the segment: a lower mate's probes leave
/// it forwarding.
#[test]
fn a_forced_relay_carries_the_group_beside_a_lower_mate() {
    let mut r = Relay::new();
    r.force = true;
    let low = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 7880);
    assert!(matches!(r.heard(low, &probe(GROUP, 1, None), S), Local::Probe(_)));
    assert_eq!(r.judge(APP, b"app", S + MS), Local::Forward);
    assert!(carries(&r.mates, ME, true, S + MS));
    assert!(!carries(&r.mates, ME, false, S + MS), "unforced: the lower mate's");
}

/// The largest datagram a relay datagram can carry is forwarded; one byte more is not.
#[test]
fn a_datagram_of_the_largest_payload_is_forwarded() {
    let mut r = Relay::new();
    assert_eq!(r.judge(APP, &vec![0; MAX_PAYLOAD], S), Local::Forward);
    assert_eq!(r.judge(APP, &vec![0; MAX_PAYLOAD + 1], S), Local::TooBig);
}

/// A mate is gone once it missed three probes: alive until three probe intervals after it
/// was last heard, gone by the fourth (whatever slack the TTL gives a late probe).
#[test]
fn a_mate_is_gone_after_three_missed_probes() {
    let mut r = Relay::new();
    let low = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 7880);
    assert!(matches!(r.heard(low, &probe(GROUP, 1, None), S), Local::Probe(_)));
    assert_eq!(r.judge(APP, b"app", S + 3 * PROBE_EVERY_NS - 1), Local::Passive);
    assert_eq!(r.judge(APP, b"app", S + 4 * PROBE_EVERY_NS), Local::Forward);
}
