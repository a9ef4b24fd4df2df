#![allow(
    clippy::cast_possible_truncation,
    clippy::many_single_char_names,
    reason = "a simulation on small known values"
)]

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::*;
use crate::rng::SplitMix64;

#[test]
fn a_room_of_three_by_hand() {
    // clients 0, 1, 2 in one room; 3 alone in the next
    let b = Book::new(4, 3);
    for c in 0..3 {
        b.joining(c);
        b.joined(c, 10);
    }
    assert_eq!(b.on_relayed_send(0, 0, 10), 0, "sent in the µs they joined: nobody expects it");
    assert_eq!(b.on_relayed_send(0, 0, 11), 2);
    assert_eq!(b.on_relayed_send(0, 1, 12), 2);
    assert_eq!(b.on_relayed_send(0, 2, 13), 2);
    b.on_request_send(1, 0);
    assert_eq!(b.on_arrival(1, Some(0), Some(0), 11, false), Verdict::Expected);
    assert_eq!(b.on_arrival(1, Some(0), Some(2), 13, false), Verdict::Expected, "seq 1 skipped: a gap");
    assert_eq!(b.on_arrival(2, Some(0), Some(0), 11, false), Verdict::Expected);
    assert_eq!(b.on_arrival(2, Some(0), Some(0), 10, false), Verdict::Unexpected, "before it joined");
    assert_eq!(b.on_arrival(2, Some(3), Some(0), 11, false), Verdict::Unexpected, "another room");
    assert_eq!(b.on_arrival(0, Some(0), Some(3), 14, false), Verdict::Unexpected, "an echo of a relayed type");
    assert_eq!(b.on_arrival(2, Some(1), Some(0), 14, true), Verdict::Unexpected, "a relayed request");
    assert_eq!(b.on_arrival(2, None, Some(0), 14, false), Verdict::Unexpected);
    b.left(2, End::ServerClosed(1013));
    assert_eq!(b.on_relayed_send(0, 3, 14), 1, "2 has left");
    let (d, r) = b.tally();
    // to 1: seqs 0..=3 expected, 0 and 2 arrived: 1 dropped, 3 late
    // to 2: seqs 0..=2 expected, 0 arrived: 1 and 2 lost with the close
    assert_eq!((d.expected, d.arrived, d.missing, d.dropped, d.late), (7, 3, 4, 1, 1));
    assert_eq!(d.closed, BTreeMap::from([(End::ServerClosed(1013), 2)]));
    assert_eq!((r.expected, r.arrived, r.late), (1, 0, 1));
    assert_eq!(End::ServerClosed(1013).name(), "server close 1013 (try again later: overloaded)");
}

#[test]
fn end_codes_round_trip() {
    for e in
        [End::Open, End::Lost, End::Failed, End::ServerClosed(1000), End::ServerClosed(0), End::ServerClosed(65535)]
    {
        assert_eq!(End::decode(e.encode()), e);
    }
}

/// Step 1 of joining marks the member, so a sender that reads it before the stamp waits for
/// the stamp instead of taking the member for not joined.
#[test]
fn joining_marks_the_member_until_its_stamp() {
    let b = Book::new(2, 2);
    b.joining(1);
    assert_eq!(b.members[1].joined.load(Ordering::SeqCst), JOINING);
    b.joined(1, 10);
    assert_eq!(Book::joined_at(&b.members[1]), 10);
}

/// A stamp that collides with a marker is moved one µs earlier: still a join, which the
/// sender and the receiver both see before a message stamped at the last µs.
#[test]
fn a_join_stamp_on_a_marker_is_moved_below_it() {
    let b = Book::new(2, 2);
    for c in 0..2 {
        b.joining(c);
        b.joined(c, u64::MAX);
    }
    assert_eq!(b.members[1].joined.load(Ordering::SeqCst), JOINING - 1);
    assert_eq!(b.on_relayed_send(0, 0, u64::MAX), 1);
    assert_eq!(b.on_arrival(1, Some(0), Some(0), u64::MAX, false), Verdict::Expected);
}

