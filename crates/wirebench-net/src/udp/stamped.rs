//! The UDP probe transport with kernel timestamps: every receive is a `recvmsg` that brings
//! its RX stamp, and every probe sent is keyed (`OPT_ID`: the socket's count of datagrams
//! sent) so its TX stamp, read back from the error queue, is matched to the probe's
//! sequence number. Rings of fixed size, made once: nothing allocates per probe.
//!
//! The error queue is kept short: it is read when the caller asks for a stamp (up to that
//! probe's: one `recvmsg` in a ping-pong), before a `ppoll` (a queued TX stamp would end it
//! early), and after every 64 sends without a read, because what waits there counts against
//! the socket's receive buffer. A blocking read and a busy poll do not see the queue, so
//! they leave it alone: no syscall beyond the one stamp read per probe. A device that gives
//! no TX stamps at all (after 256 sends) has them turned off.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use wirebench_core::wire::probe::Probe;

use super::{UdpProbeIo, Wait};
use crate::clock::{Clock, wall_now_ns};
use crate::io::{KernelRx, Received};
use crate::stamp::{self, Receiver, Stamp};
use crate::wait::{self, Ready};

const RING: usize = 4096;
const MASK: u64 = RING as u64 - 1;
/// Sends without reading the error queue before it is read anyway.
const DRAIN_EVERY: u32 = 64;
/// Sends without a single TX stamp after which TX stamps are turned off.
const GIVE_UP_AFTER: u32 = 256;

/// Timestamp state of one socket.
#[derive(Debug)]
pub(crate) struct Stamping {
    rx: Receiver,
    /// TX stamps are on.
    pub(crate) tx: bool,
    /// Key of the next datagram sent.
    next_key: u32,
    /// One past the highest key read back.
    read_to: u32,
    got_any: bool,
    /// Sequence number of the probe with key `k`, at `k & MASK`.
    seq_of_key: Box<[u64]>,
    /// (sequence number, TX stamp), at `seq & MASK`.
    tx_of_seq: Box<[(u64, Stamp)]>,
}

impl Stamping {
    pub(crate) fn new(sock: &UdpSocket) -> io::Result<Self> {
        let support = stamp::enable(sock, true)?;
        Ok(Self {
            rx: Receiver::default(),
            tx: support.tx,
            next_key: 0,
            read_to: 0,
            got_any: false,
            seq_of_key: vec![u64::MAX; RING].into_boxed_slice(),
            tx_of_seq: vec![(u64::MAX, Stamp::default()); RING].into_boxed_slice(),
        })
    }

    /// Reads the queued TX stamps, in the order sent, until the one of probe `want` was read
    /// (one `recvmsg` when it is next, as it is in a ping-pong) or the queue is empty.
    /// Returns how many were read.
    fn drain(&mut self, sock: &UdpSocket, want: Option<u64>) -> io::Result<usize> {
        let mut n = 0;
        while let Some(s) = self.rx.tx(sock)? {
            n += 1;
            // A key older than the ring (its slot reused) cannot be matched: skip it.
            if self.next_key.wrapping_sub(s.key) as usize > RING {
                continue;
            }
            let seq = self.seq_of_key[(u64::from(s.key) & MASK) as usize];
            self.tx_of_seq[(seq & MASK) as usize] = (seq, s.at);
            self.read_to = s.key.wrapping_add(1);
            self.got_any = true;
            if want == Some(seq) {
                break;
            }
        }
        Ok(n)
    }

    /// After a datagram carrying `buf` was sent.
    pub(crate) fn on_sent(&mut self, sock: &UdpSocket, buf: &[u8]) {
        if !self.tx {
            return;
        }
        let seq = Probe::parse(buf).map_or(u64::MAX, |p| p.seq());
        self.seq_of_key[(u64::from(self.next_key) & MASK) as usize] = seq;
        self.next_key = self.next_key.wrapping_add(1);
        if self.next_key.wrapping_sub(self.read_to) >= DRAIN_EVERY {
            let _ = self.drain(sock, None);
        }
        if !self.got_any && self.next_key >= GIVE_UP_AFTER {
            self.tx = false;
            let _ = stamp::disable_tx(sock);
        }
    }

    pub(crate) fn tx_stamp(&mut self, sock: &UdpSocket, seq: u64) -> Option<Stamp> {
        let slot = (seq & MASK) as usize;
        if self.tx_of_seq[slot].0 != seq && self.tx && self.read_to != self.next_key {
            let _ = self.drain(sock, Some(seq));
        }
        let (tag, at) = self.tx_of_seq[slot];
        (tag == seq).then_some(at)
    }
}

impl UdpProbeIo {
    /// `recv_until` with the RX stamp of each datagram.
    pub(super) fn recv_stamped(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        let st = self.stamps.as_mut().expect("called with timestamps on");
        loop {
            let now = self.clock.now_ns();
            let remaining = deadline_ns.saturating_sub(now);
            if self.wait == Wait::Block && remaining < self.timeout_ns / 2 {
                // A queued TX stamp would end the wait at once (POLLERR): read them first.
                // A blocking read or a busy poll does not see them, and `tx_stamp` reads the
                // one it needs after the reply came, so those paths leave the queue alone.
                if st.tx && st.read_to != st.next_key {
                    st.drain(&self.sock, None)?;
                }
                match wait::poll_until(&self.sock, &self.clock, deadline_ns, &mut self.lead)? {
                    Ready::Timeout => return Ok(None),
                    // A TX stamp arrived while waiting: read it and wait again. Nothing in
                    // the error queue means an error is pending: the read reports it.
                    Ready::ErrOnly if st.drain(&self.sock, None)? > 0 => continue,
                    Ready::ErrOnly | Ready::In => {}
                }
            }
            match st.rx.recv(&self.sock, buf) {
                Ok(r) => {
                    let at_ns = self.clock.now_ns();
                    let at_wall_ns = wall_now_ns();
                    let from = r.from.or(self.peer).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
                    let kernel = Some(KernelRx { at: r.at, at_wall_ns });
                    return Ok(Some(Received { len: r.len, from, at_ns, kernel }));
                }
                Err(e) => {
                    if wait::after_failed_read(e, self.wait, now, deadline_ns)? {
                        return Ok(None);
                    }
                }
            }
        }
    }
}
