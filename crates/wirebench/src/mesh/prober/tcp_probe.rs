//! The prober's TCP targets: a probe due goes on the kept-open connection, or starts one (and
//! waits for it), a finished connect sends the probe that waited, replies are read as they
//! come (16 KiB per wake-up at most, `tcp::READ_PER_WAKE`), and connects that take longer than the probe timeout are given up at the tick.

use std::sync::atomic::Ordering;

use wirebench_net::clock::Clock as _;

use super::tcp::{self, Conn, Drain};
use super::{Prober, stamp};

impl Prober {
    /// TCP probe `seq` of target `id` is due.
    pub(super) fn send_tcp_due(&mut self, id: u64, seq: u64, now: u64) {
        let Some(slot) = self.slots.get_mut(&id) else { return };
        match slot.conn.as_mut() {
            Some(Conn::Up { .. }) => self.send_tcp(id, seq),
            Some(Conn::Connecting { waiting, .. }) => {
                // Already one probe waiting for the connection: this one cannot go.
                slot.target.on_send(seq, now, &self.windows);
                if waiting.is_none() {
                    *waiting = Some(seq);
                }
            }
            Some(Conn::Down { retry_at }) if now >= *retry_at => {
                if let Ok(stream) = tcp::connect(slot.peer.addr)
                    && self.ready.add_writable(&stream, id).is_ok()
                {
                    slot.conn = Some(Conn::Connecting { stream, since: now, waiting: Some(seq) });
                } else {
                    slot.target.on_send(seq, now, &self.windows);
                    slot.conn = Some(Conn::Down { retry_at: now + self.windows.timeout_ns });
                }
            }
            _ => slot.target.on_send(seq, now, &self.windows),
        }
    }

    /// Sends TCP probe `seq` of target `id` on its open connection (closing it if it cannot
    /// take the probe).
    fn send_tcp(&mut self, id: u64, seq: u64) {
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let Some(Conn::Up { stream, owed, .. }) = slot.conn.as_mut() else { return };
        let t1 = self.clock.now_ns();
        stamp(&mut self.probe, self.cfg.key.as_ref(), self.session.wrapping_add(id), seq, t1);
        let ok = tcp::send(stream, &self.probe);
        *owed += u64::from(ok);
        slot.target.on_send(seq, t1, &self.windows);
        if !ok {
            let _ = self.ready.remove(&*stream);
            slot.conn = Some(Conn::Down { retry_at: t1 });
        }
    }

    /// A TCP target's socket is ready: a connect finished, or replies arrived.
    pub(super) fn on_ready(&mut self, id: u64) {
        let connecting = self.slots.get(&id).is_some_and(|s| matches!(s.conn, Some(Conn::Connecting { .. })));
        if connecting { self.connect_done(id) } else { self.read_tcp(id) }
    }

    /// A connect finished: the connection is up (and the probe that waited goes now), or it
    /// failed (and that probe is lost).
    fn connect_done(&mut self, id: u64) {
        let now = self.clock.now_ns();
        let timeout = self.windows.timeout_ns;
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let Some(Conn::Connecting { stream, .. }) = slot.conn.as_ref() else { return };
        let Some(ok) = tcp::finished(stream) else { return };
        let Some(Conn::Connecting { stream, waiting, .. }) = slot.conn.take() else { return };
        if !ok || self.ready.set_readable(&stream, id).is_err() {
            let _ = self.ready.remove(&stream);
            if let Some(seq) = waiting {
                slot.target.on_send(seq, now, &self.windows); // could not be sent: lost
            }
            slot.conn = Some(Conn::Down { retry_at: now + timeout });
            return;
        }
        slot.conn = Some(Conn::Up { stream, rbuf: Vec::with_capacity(tcp::RBUF_CAPACITY), owed: 0 });
        if let Some(seq) = waiting {
            self.send_tcp(id, seq);
        }
    }

    /// Connects that took longer than the probe timeout: given up, their waiting probe lost.
    pub(super) fn expire_connects(&mut self, now: u64) {
        let timeout = self.windows.timeout_ns;
        for slot in self.slots.values_mut() {
            if let Some(Conn::Connecting { stream, since, waiting }) = slot.conn.as_mut()
                && now >= *since + timeout
            {
                let _ = self.ready.remove(&*stream);
                if let Some(seq) = waiting.take() {
                    slot.target.on_send(seq, now, &self.windows); // could not be sent: lost
                }
                slot.conn = Some(Conn::Down { retry_at: now + timeout });
            }
        }
    }

    /// Replies on a TCP target's connection: at most [`tcp::READ_PER_WAKE`] bytes per
    /// wake-up (so `frames` holds at most that much). A connection that is not a stream of
    /// probe replies (bad framing, or more frames than probes sent on it: a peer streaming
    /// without end is cut at once, not read for ever) is closed, counted, and opened again
    /// for a probe after the timeout; its frames are dropped (its probes time out as lost).
    fn read_tcp(&mut self, id: u64) {
        let now = self.clock.now_ns();
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let Some(Conn::Up { stream, rbuf, owed }) = slot.conn.as_mut() else { return };
        let (frames, sizes) = (&mut self.frames, &mut self.frame_at);
        frames.clear();
        sizes.clear();
        let clock = &self.clock;
        let drain = tcp::read(
            stream,
            rbuf,
            || clock.now_ns(),
            |f, at_ns| {
                frames.extend_from_slice(f);
                sizes.push((f.len(), at_ns));
            },
        );
        let got = sizes.len() as u64;
        let drain = if got > *owed { Drain::NotProbes } else { drain };
        *owed -= got.min(*owed);
        let retry_at = match drain {
            Drain::Open => None,
            Drain::Closed => Some(now),
            Drain::NotProbes => {
                frames.clear();
                sizes.clear();
                self.shared.tcp_not_probes.fetch_add(1, Ordering::Relaxed);
                Some(now + self.windows.timeout_ns)
            }
        };
        if let Some(retry_at) = retry_at {
            let _ = self.ready.remove(&*stream);
            slot.conn = Some(Conn::Down { retry_at });
        }
        let (frames, sizes) = (std::mem::take(&mut self.frames), std::mem::take(&mut self.frame_at));
        let mut at = 0;
        for &(len, at_ns) in &sizes {
            self.on_reply(id, &frames[at..at + len], at_ns);
            at += len;
        }
        (self.frames, self.frame_at) = (frames, sizes);
    }
}
