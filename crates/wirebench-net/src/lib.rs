//! wirebench's socket layer: everything that touches the kernel, behind narrow traits.
//!
//! - [`batch`]: UDP GSO/GRO batches and socket buffer sizing.
//! - [`drops`]: what the kernel dropped on a UDP socket (`/proc/net/udp`).
//! - [`fanout`]: one datagram to many addresses in one `sendmmsg` (the relay).
//! - [`io`]: the seam. `ProbeIo` (send a probe, receive until a deadline) and `Clock`.
//! - [`udp`] and [`tcp`]: the real probe transports, blocking or busy-polling.
//! - [`multicast`], [`iface`]: group joins and interface lookup.
//! - [`pin`]: CPU pinning and "where am I running".
//! - [`pmtu`]: Don't-Fragment sockets and the kernel's path MTU, for `doctor`.
//! - [`priority`]: the calling thread's nice value (a stream receiver outranks its sender).
//! - [`snmp`]: the kernel's protocol counters (`/proc/net/snmp`), for loss attribution.
//! - [`ready`]: readiness of many sockets (epoll) with nanosecond sleeps, and writability.
//! - `fake` (feature `fake`): an in-memory echo link on a virtual clock for the engines' tests,
//!   and `alloc_count`, a counting allocator for no-allocation tests.
//!
//! This is the only crate allowed `unsafe`; each use carries a `// SAFETY:` comment.

#[cfg(feature = "fake")]
pub mod alloc_count;
pub mod batch;
pub mod clock;
pub mod drops;
mod error;
#[cfg(feature = "fake")]
pub mod fake;
pub mod fanout;
pub mod iface;
pub mod io;
mod mmsg;
pub mod multicast;
pub mod pin;
pub mod pmtu;
pub mod priority;
pub mod ready;
pub mod snmp;
pub mod tcp;
pub mod tcpinfo;
pub mod udp;
mod wait;

pub use error::NetError;

/// Waits up to `timeout` for `fd` to become readable (`ppoll`, nanosecond resolution).
/// True if it is.
pub fn wait_readable(fd: &impl std::os::fd::AsFd, timeout: std::time::Duration) -> std::io::Result<bool> {
    wait::readable(fd, u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX))
}
