//! wirebench's socket layer: everything that touches the kernel, behind narrow traits.
//!
//! - [`batch`]: UDP GSO/GRO batches and socket buffer sizing.
//! - [`counters`]: the kernel's drop counters (`/proc/net/snmp`, softnet, sysfs) read into core's
//!   snapshot.
//! - [`drops`]: what the kernel dropped on a UDP socket (`/proc/net/udp`).
//! - [`fanout`]: datagrams to many addresses in one `sendmmsg` (the relay); [`rxbatch`]: up to
//!   32 datagrams, with senders and kernel RX times, in one `recvmmsg` (the relay).
//! - [`io`]: the seam. `ProbeIo` (send a probe, receive until a deadline) and `Clock`.
//! - [`udp`] and [`tcp`]: the real probe transports, blocking or busy-polling.
//! - [`multicast`], [`iface`]: group joins and interface lookup.
//! - [`pin`]: CPU pinning and "where am I running".
//! - [`pmtu`]: Don't-Fragment sockets and the kernel's path MTU, for `doctor`.
//! - [`stamp`]: kernel timestamps (`SO_TIMESTAMPING`): RX with each receive, TX from the error
//!   queue, software and hardware; [`hwstamp`]: whether an interface stamps in hardware
//!   (`ethtool -T`) and whether that is on.
//! - [`timer`]: absolute sleeps on `CLOCK_MONOTONIC` and timer slack, for the stall meter.
//! - [`priority`]: the calling thread's nice value (a stream receiver outranks its sender).
//! - [`snmp`]: the kernel's protocol counters (`/proc/net/snmp`), for loss attribution;
//!   [`qdisc`]: the egress qdiscs' drops (netlink), for a stream sender's share of it.
//! - [`ready`]: readiness of many sockets (epoll) with nanosecond sleeps, and writability.
//! - `fake` (feature `fake`): an in-memory echo link on a virtual clock for the engines' tests,
//!   and `alloc_count`, a counting allocator for no-allocation tests.
//!
//! This is the only crate allowed `unsafe`; each use carries a `// SAFETY:` comment.

#[cfg(feature = "fake")]
pub mod alloc_count;
pub mod batch;
pub mod clock;
pub mod counters;
pub mod drops;
mod error;
#[cfg(feature = "fake")]
pub mod fake;
pub mod fanout;
pub mod hwstamp;
pub mod iface;
pub mod io;
mod mmsg;
pub mod multicast;
pub mod pin;
pub mod pmtu;
pub mod priority;
pub mod qdisc;
pub mod ready;
pub mod rusage;
pub mod rxbatch;
pub mod snmp;
pub mod stamp;
pub mod tcp;
pub mod tcpinfo;
pub mod timer;
pub mod udp;
mod wait;

pub use error::NetError;

/// Waits up to `timeout` for `fd` to become readable (`ppoll`, nanosecond resolution).
/// True if it is.
pub fn wait_readable(fd: &impl std::os::fd::AsFd, timeout: std::time::Duration) -> std::io::Result<bool> {
    wait::readable(fd, wirebench_core::units::nanos(timeout))
}
