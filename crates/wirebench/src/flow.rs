//! The data paths shared by the stream client and `serve`: a paced sender and a receiver
//! that accounts per publisher, over UDP (GSO/GRO batches) or TCP (frames).
//!
//! Sending: message `n` of a paced stream is due at `start + n / rate`; messages go in
//! batches of `b` (one GSO send) at their first message's time, `b` the messages due in
//! about 50 µs, at least 4 when 4 are due within 400 µs (1 at low rates, so pacing stays
//! even). Between batches the thread sleeps on an absolute timer with 1 ns slack and spins
//! only the last microseconds (`wirebench_core::schedule::spin`). Flat out (`max`) sends
//! full batches on a blocking socket, so the kernel's send buffer is the only brake, as
//! with iperf.
//!
//! Receiving: one clock read per `recvmmsg` (a GRO batch shares its arrival time), then each
//! datagram is checked and accounted in its publisher's `StreamRx`. The receiving socket has
//! GRO on before the sender learns its port, and its thread asks for a higher priority than
//! the sender's (`recv::RECEIVER_NICE`, `send::LOCAL_FLAT_OUT_NICE`).

pub mod recv;
pub mod send;

/// Socket buffers asked for per stream socket (granted past `rmem_max` only to root).
pub const STREAM_BUFFER: usize = 16 << 20;