#[test]
fn a_message_that_arrives_twice_is_a_duplicate_not_two_arrivals() {
    let b = Book::new(2, 2);
    for c in 0..2 {
        b.joining(c);
        b.joined(c, 10);
    }
    assert_eq!(b.on_relayed_send(0, 0, 11), 1);
    for _ in 0..2 {
        assert_eq!(b.on_arrival(1, Some(0), Some(0), 11, false), Verdict::Expected);
    }
    let (d, _) = b.tally();
    assert_eq!((d.expected, d.arrived, d.missing, d.duplicates), (1, 1, 0, 1));
}

#[test]
fn close_codes_are_named_with_their_rfc_6455_meanings() {
    let named = [
        (1000, "normal"),
        (1001, "going away"),
        (1002, "protocol error"),
        (1003, "unsupported data"),
        (1007, "invalid payload"),
        (1008, "policy violation"),
        (1009, "message too big"),
        (1011, "server error"),
        (1013, "try again later: overloaded"),
    ];
    for (code, meaning) in named {
        assert_eq!(End::ServerClosed(code).name(), format!("server close {code} ({meaning})"));
    }
    assert_eq!(End::ServerClosed(4000).name(), "server close 4000", "an application's own code");
    assert_eq!(End::Lost.name(), "connection lost (no close frame)");
    assert_eq!(End::Failed.name(), "read or write failed");
    assert_eq!(End::Open.name(), "open");
}

/// A message the server model holds: its index in the oracle's list, seq, send stamp.
type InFlight = (usize, u64, u64);

/// The oracle's record of one expected message.
struct Sent {
    pair: (u64, u64),
    seq: u64,
    arrived: bool,
}

