//! Wire formats. Every datagram and frame starts with the same 4 bytes: a 16-bit magic, a
//! version and a kind, so a receiver can tell ours from foreign traffic before it reads
//! further. All integers are big-endian. `docs/wire-format.md` is the prose version.
//! The one exception is [`stamp`]: the standard's own packets, on their own sockets.

pub mod control;
pub mod handshake;
pub mod mesh;
pub mod probe;
pub mod relay;
pub mod stamp;
pub mod stream;

/// `"WB"`: the first two bytes of every wirebench datagram and frame.
pub const MAGIC: u16 = 0x5742;
/// The wire version this build speaks.
pub const VERSION: u8 = 1;

/// What a message is, from its fourth byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A latency probe from `ping` to `serve`.
    Probe = 1,
    /// The echo of a probe, from `serve` back to `ping`.
    Reply = 2,
    /// A sequenced stream datagram or frame (`stream`, `listen`).
    Stream = 3,
    /// A control frame (length-prefixed JSON) on a TCP connection to `serve`.
    Control = 4,
    /// A relayed multicast datagram, probe or answer between `relay`s.
    Relay = 5,
}

impl Kind {
    /// The kind for a wire byte, if this build knows it.
    pub const fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Probe),
            2 => Some(Self::Reply),
            3 => Some(Self::Stream),
            4 => Some(Self::Control),
            5 => Some(Self::Relay),
            _ => None,
        }
    }
}

/// Checks the four bytes every wirebench message starts with: magic, version and `kind`.
/// `need` is the length a truncation reports (the decoder's fixed header).
pub(crate) fn check_preamble(buf: &[u8], kind: Kind, need: usize) -> Result<(), DecodeError> {
    check_preamble_version(buf, kind, VERSION, need)
}

/// [`check_preamble`] for a kind whose format has a version of its own.
pub(crate) fn check_preamble_version(buf: &[u8], kind: Kind, version: u8, need: usize) -> Result<(), DecodeError> {
    if buf.len() < 4 {
        return Err(DecodeError::Truncated { need, got: buf.len() });
    }
    let magic = u16::from_be_bytes([buf[0], buf[1]]);
    if magic != MAGIC {
        return Err(DecodeError::Foreign(magic));
    }
    if buf[2] != version {
        return Err(DecodeError::Version(buf[2]));
    }
    if buf[3] != kind as u8 {
        return Err(DecodeError::Kind(buf[3]));
    }
    Ok(())
}

/// Why a decoder rejected its input. Copy, so counting it in a hot loop costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the fixed header, or than the length the header declares.
    #[error("truncated: need {need} bytes, got {got}")]
    Truncated {
        /// Bytes the message needs.
        need: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// Does not start with our magic: someone else's traffic.
    #[error("foreign: magic {0:#06x}")]
    Foreign(u16),
    /// Ours, but a wire version this build does not speak.
    #[error("unsupported wire version {0}")]
    Version(u8),
    /// Ours, but a kind this build does not know or does not expect here.
    #[error("unexpected kind {0}")]
    Kind(u8),
    /// The declared length disagrees with what arrived.
    #[error("length field says {declared}, datagram has {got}")]
    Length {
        /// What the header declares.
        declared: usize,
        /// What arrived.
        got: usize,
    },
    /// Ours and well-framed, but a field holds a value the format does not allow.
    #[error("bad field: {0}")]
    Field(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_byte() {
        for k in [Kind::Probe, Kind::Reply, Kind::Stream, Kind::Control, Kind::Relay] {
            assert_eq!(Kind::from_byte(k as u8), Some(k));
        }
        // bytes on either side of the known kinds are unknown
        assert_eq!(Kind::from_byte(0), None);
        assert_eq!(Kind::from_byte(6), None);
    }

    #[test]
    fn the_preamble_is_judged_on_its_four_bytes_alone() {
        let [m0, m1] = MAGIC.to_be_bytes();
        let ours = [m0, m1, VERSION, Kind::Stream as u8];
        assert_eq!(check_preamble(&ours, Kind::Stream, 20), Ok(()));
        // four foreign bytes are foreign, not a truncated message of ours
        assert_eq!(check_preamble(&[0, 0, VERSION, 3], Kind::Stream, 20), Err(DecodeError::Foreign(0)));
        assert_eq!(check_preamble(&ours[..3], Kind::Stream, 20), Err(DecodeError::Truncated { need: 20, got: 3 }));
        assert_eq!(check_preamble_version(&ours, Kind::Stream, 2, 20), Err(DecodeError::Version(VERSION)));
        assert_eq!(check_preamble(&ours, Kind::Relay, 20), Err(DecodeError::Kind(3)));
    }
}
