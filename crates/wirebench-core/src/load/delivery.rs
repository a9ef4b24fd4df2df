//! Who should have received what: the expected deliveries of a load run, and why the ones
//! that never arrived are missing.
//!
//! Every relayed message is expected at every other member of the sender's room that had
//! joined before it was sent and had not left; a request is expected back at its sender.
//! The sender counts those at send time; each receiver counts what it got. At the end,
//! every (sender, receiver) pair splits its missing messages three ways by their sequence
//! numbers (relayed events and requests are numbered apart, each from 0 without gaps, and a
//! pair's expected messages are a contiguous run of them, because membership is one
//! interval):
//! - **dropped while connected**: numbered below the highest the receiver got (a gap: the
//!   server skipped them, e.g. for a member that fell behind);
//! - **lost when the connection closed**: after the highest the receiver got, and the
//!   receiver's connection ended before the run did (counted by how it ended: the server's
//!   close code, or a connection lost without one);
//! - **not arrived by the end**: after the highest, the receiver still connected when the run
//!   ended (late, or still queued somewhere).
//!
//! Join times are µs stamps on the same clock as the messages' `ts`. A receiver counts a
//! message as expected exactly when `ts > joined`, and the sender counts a receiver exactly
//! when it sees `joined < ts`; a joining receiver marks itself [`JOINING`] before it reads
//! the clock, and a sender that sees the mark waits for the stamp, so both sides always
//! make the same decision (see [`Book::joining`]). All counters are atomics written by one
//! thread each (the sender or the receiver of the pair), so no lock is taken per message.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A client that has not joined yet.
const NOT_JOINED: u64 = u64::MAX;
/// A client between marking itself and stamping its join time.
const JOINING: u64 = u64::MAX - 1;

/// How a client's connection ended, as far as the accounting is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum End {
    /// Still open when the run ended (or stopped).
    Open,
    /// The server sent a close frame with this code.
    ServerClosed(u16),
    /// The connection ended without a close frame (EOF or reset).
    Lost,
    /// A read or write failed (a protocol error, a broken pipe).
    Failed,
}

impl End {
    const fn encode(self) -> u32 {
        match self {
            Self::Open => 0,
            Self::ServerClosed(c) => 0x1_0000 | c as u32,
            Self::Lost => 2,
            Self::Failed => 3,
        }
    }

    const fn decode(v: u32) -> Self {
        match v {
            2 => Self::Lost,
            3 => Self::Failed,
            v if v & 0x1_0000 != 0 => Self::ServerClosed((v & 0xffff) as u16),
            _ => Self::Open,
        }
    }

    /// How the report names it: `server close 1013`, `connection lost`, `read or write failed`.
    pub fn name(self) -> String {
        match self {
            Self::Open => "open".into(),
            Self::ServerClosed(c) => format!("server close {c}{}", close_meaning(c)),
            Self::Lost => "connection lost (no close frame)".into(),
            Self::Failed => "read or write failed".into(),
        }
    }
}

/// RFC 6455 section 7.4.1 meanings of the close codes a server sends.
fn close_meaning(code: u16) -> &'static str {
    match code {
        1000 => " (normal)",
        1001 => " (going away)",
        1002 => " (protocol error)",
        1003 => " (unsupported data)",
        1007 => " (invalid payload)",
        1008 => " (policy violation)",
        1009 => " (message too big)",
        1011 => " (server error)",
        1013 => " (try again later: overloaded)",
        _ => "",
    }
}

#[derive(Debug)]
struct Member {
    joined: AtomicU64,
    end: AtomicU32,
    left: std::sync::atomic::AtomicBool,
}

/// One (sender, receiver) pair; the diagonal (sender = receiver) holds requests and their
/// replies.
#[derive(Debug, Default)]
struct Pair {
    /// Written by the sender: messages the receiver should get, and the last of their
    /// sequence numbers.
    expected: AtomicU64,
    last: AtomicU64,
    /// Written by the receiver: expected messages that arrived, and the highest sequence
    /// number among them plus one (0: none).
    arrived: AtomicU64,
    highest_plus_1: AtomicU64,
}