/// A seeded run: clients join and leave (by random ends), send relayed events and
/// requests, and a server model relays through per-pair FIFO queues that sometimes drop.
/// Every expected message is kept in a list; at the end each missing one is classified
/// by brute force and compared with the book's tally.
fn simulate(seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let clients = 1 + rng.next_u64() % 16;
    let room_size = 2 + rng.next_u64() % 5;
    let b = Book::new(clients, room_size);
    let room = |c: u64| c / room_size;
    let mut joined: Vec<Option<u64>> = vec![None; clients as usize];
    let mut ended: Vec<Option<End>> = vec![None; clients as usize];
    let (mut relay_seq, mut req_seq) = (vec![0u64; clients as usize], vec![0u64; clients as usize]);
    let mut queues: BTreeMap<(u64, u64), VecDeque<InFlight>> = BTreeMap::new();
    let mut sent: Vec<Sent> = Vec::new();
    let mut t = 1u64;
    let drop_per_mille = rng.next_u64() % 300;
    for _ in 0..600 {
        t += rng.next_u64() % 3;
        let c = rng.next_u64() % clients;
        let ci = c as usize;
        match rng.next_u64() % 10 {
            0 if joined[ci].is_none() => {
                b.joining(c);
                b.joined(c, t);
                joined[ci] = Some(t);
            }
            1 if joined[ci].is_some() && ended[ci].is_none() && rng.next_u64().is_multiple_of(4) => {
                let how = [End::ServerClosed(1013), End::Lost, End::Failed][(rng.next_u64() % 3) as usize];
                b.left(c, how);
                ended[ci] = Some(how);
                queues.retain(|(_, r), _| *r != c);
            }
            2..=5 if joined[ci].is_some() && ended[ci].is_none() => {
                let seq = relay_seq[ci];
                relay_seq[ci] += 1;
                let n = b.on_relayed_send(c, seq, t);
                let mut want = 0;
                for r in (0..clients).filter(|&r| r != c && room(r) == room(c)) {
                    let ri = r as usize;
                    if joined[ri].is_some_and(|j| j < t) && ended[ri].is_none() {
                        want += 1;
                        queues.entry((c, r)).or_default().push_back((sent.len(), seq, t));
                        sent.push(Sent { pair: (c, r), seq, arrived: false });
                    }
                }
                assert_eq!(n, want, "seed {seed}: receivers counted at send");
            }
            6 if joined[ci].is_some() && ended[ci].is_none() => {
                let seq = req_seq[ci];
                req_seq[ci] += 1;
                b.on_request_send(c, seq);
                queues.entry((c, c)).or_default().push_back((sent.len(), seq, t));
                sent.push(Sent { pair: (c, c), seq, arrived: false });
            }
            _ => {
                // the server moves one message of a random pair: relay or skip
                let keys: Vec<(u64, u64)> = queues.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k).collect();
                if keys.is_empty() {
                    continue;
                }
                let k = keys[(rng.next_u64() % keys.len() as u64) as usize];
                let (i, seq, ts) = queues.get_mut(&k).unwrap().pop_front().unwrap();
                if rng.next_u64() % 1000 >= drop_per_mille {
                    let v = b.on_arrival(k.1, Some(k.0), Some(seq), ts, k.0 == k.1);
                    assert_eq!(v, Verdict::Expected, "seed {seed}");
                    sent[i].arrived = true;
                }
                // now and then a stray: an echo, or a message from before the receiver joined
                if rng.next_u64().is_multiple_of(20) {
                    assert_eq!(b.on_arrival(k.0, Some(k.0), Some(seq), ts, false), Verdict::Unexpected);
                }
            }
        }
    }
    for (c, e) in ended.iter_mut().enumerate() {
        if joined[c].is_some() && e.is_none() {
            b.left(c as u64, End::Open);
            *e = Some(End::Open);
        }
    }
    // brute force
    let mut highest: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for s in sent.iter().filter(|s| s.arrived) {
        let h = highest.entry(s.pair).or_default();
        *h = (*h).max(s.seq + 1);
    }
    let (mut want_d, mut want_r) = (Account::default(), Account::default());
    for s in &sent {
        let a = if s.pair.0 == s.pair.1 { &mut want_r } else { &mut want_d };
        a.expected += 1;
        if s.arrived {
            a.arrived += 1;
            continue;
        }
        a.missing += 1;
        if s.seq < highest.get(&s.pair).copied().unwrap_or(0) {
            a.dropped += 1;
        } else {
            match ended[s.pair.1 as usize].unwrap_or(End::Open) {
                End::Open => a.late += 1,
                how => *a.closed.entry(how).or_default() += 1,
            }
        }
    }
    let (d, r) = b.tally();
    assert_eq!(d, want_d, "seed {seed}: deliveries");
    assert_eq!(r, want_r, "seed {seed}: replies");
    for a in [&d, &r] {
        assert_eq!(a.expected, a.arrived + a.missing);
        assert_eq!(a.missing, a.dropped + a.late + a.closed.values().sum::<u64>());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn tally_equals_brute_force(seed in any::<u64>()) {
        simulate(seed);
    }
}

/// Senders and receivers on their own threads: the joining protocol makes both sides
/// decide alike, so every arrival the receivers call expected was counted by its sender.
#[test]
fn threads_agree_on_who_expects_what() {
    use std::sync::Arc;
    let b = Arc::new(Book::new(2, 2));
    let stamp = Arc::new(AtomicU64::new(1));
    let b2 = b.clone();
    let st = stamp.clone();
    let receiver = std::thread::spawn(move || {
        b2.joining(1);
        let j = st.fetch_add(1, Ordering::SeqCst);
        b2.joined(1, j);
        j
    });
    // the sender stamps and sends while the receiver joins
    let mut counted = Vec::new();
    for seq in 0..2_000 {
        let ts = stamp.fetch_add(1, Ordering::SeqCst);
        counted.push((seq, ts, b.on_relayed_send(0, seq, ts) == 1));
    }
    let j = receiver.join().unwrap();
    let mut arrivals = 0;
    for &(seq, ts, was_counted) in &counted {
        let v = b.on_arrival(1, Some(0), Some(seq), ts, false);
        assert_eq!(v == Verdict::Expected, was_counted, "seq {seq} ts {ts} joined {j}");
        arrivals += u64::from(was_counted);
    }
    let (d, _) = b.tally();
    assert_eq!((d.expected, d.arrived, d.missing), (arrivals, arrivals, 0));
}
