//! A client's receive side and its link accounting: timing each message, the delivery
//! verdict, the upload rate as written to the socket and the modelled download.

use std::sync::atomic::Ordering;

use wirebench_core::latency;
use wirebench_core::load::delivery::{End, Verdict};
use wirebench_core::load::record::{Arrival, ErrorKind};
use wirebench_core::load::{Link, Shaper, msg};

use super::Plan;
use super::ws::WsError;
use crate::load::stats::Stats;

/// Payload bits/s over `bytes` between two times, ns.
fn bps(bytes: u64, first: Option<u64>, last: u64) -> u64 {
    let span = first.map_or(0, |f| last.saturating_sub(f));
    if span == 0 {
        return 0;
    }
    u64::try_from(u128::from(bytes) * 8_000_000_000 / u128::from(span)).unwrap_or(u64::MAX)
}

/// The upload: the shaper says when a frame may go; the rate is measured from the
/// actual writes.
#[derive(Debug)]
pub(super) struct Up {
    shaper: Shaper,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    /// Frames written.
    pub(super) frames: u64,
}

impl Up {
    pub(super) fn new(link: Option<Link>) -> Option<Self> {
        link.map(|l| Self { shaper: Shaper::new(l), bytes: 0, first_ns: None, last_ns: 0, frames: 0 })
    }

    /// When a frame handed over now may be written.
    pub(super) fn due(&mut self, len: u64, now: u64) -> u64 {
        self.shaper.arrive(len, now)
    }

    /// A frame of `len` bytes was written to the socket at `at`.
    pub(super) fn wrote(&mut self, len: u64, at: u64) {
        self.first_ns.get_or_insert(at);
        self.last_ns = at;
        self.bytes += len;
        self.frames += 1;
    }

    /// Payload bits/s written, first to last write.
    pub(super) fn bps(&self) -> u64 {
        bps(self.bytes, self.first_ns, self.last_ns)
    }
}

/// The download, modelled: a received frame counts as delivered when the shaped link
/// would have delivered it (nothing here reacts to a received message, so nothing needs
/// holding; the figures say "modelled").
#[derive(Debug)]
pub(super) struct Down {
    shaper: Shaper,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: u64,
}

impl Down {
    pub(super) fn new(link: Option<Link>) -> Option<Self> {
        link.map(|l| Self { shaper: Shaper::new(l), bytes: 0, first_ns: None, last_ns: 0 })
    }

    /// The modelled arrival of a frame read now.
    fn pass(&mut self, len: u64, now: u64) -> u64 {
        let leave = self.shaper.leave(len, now);
        self.first_ns.get_or_insert(now);
        self.last_ns = leave;
        self.bytes += len;
        leave.saturating_add(self.shaper.delay_ns())
    }

    /// Modelled payload bits/s, first arrival to last departure from the model's bucket.
    pub(super) fn bps(&self) -> u64 {
        bps(self.bytes, self.first_ns, self.last_ns)
    }
}

/// How a connection that failed ended.
pub(super) fn end_of(e: &WsError) -> End {
    match e {
        WsError::Reset => End::Lost,
        WsError::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            End::Lost
        }
        _ => End::Failed,
    }
}

/// Times one received message and counts it for or against the accounting.
pub(super) fn on_message(id: u64, b: &[u8], plan: &Plan, stats: &Stats, down: Option<&mut Down>) {
    let now = plan.now_ns();
    let arrive = down.map_or(now, |d| d.pass(b.len() as u64, now));
    let Some(seen) = msg::parse(b) else {
        stats.with(|s| s.error(ErrorKind::Malformed));
        return;
    };
    let types = plan.cfg.mix.types();
    let Some(t) = types.iter().position(|e| e.name == seen.kind) else {
        stats.with(|s| s.error(ErrorKind::UnknownType));
        return;
    };
    // It arrived, whatever its time stamp says.
    let verdict = stats.book.on_arrival(id, seen.sender, seen.seq, seen.ts_us, types[t].request);
    let a = if verdict == Verdict::Expected { Arrival::Expected } else { Arrival::Unexpected };
    let at_ns = plan.wall0_ns + arrive;
    let Some(delay) = at_ns.checked_sub(seen.ts_us.saturating_mul(1_000)) else {
        stats.with(|s| s.error(ErrorKind::NegativeDelay));
        return;
    };
    let intended = seen.it_us.and_then(|it| at_ns.checked_sub(it.saturating_mul(1_000)));
    stats.with(|s| {
        if arrive > now {
            latency::record(&mut s.down_hold, arrive - now);
        }
        if seen.sender == Some(id) {
            s.on_reply(t, delay, a);
        } else {
            s.on_delivery(t, delay, intended, a);
        }
    });
    if plan.cfg.link_down.is_some() {
        stats.down_frames.fetch_add(1, Ordering::Relaxed);
    }
}
