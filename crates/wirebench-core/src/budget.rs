//! What a far end lets one client have: the rate and duration it grants a reverse stream,
//! and the ledger of sessions, sessions per source address and bytes that keeps serve as a
//! whole inside its documented budget (`docs/security.md`). Pure: the binary holds a
//! [`Ledger`] behind a lock and asks it before it allocates anything for a session.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// The limits serve applies to what it sends for one session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendLimits {
    /// Payload bits per second for the whole session, all publishers together (`None`: no cap).
    pub max_bits_per_s: Option<f64>,
    /// Longest a session may make serve send.
    pub max_duration: Duration,
}

/// What serve will actually send: a rate per publisher and a duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grant {
    /// Messages per second per publisher (`None`: flat out).
    pub per_publisher: Option<f64>,
    /// How long.
    pub duration: Duration,
}

/// The grant for a request of `publishers` publishers of `size`-byte messages asking for
/// `asked` messages per second each (`None`: flat out) for `asked_ns` (0: the cap). The cap
/// is on the session's total, so it is split across the publishers.
pub fn grant(limits: &SendLimits, size: usize, publishers: u16, asked: Option<f64>, asked_ns: u64) -> Grant {
    #[expect(clippy::cast_precision_loss, reason = "sizes are far below 2^52")]
    let cap = limits.max_bits_per_s.map(|b| b / (8.0 * size.max(1) as f64) / f64::from(publishers.max(1)));
    let per_publisher = match (asked, cap) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, None) => a,
        (None, c) => c,
    };
    let asked = Duration::from_nanos(asked_ns);
    let duration = if asked.is_zero() { limits.max_duration } else { asked.min(limits.max_duration) };
    Grant { per_publisher, duration }
}

/// The budget of a server as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Sessions at once.
    pub sessions: u32,
    /// Sessions at once from one source address.
    pub per_source: u32,
    /// Bytes all sessions together may hold (buffers and accounting windows).
    pub bytes: u64,
}

/// Why a session was refused, in words for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Too many sessions.
    #[error("serve is at its session limit ({0} at once): try again later")]
    Sessions(u32),
    /// Too many from this address.
    #[error("{0} already has {1} sessions on this serve (its limit per address)")]
    PerSource(IpAddr, u32),
    /// Out of memory budget.
    #[error("serve's memory budget is spent ({used} of {limit} bytes held by sessions; this one needs {need})")]
    Bytes {
        /// Held now.
        used: u64,
        /// The budget.
        limit: u64,
        /// Asked.
        need: u64,
    },
}

/// A session admitted: give it back to [`Ledger::release`] when it ends.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a ticket must be released"]
pub struct Ticket {
    source: IpAddr,
    bytes: u64,
}

/// Sessions and bytes held now, against a [`Budget`].
#[derive(Debug, Clone)]
pub struct Ledger {
    budget: Budget,
    sessions: u32,
    bytes: u64,
    by_source: HashMap<IpAddr, u32>,
    refused: u64,
}

impl Ledger {
    /// An empty ledger.
    pub fn new(budget: Budget) -> Self {
        Self { budget, sessions: 0, bytes: 0, by_source: HashMap::new(), refused: 0 }
    }

    /// Admits a session from `source` that holds `bytes`, or says why not (and counts it).
    pub fn admit(&mut self, source: IpAddr, bytes: u64) -> Result<Ticket, Refusal> {
        let mine = self.by_source.get(&source).copied().unwrap_or(0);
        let r = if self.sessions >= self.budget.sessions {
            Err(Refusal::Sessions(self.budget.sessions))
        } else if mine >= self.budget.per_source {
            Err(Refusal::PerSource(source, mine))
        } else if self.bytes.saturating_add(bytes) > self.budget.bytes {
            Err(Refusal::Bytes { used: self.bytes, limit: self.budget.bytes, need: bytes })
        } else {
            Ok(())
        };
        if let Err(e) = r {
            self.refused += 1;
            return Err(e);
        }
        self.sessions += 1;
        self.bytes += bytes;
        *self.by_source.entry(source).or_insert(0) += 1;
        Ok(Ticket { source, bytes })
    }

    /// Gives a session's share back (consuming the ticket, so it cannot be given twice).
    #[expect(clippy::needless_pass_by_value, reason = "taking the ticket is the point")]
    pub fn release(&mut self, t: Ticket) {
        self.sessions = self.sessions.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(t.bytes);
        if let Some(n) = self.by_source.get_mut(&t.source) {
            *n -= 1;
            if *n == 0 {
                self.by_source.remove(&t.source);
            }
        }
    }

    /// Sessions held now.
    pub const fn sessions(&self) -> u32 {
        self.sessions
    }

    /// Bytes held now.
    pub const fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Sessions refused so far.
    pub const fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEN_MBIT: SendLimits = SendLimits { max_bits_per_s: Some(10e6), max_duration: Duration::from_secs(600) };

    #[test]
    fn the_cap_is_on_the_session_total() {
        // 10 Mbit/s of 1250-byte messages is 1000 msg/s: 64 publishers get 15.625 each.
        let g = grant(&TEN_MBIT, 1250, 64, None, 0);
        assert_eq!(g.per_publisher, Some(1000.0 / 64.0));
        assert_eq!(g.duration, Duration::from_secs(600));
        let g = grant(&TEN_MBIT, 1250, 1, Some(10.0), 2_000_000_000);
        assert_eq!((g.per_publisher, g.duration), (Some(10.0), Duration::from_secs(2)));
        let open = SendLimits { max_bits_per_s: None, max_duration: Duration::from_secs(1) };
        assert_eq!(
            grant(&open, 64, 4, None, 5_000_000_000),
            Grant { per_publisher: None, duration: Duration::from_secs(1) }
        );
    }

    proptest! {
        /// Whatever is asked (decoded rates are positive and finite), the total never passes the cap.
        #[test]
        fn grants_never_exceed_the_cap(size in 32usize..65536, pubs in 1u16..=64, asked in proptest::option::of(1e-3f64..1e10), cap in 1e3f64..1e11) {
            let l = SendLimits { max_bits_per_s: Some(cap), max_duration: Duration::from_secs(1) };
            let g = grant(&l, size, pubs, asked, 0);
            let per = g.per_publisher.unwrap();
            let total_bits = per * f64::from(pubs) * 8.0 * f64::from(u32::try_from(size).unwrap());
            prop_assert!(total_bits <= cap * (1.0 + 1e-9));
            prop_assert!(per > 0.0 && per.is_finite());
        }
    }

    #[test]
    fn ledger_counts_sessions_sources_and_bytes() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let mut l = Ledger::new(Budget { sessions: 3, per_source: 2, bytes: 100 });
        let t1 = l.admit(a, 40).unwrap();
        let t2 = l.admit(a, 40).unwrap();
        assert_eq!(l.admit(a, 1), Err(Refusal::PerSource(a, 2)));
        assert_eq!(l.admit(b, 30), Err(Refusal::Bytes { used: 80, limit: 100, need: 30 }));
        let t3 = l.admit(b, 20).unwrap();
        assert_eq!(l.admit(b, 0), Err(Refusal::Sessions(3)));
        assert_eq!((l.sessions(), l.bytes(), l.refused()), (3, 100, 3));
        l.release(t1);
        l.release(t2);
        l.release(t3);
        assert_eq!((l.sessions(), l.bytes()), (0, 0));
        assert!(l.by_source.is_empty(), "no key left behind");
        assert!(l.admit(a, 100).is_ok());
    }
}
