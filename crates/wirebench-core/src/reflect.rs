//! A STAMP reflector's bookkeeping, free of sockets and clocks. STAMP has no handshake, so a
//! reflector answers whoever writes to it, and a forged source address would aim its replies
//! at a third party: the allow-list and a rate cap per source address are what keep it from
//! being a reflector for floods (it never amplifies: a reply is as long as its request).
//! Stateful mode keeps the reflector's own sequence number per session (RFC 8762 §4.3), so
//! a sender can tell loss on the way out from loss on the way back.
//!
//! Memory is bounded: both tables hold at most [`MAX_SOURCES`] entries; when full, an entry
//! idle for [`IDLE_NS`] makes room, and otherwise the newcomer is refused (rate table: it
//! shares one overflow bucket; session table: it is not answered).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// Entries each table holds at most.
pub const MAX_SOURCES: usize = 4096;
/// An entry unused this long may be dropped to make room.
pub const IDLE_NS: u64 = 60_000_000_000;

/// An address prefix such as `10.0.0.0/8`, `2001:db8::/32` or a bare address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    net: IpAddr,
    len: u8,
}

impl std::str::FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s.split_once('/').map_or((s, None), |(a, l)| (a, Some(l)));
        let net: IpAddr = a.parse().map_err(|_| format!("'{s}' is not an address or prefix (e.g. 10.0.0.0/8)"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("'{s}': prefix length {l} is not 0..={max}"))?,
        };
        Ok(Self { net, len })
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

impl Prefix {
    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        let mask = |bits: u32| if self.len == 0 { 0 } else { u128::MAX << (bits - u32::from(self.len)) };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let m = mask(32);
                (u128::from(u32::from(n)) & m) == (u128::from(u32::from(a)) & m)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let m = mask(128);
                (u128::from(n) & m) == (u128::from(a) & m)
            }
            _ => false,
        }
    }
}

/// What the admission check decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Answer it.
    Yes,
    /// The source is not on the allow-list.
    NotAllowed,
    /// The source is over its rate.
    OverRate,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last_ns: u64,
}

