//! The seam between the engines and the kernel (STYLE C2): one trait per resource.

use std::io;
use std::net::SocketAddr;

pub use crate::clock::Clock;
pub use crate::stamp::{Stamp, Support};

/// A datagram or frame that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes written into the caller's buffer.
    pub len: usize,
    /// Who sent it.
    pub from: SocketAddr,
    /// When it arrived, on the transport's clock (monotonic ns).
    pub at_ns: u64,
    /// The kernel's RX timestamp, when the transport has them on.
    pub kernel: Option<KernelRx>,
}

/// A datagram's kernel RX timestamp, with the wall clock read right after `at_ns`, so the
/// kernel's time (`CLOCK_REALTIME`) can be set against the application's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelRx {
    /// Software and hardware RX times.
    pub at: Stamp,
    /// The wall clock, read right after the application's receive time `at_ns`.
    pub at_wall_ns: u64,
}

/// Sends probes to a fixed target and receives replies (from one or many responders).
pub trait ProbeIo {
    /// Sends one probe (a whole datagram, or a whole frame on a stream).
    fn send(&mut self, buf: &[u8]) -> io::Result<()>;

    /// Waits for the next datagram or frame until the clock reaches `deadline_ns`, and
    /// returns `None` if none came. A blocking implementation may return up to half its
    /// configured timeout late; callers judge lateness from the timestamps, not from when
    /// this returns.
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>>;

    /// The kernel's TX time of the probe with sequence number `seq` (as stamped in it), once
    /// the kernel gave it: reads what is queued, never waits. `None` without TX timestamps.
    fn tx_stamp(&mut self, _seq: u64) -> Option<Stamp> {
        None
    }

    /// Which kernel timestamps this transport gives.
    fn timestamps(&self) -> Support {
        Support::default()
    }
}