/// What a receiver should make of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Expected: counts against the sender's expectation.
    Expected,
    /// Sent before this receiver joined, or from outside its room, or not a client of
    /// this run: delivered, but nobody expected it.
    Unexpected,
}

/// The accounting of one direction (deliveries to other members, or replies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Account {
    /// Messages that should have arrived.
    pub expected: u64,
    /// Of those, arrived.
    pub arrived: u64,
    /// Of those, missing: `dropped + late + closed` (all of them).
    pub missing: u64,
    /// Missing, numbered below the highest that arrived (a gap while connected).
    pub dropped: u64,
    /// Missing after the highest that arrived, the receiver connected to the end.
    pub late: u64,
    /// Missing after the highest that arrived, the receiver's connection ended early, by
    /// how it ended.
    pub closed: BTreeMap<End, u64>,
    /// Arrivals beyond the expected ones on a pair (duplicates).
    pub duplicates: u64,
}

impl Account {
    fn add_pair(&mut self, p: &Pair, end: End) {
        let e = p.expected.load(Ordering::Relaxed);
        let d = p.arrived.load(Ordering::Relaxed);
        let arrived = d.min(e);
        let missing = e - arrived;
        self.expected += e;
        self.arrived += arrived;
        self.duplicates += d - arrived;
        self.missing += missing;
        if missing == 0 {
            return;
        }
        let h = p.highest_plus_1.load(Ordering::Relaxed);
        let last = p.last.load(Ordering::Relaxed);
        let tail = if h == 0 { missing } else { last.saturating_sub(h - 1).min(missing) };
        self.dropped += missing - tail;
        if tail > 0 {
            match end {
                End::Open => self.late += tail,
                other => *self.closed.entry(other).or_default() += tail,
            }
        }
    }
}

/// The shared book of a run: one [`Member`] per client and one [`Pair`] per (sender,
/// receiver) of a room, rooms of `room_size` consecutive clients.
#[derive(Debug)]
pub struct Book {
    room_size: u64,
    members: Box<[Member]>,
    pairs: Box<[Pair]>,
}

/// Bytes the book takes per (sender, receiver) pair.
pub const PAIR_BYTES: u64 = std::mem::size_of::<Pair>() as u64;

impl Book {
    /// Pairs a run of `clients` in rooms of `room_size` keeps.
    pub const fn pairs(clients: u64, room_size: u64) -> u64 {
        clients.div_ceil(room_size) * room_size * room_size
    }

    /// A book for `clients` in rooms of `room_size` (at least 1).
    pub fn new(clients: u64, room_size: u64) -> Self {
        let room_size = room_size.max(1);
        let n = usize::try_from(clients).expect("clients fit in memory");
        let pairs = usize::try_from(Self::pairs(clients, room_size)).expect("pairs fit in memory");
        let members = (0..n)
            .map(|_| Member {
                joined: AtomicU64::new(NOT_JOINED),
                end: AtomicU32::new(0),
                left: std::sync::atomic::AtomicBool::new(false),
            })
            .collect();
        Self { room_size, members, pairs: (0..pairs).map(|_| Pair::default()).collect() }
    }

    fn pair(&self, sender: u64, receiver: u64) -> &Pair {
        let room = sender / self.room_size;
        let (i, j) = (sender % self.room_size, receiver % self.room_size);
        let at = (room * self.room_size + i) * self.room_size + j;
        &self.pairs[usize::try_from(at).expect("index fits")]
    }

    fn member(&self, c: u64) -> Option<&Member> {
        self.members.get(usize::try_from(c).ok()?)
    }

    /// The other members of `c`'s room, as client numbers.
    fn room_of(&self, c: u64) -> std::ops::Range<u64> {
        let start = c / self.room_size * self.room_size;
        start..(start + self.room_size).min(self.members.len() as u64)
    }