impl Bucket {
    fn take(&mut self, now_ns: u64, per_s: f64, burst: f64) -> bool {
        #[expect(clippy::cast_precision_loss, reason = "ns gaps far below 2^52 matter; beyond, the bucket is full")]
        let gap_s = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        self.tokens = gap_s.mul_add(per_s, self.tokens).min(burst);
        self.last_ns = now_ns;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Who may be answered, and how fast.
#[derive(Debug)]
pub struct Admission {
    allow: Vec<Prefix>,
    /// Packets per second per source; `None`: no cap.
    per_s: Option<f64>,
    burst: f64,
    buckets: HashMap<IpAddr, Bucket>,
    overflow: Bucket,
}

impl Admission {
    /// An empty `allow` lets every source in; `per_s` caps each source (a burst of a tenth
    /// of a second's worth, at least 10 packets, is let through at once).
    pub fn new(allow: Vec<Prefix>, per_s: Option<f64>) -> Self {
        let burst = per_s.map_or(0.0, |r| (r / 10.0).max(10.0));
        Self { allow, per_s, burst, buckets: HashMap::new(), overflow: Bucket { tokens: burst, last_ns: 0 } }
    }

    /// Decides for one packet from `ip` at `now_ns`.
    pub fn admit(&mut self, ip: IpAddr, now_ns: u64) -> Admit {
        if !self.allow.is_empty() && !self.allow.iter().any(|p| p.contains(ip)) {
            return Admit::NotAllowed;
        }
        let Some(per_s) = self.per_s else { return Admit::Yes };
        let burst = self.burst;
        if !self.buckets.contains_key(&ip) && self.buckets.len() >= MAX_SOURCES {
            self.buckets.retain(|_, b| now_ns.saturating_sub(b.last_ns) < IDLE_NS);
        }
        let b = if self.buckets.len() < MAX_SOURCES || self.buckets.contains_key(&ip) {
            self.buckets.entry(ip).or_insert(Bucket { tokens: burst, last_ns: now_ns })
        } else {
            &mut self.overflow
        };
        if b.take(now_ns, per_s, burst) { Admit::Yes } else { Admit::OverRate }
    }

    /// Sources with a bucket now.
    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

/// Stateful mode's sequence numbers: one counter per session (sender address and SSID).
#[derive(Debug, Default)]
pub struct SeqBook {
    next: HashMap<(SocketAddr, u16), (u32, u64)>,
}

impl SeqBook {
    /// The reflector's sequence number for the next packet of the session, or `None` when
    /// the table is full of sessions active within [`IDLE_NS`].
    pub fn next(&mut self, from: SocketAddr, ssid: u16, now_ns: u64) -> Option<u32> {
        let key = (from, ssid);
        if !self.next.contains_key(&key) && self.next.len() >= MAX_SOURCES {
            self.next.retain(|_, (_, last)| now_ns.saturating_sub(*last) < IDLE_NS);
            if self.next.len() >= MAX_SOURCES {
                return None;
            }
        }
        let e = self.next.entry(key).or_insert((0, now_ns));
        let seq = e.0;
        *e = (seq.wrapping_add(1), now_ns);
        Some(seq)
    }

    /// Sessions known now.
    pub fn sessions(&self) -> usize {
        self.next.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_match() {
        let p: Prefix = "10.1.0.0/16".parse().unwrap();
        assert!(p.contains(ip("10.1.200.3")) && !p.contains(ip("10.2.0.1")));
        assert!(p.contains(ip("::ffff:10.1.0.9")), "IPv4-mapped counts as IPv4");
        assert!(!p.contains(ip("2001:db8::1")));
        let one: Prefix = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.1")));
        let v6: Prefix = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::1")) && !v6.contains(ip("2001:db9::1")));
        assert_eq!(v6.to_string(), "2001:db8::/32");
        assert!("10.0.0.0/33".parse::<Prefix>().unwrap_err().contains("0..=32"));
        assert!("ten/8".parse::<Prefix>().unwrap_err().contains("not an address"));
    }

    #[test]
    fn the_allow_list_refuses_others_and_an_empty_one_allows_all() {
        let mut a = Admission::new(vec!["10.0.0.0/8".parse().unwrap()], None);
        assert_eq!(a.admit(ip("10.9.9.9"), 0), Admit::Yes);
        assert_eq!(a.admit(ip("11.0.0.1"), 0), Admit::NotAllowed);
        let mut open = Admission::new(Vec::new(), None);
        assert_eq!(open.admit(ip("11.0.0.1"), 0), Admit::Yes);
    }

    /// A source gets its burst, then its rate; another source has its own bucket.
    #[test]
    fn each_source_is_capped_at_its_rate() {
        let mut a = Admission::new(Vec::new(), Some(100.0));
        let first = (0..50).filter(|_| a.admit(ip("10.0.0.1"), 0) == Admit::Yes).count();
        assert_eq!(first, 10, "the burst: a tenth of a second's worth, at least 10");
        assert_eq!(a.admit(ip("10.0.0.2"), 0), Admit::Yes, "another source is not charged");
        // One second later: 100 more (capped at the burst of 10 at any instant).
        let mut later = 0;
        for ms in 1..=1000u64 {
            if a.admit(ip("10.0.0.1"), ms * 1_000_000) == Admit::Yes {
                later += 1;
            }
        }
        assert!((99..=101).contains(&later), "{later} in a second at 100/s");
    }

    /// A full table makes room from idle sources, and otherwise puts newcomers in one shared
    /// bucket: a flood of forged sources cannot grow memory or get past the cap.
    #[test]
    fn the_source_table_is_bounded() {
        let mut a = Admission::new(Vec::new(), Some(10.0));
        for i in 0..MAX_SOURCES {
            let v4 = std::net::Ipv4Addr::from(0x0A00_0000 + u32::try_from(i).unwrap());
            assert_eq!(a.admit(IpAddr::V4(v4), 0), Admit::Yes);
        }
        assert_eq!(a.sources(), MAX_SOURCES);
        let n = (0..100).filter(|_| a.admit(ip("192.0.2.1"), 1) == Admit::Yes).count();
        assert_eq!(n, 10, "newcomers share the overflow bucket's burst");
        assert_eq!(a.sources(), MAX_SOURCES);
        assert_eq!(a.admit(ip("192.0.2.1"), IDLE_NS + 1), Admit::Yes, "idle sources made room");
        assert_eq!(a.sources(), 1);
    }

    /// Idle entries make room only when a table is full, and an entry idle for exactly
    /// IDLE_NS is idle enough.
    #[test]
    fn idle_entries_go_only_to_make_room() {
        let mut a = Admission::new(Vec::new(), Some(10.0));
        assert_eq!(a.admit(ip("10.0.0.1"), 0), Admit::Yes);
        assert_eq!(a.admit(ip("10.0.0.2"), 2 * IDLE_NS), Admit::Yes);
        assert_eq!(a.sources(), 2, "room to spare: the idle source keeps its bucket");
        let mut b = SeqBook::default();
        let s1: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let s2: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        assert_eq!(b.next(s1, 1, 0), Some(0));
        assert_eq!(b.next(s2, 1, 2 * IDLE_NS), Some(0));
        assert_eq!(b.next(s1, 1, 2 * IDLE_NS), Some(1), "an idle session keeps counting");
        assert_eq!(b.sessions(), 2);
        // Full tables, all last used at 0: a newcomer at IDLE_NS finds them idle.
        let mut a = Admission::new(Vec::new(), Some(10.0));
        let mut b = SeqBook::default();
        for i in 0..MAX_SOURCES {
            let v4 = std::net::Ipv4Addr::from(0x0A00_0000 + u32::try_from(i).unwrap());
            a.admit(IpAddr::V4(v4), 0);
            b.next(SocketAddr::new(IpAddr::V4(v4), 1), 0, 0);
        }
        assert_eq!(a.admit(ip("192.0.2.1"), IDLE_NS), Admit::Yes);
        assert_eq!(a.sources(), 1);
        assert_eq!(b.next("192.0.2.1:1".parse().unwrap(), 0, IDLE_NS), Some(0));
        assert_eq!(b.sessions(), 1);
    }

    #[test]
    fn stateful_sequence_numbers_count_per_session_and_the_book_is_bounded() {
        let mut b = SeqBook::default();
        let s1: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let s2: SocketAddr = "10.0.0.1:5001".parse().unwrap();
        assert_eq!(
            (b.next(s1, 1, 0), b.next(s1, 1, 0), b.next(s1, 2, 0), b.next(s2, 1, 0)),
            (Some(0), Some(1), Some(0), Some(0))
        );
        assert_eq!(b.next(s1, 1, 0), Some(2));
        assert_eq!(b.sessions(), 3);
        for i in 0..MAX_SOURCES {
            let a = SocketAddr::new(ip("10.1.0.1"), u16::try_from(i % 60_000).unwrap());
            b.next(a, u16::try_from(i / 60_000).unwrap() + 10, 5);
        }
        let newcomer: SocketAddr = "10.2.0.1:1".parse().unwrap();
        assert_eq!(b.next(newcomer, 0, 10), None, "full of live sessions: not answered");
        assert!(b.sessions() <= MAX_SOURCES);
        assert_eq!(b.next(newcomer, 0, IDLE_NS + 10), Some(0), "idle sessions made room");
        assert_eq!(b.sessions(), 1);
    }
}
