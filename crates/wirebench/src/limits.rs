//! Process limits and usage for the commands that hold many sockets (load, room, serve, the
//! mesh prober): open files, CPU time and peak memory from getrusage, WebSocket limits.

use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage, setrlimit};
#[cfg(feature = "load")]
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// File descriptors the process needs beside its sockets (stdio, runtime, files).
pub const SPARE_FDS: u64 = 64;

/// Raises the soft open-file limit to the hard limit; returns the (new) soft limit.
pub fn raise_nofile() -> u64 {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return 1024 };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

/// The hard open-file limit.
pub fn nofile_hard() -> u64 {
    getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(_, h)| h)
}

/// The largest message (and frame) a client accepts from the server.
pub const MAX_MESSAGE: usize = 1 << 20;

/// A load client's read buffer: 1 KiB holds several default-sized messages (a 128-byte
/// message is a 130-byte frame); it grows to hold a larger frame whole, and shrinks back
/// once that frame is read.
pub const READ_CHUNK: usize = 1024;

/// The buffers of the engine tungstenite builds at the end of the client handshake, which
/// the client takes apart at once (the open connection is its own code): a few KB, not
/// tungstenite's default 128 KiB.
#[cfg(feature = "load")]
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(READ_CHUNK).write_buffer_size(0)
}

/// This process's user and system CPU so far, ns.
pub fn cpu_ns() -> (u64, u64) {
    let Ok(u) = getrusage(UsageWho::RUSAGE_SELF) else { return (0, 0) };
    let ns = |t: nix::sys::time::TimeVal| {
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_usec()).unwrap_or(0) * 1_000
    };
    (ns(u.user_time()), ns(u.system_time()))
}

/// Peak resident set of this process, bytes.
pub fn max_rss_bytes() -> u64 {
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| u64::try_from(u.max_rss()).unwrap_or(0) * 1024)
}

/// CPU used since a starting point.
#[derive(Debug, Clone, Copy)]
pub struct ProcessCpu(u64);

impl ProcessCpu {
    /// Starts counting now.
    pub fn now() -> Self {
        let (u, s) = cpu_ns();
        Self(u + s)
    }

    /// User + system CPU since [`ProcessCpu::now`], ns.
    pub fn since(&self) -> u64 {
        let (u, s) = cpu_ns();
        (u + s).saturating_sub(self.0)
    }
}