    /// Step 1 of joining: call before reading the clock for [`Book::joined`].
    pub fn joining(&self, c: u64) {
        if let Some(m) = self.member(c) {
            m.joined.store(JOINING, Ordering::SeqCst);
        }
    }

    /// Step 2 of joining: the join stamp (µs, the messages' clock), read after
    /// [`Book::joining`]. A stamp that collides with a marker is moved one µs earlier.
    pub fn joined(&self, c: u64, stamp_us: u64) {
        if let Some(m) = self.member(c) {
            m.joined.store(stamp_us.min(JOINING - 1), Ordering::SeqCst);
        }
    }

    /// The client's connection ended (`End::Open` when the run ended with it open).
    pub fn left(&self, c: u64, how: End) {
        if let Some(m) = self.member(c) {
            m.end.store(how.encode(), Ordering::Relaxed);
            m.left.store(true, Ordering::SeqCst);
        }
    }

    fn joined_at(m: &Member) -> u64 {
        loop {
            let j = m.joined.load(Ordering::SeqCst);
            if j != JOINING {
                return j;
            }
            std::hint::spin_loop();
        }
    }

    /// A relayed message sent by `sender` with its `seq` (of relayed messages) and send
    /// stamp: counts it at every member that should get it; returns how many.
    pub fn on_relayed_send(&self, sender: u64, seq: u64, stamp_us: u64) -> u64 {
        let mut n = 0;
        for r in self.room_of(sender) {
            if r == sender {
                continue;
            }
            let Some(m) = self.member(r) else { continue };
            let j = Self::joined_at(m);
            if j == NOT_JOINED || j >= stamp_us || m.left.load(Ordering::SeqCst) {
                continue;
            }
            Self::count(self.pair(sender, r), seq);
            n += 1;
        }
        n
    }

    /// A request sent by `sender` with its `seq` (of requests): its reply is expected back.
    pub fn on_request_send(&self, sender: u64, seq: u64) {
        if self.member(sender).is_some() {
            Self::count(self.pair(sender, sender), seq);
        }
    }

    fn count(p: &Pair, seq: u64) {
        // One writer per pair (the sender's task): plain loads and stores.
        let e = p.expected.load(Ordering::Relaxed);
        p.last.store(seq, Ordering::Relaxed);
        p.expected.store(e + 1, Ordering::Relaxed);
    }

    /// A message that reached `receiver`, from `sender` (`None`: no sender field) with its
    /// `seq` and send stamp; `request` says whether its type is a request (expected back at
    /// its sender only; a relayed type is expected at the others only).
    pub fn on_arrival(
        &self,
        receiver: u64,
        sender: Option<u64>,
        seq: Option<u64>,
        stamp_us: u64,
        request: bool,
    ) -> Verdict {
        let (Some(s), Some(seq), Some(me)) = (sender, seq, self.member(receiver)) else {
            return Verdict::Unexpected;
        };
        let own = s == receiver;
        if request != own || !self.room_of(receiver).contains(&s) || (!own && stamp_us <= Self::joined_at(me)) {
            return Verdict::Unexpected;
        }
        let p = self.pair(s, receiver);
        p.arrived.store(p.arrived.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let h = p.highest_plus_1.load(Ordering::Relaxed);
        p.highest_plus_1.store(h.max(seq.saturating_add(1)), Ordering::Relaxed);
        Verdict::Expected
    }

    /// Deliveries to other members and replies, as they stand.
    pub fn tally(&self) -> (Account, Account) {
        let (mut deliveries, mut replies) = (Account::default(), Account::default());
        for (r, m) in (0u64..).zip(self.members.iter()) {
            let end = End::decode(m.end.load(Ordering::Relaxed));
            for s in self.room_of(r) {
                let into = if s == r { &mut replies } else { &mut deliveries };
                into.add_pair(self.pair(s, r), end);
            }
        }
        (deliveries, replies)
    }
}

#[cfg(test)]
mod tests;
