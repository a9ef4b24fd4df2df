//! What serve counted. Every datagram, frame, connection and session lands in exactly one
//! field; refusals are counted by cause so an operator can see an attack for what it is.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use wirebench_core::wire::DecodeError;
use wirebench_report::words::counted;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Serve's counters (relaxed atomics, one per outcome).
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A plain copy of [`Counters`], plus the kernel's drop count on the probe sockets.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
        pub struct CounterSnapshot {
            $($(#[$doc])* pub $name: u64,)*
            /// Datagrams the kernel dropped on serve's probe sockets (receive buffer full),
            /// from `/proc/net/udp`.
            pub kernel_drops: u64,
        }

        impl Counters {
            /// A plain copy (kernel drops are filled in by the server).
            pub fn snapshot(&self) -> CounterSnapshot {
                CounterSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* kernel_drops: 0 }
            }
        }
    };
}

counters! {
    /// UDP probes answered.
    udp_probes,
    /// TCP probes answered.
    tcp_probes,
    /// TCP connections accepted.
    tcp_connections,
    /// Too short, or a length field that disagrees.
    malformed,
    /// Not ours (wrong magic).
    foreign,
    /// Ours, another wire version.
    bad_version,
    /// Ours, but not a probe (a reply, or an unknown kind): never answered.
    unexpected_kind,
    /// Replies the kernel would not send.
    send_errors,
    /// Stream sessions served.
    streams,
    /// Control connections broken (bad frame, bad request, a client gone mid-session).
    control_errors,
    /// Connections refused at the connection cap (told why, then closed).
    refused_connections,
    /// Connections closed for sending nothing (first frame, idle, a frame stalled part-way).
    timed_out,
    /// Sessions refused by the budget (sessions, per source, memory) or the anonymous rule.
    refused_sessions,
    /// Start requests whose token proof was wrong or missing.
    auth_failures,
    /// Clients of the old control version (told to upgrade).
    old_clients,
    /// Datagrams at a knock port that did not carry the session's secret from the client.
    bad_knocks,
    /// accept() failures (EMFILE and the like), each followed by a back-off.
    accept_errors,
    /// Probes without a right tag when a probe key is set (mesh agents): never answered.
    unauthenticated,
    /// STAMP test packets reflected.
    stamp_reflected,
    /// STAMP packets too short for the mode, or malformed.
    stamp_malformed,
    /// STAMP packets whose HMAC did not match the key.
    stamp_auth_failures,
    /// STAMP packets from a source outside --stamp-allow.
    stamp_not_allowed,
    /// STAMP packets over their source's rate cap.
    stamp_over_rate,
    /// STAMP packets of a new session when the stateful table was full.
    stamp_sessions_full,
}

impl Counters {
    pub(super) fn rejected(&self, e: DecodeError) {
        let c = match e {
            DecodeError::Truncated { .. } | DecodeError::Length { .. } | DecodeError::Field(_) => &self.malformed,
            DecodeError::Foreign(_) => &self.foreign,
            DecodeError::Version(_) => &self.bad_version,
            DecodeError::Kind(_) => &self.unexpected_kind,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds one to `c`.
    pub(super) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Display for CounterSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "answered {} udp + {} tcp probes on {}; dropped {} malformed, {} foreign, {} other-version, {} not-a-probe; {}; {}, {}",
            self.udp_probes,
            self.tcp_probes,
            counted(self.tcp_connections, "tcp connection", "tcp connections"),
            self.malformed,
            self.foreign,
            self.bad_version,
            self.unexpected_kind,
            counted(self.send_errors, "send error", "send errors"),
            counted(self.streams, "stream", "streams"),
            counted(self.control_errors, "control error", "control errors"),
        )?;
        let refusals = [
            (self.refused_connections, "connection refused at the cap", "connections refused at the cap"),
            (self.timed_out, "connection timed out", "connections timed out"),
            (self.refused_sessions, "session refused", "sessions refused"),
            (self.auth_failures, "token failure", "token failures"),
            (self.old_clients, "old client", "old clients"),
            (self.bad_knocks, "bad knock", "bad knocks"),
            (self.accept_errors, "accept error", "accept errors"),
            (self.unauthenticated, "unauthenticated probe", "unauthenticated probes"),
            (self.stamp_reflected, "STAMP packet reflected", "STAMP packets reflected"),
            (self.stamp_malformed, "malformed STAMP packet", "malformed STAMP packets"),
            (self.stamp_auth_failures, "STAMP authentication failure", "STAMP authentication failures"),
            (
                self.stamp_not_allowed,
                "STAMP packet from a source not allowed",
                "STAMP packets from sources not allowed",
            ),
            (self.stamp_over_rate, "STAMP packet over its source's rate", "STAMP packets over their source's rate"),
            (self.stamp_sessions_full, "STAMP session refused (table full)", "STAMP sessions refused (table full)"),
            (
                self.kernel_drops,
                "datagram dropped by the kernel (receive buffer full)",
                "datagrams dropped by the kernel (receive buffer full)",
            ),
        ];
        for (n, one, many) in refusals.iter().filter(|(n, ..)| *n > 0) {
            write!(f, "; {}", counted(*n, one, many))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::CounterSnapshot;

    /// One of a thing is singular in the stop line, every other count plural (a serve that
    /// refused one token printed "1 token failures").
    #[test]
    fn the_stop_line_counts_in_english() {
        let one = CounterSnapshot {
            tcp_connections: 1,
            send_errors: 1,
            streams: 1,
            control_errors: 1,
            refused_sessions: 1,
            auth_failures: 1,
            ..CounterSnapshot::default()
        };
        assert_eq!(
            one.to_string(),
            "answered 0 udp + 0 tcp probes on 1 tcp connection; dropped 0 malformed, 0 foreign, 0 other-version, \
             0 not-a-probe; 1 send error; 1 stream, 1 control error; 1 session refused; 1 token failure"
        );
        let two = CounterSnapshot { tcp_connections: 2, streams: 2, auth_failures: 2, ..CounterSnapshot::default() };
        assert_eq!(
            two.to_string(),
            "answered 0 udp + 0 tcp probes on 2 tcp connections; dropped 0 malformed, 0 foreign, 0 other-version, \
             0 not-a-probe; 0 send errors; 2 streams, 0 control errors; 2 token failures"
        );
    }
}
