//! The latency probe, and its reply (the same bytes with the kind changed).
//!
//! ```text
//! offset size field
//!      0    2 magic 0x5742
//!      2    1 version (1)
//!      3    1 kind (1 probe, 2 reply)
//!      4    2 total length in bytes (the datagram or TCP frame, padding included)
//!      6    1 flags (see FLAG_*)
//!      7    1 reserved, 0
//!      8    8 session id (chosen per run by the pinger)
//!     16    8 sequence number
//!     24    8 t1: pinger's send time, its own monotonic ns (echoed untouched)
//!     --- 32 bytes: the compact form, the size Aeron's benchmarks use
//!     32    8 t2: responder's receive time, its wall clock, ns since the Unix epoch
//!     40    8 t3: responder's send time, same clock
//!     --- 48 bytes: the full four-timestamp form
//!     48    .. padding up to the total length
//! ```
//!
//! The responder fills t2 and t3 only when the probe is at least [`FULL_LEN`] bytes, and
//! sets [`FLAG_TIMESTAMPS`] to say so. A reply is always exactly as long as its probe.

use super::{DecodeError, Kind, MAGIC, VERSION};

/// The compact probe: header, session, sequence and send time.
pub const MIN_LEN: usize = 32;
/// The full form that also carries the responder's receive and send times.
pub const FULL_LEN: usize = 48;
/// The largest probe: the most a UDP/IPv4 datagram can carry.
pub const MAX_LEN: usize = 65_507;

/// Set by the responder when t2 and t3 are filled in.
pub const FLAG_TIMESTAMPS: u8 = 0x01;
/// Set by the pinger to ask the responder to answer on its configured reply group
/// (Aeron's pong channel) instead of unicast to the sender.
pub const FLAG_REPLY_GROUP: u8 = 0x02;
/// Set by the responder beside [`FLAG_TIMESTAMPS`] when t2 is its kernel's software RX
/// timestamp (`SO_TIMESTAMPING`) rather than the time its application read the probe: its
/// dwell `t3 - t2` then includes its own wake-up.
pub const FLAG_KERNEL_RX: u8 = 0x04;

const LEN_OFFSET: usize = 4;
const FLAGS_OFFSET: usize = 6;
const SESSION_OFFSET: usize = 8;
const SEQ_OFFSET: usize = 16;
const T1_OFFSET: usize = 24;
const T2_OFFSET: usize = 32;
const T3_OFFSET: usize = 40;

/// Which layout a probe size gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// 32..48 bytes: round trip only.
    Compact,
    /// 48 bytes or more: round trip, responder dwell time, clock offset and one-way delay.
    Full,
}

impl Form {
    /// The form a probe of `len` bytes takes.
    pub const fn for_len(len: usize) -> Self {
        if len >= FULL_LEN { Self::Full } else { Self::Compact }
    }

    /// The name used in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Compact => "compact",
            Self::Full => "full",
        }
    }
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_be_bytes(b)
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Writes the fixed part of a probe into `buf` (whose length is the probe size) and zeroes
/// the responder timestamps. Call once per run; then [`stamp`] each send.
///
/// # Panics
/// If `buf` is shorter than [`MIN_LEN`] or longer than [`MAX_LEN`]; callers size it from a
/// validated config.
pub fn init(buf: &mut [u8], session: u64, flags: u8) {
    assert!((MIN_LEN..=MAX_LEN).contains(&buf.len()), "probe size out of range");
    buf.fill(0);
    buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    buf[2] = VERSION;
    buf[3] = Kind::Probe as u8;
    #[expect(clippy::cast_possible_truncation, reason = "checked against MAX_LEN above")]
    let len = buf.len() as u16;
    buf[LEN_OFFSET..LEN_OFFSET + 2].copy_from_slice(&len.to_be_bytes());
    buf[FLAGS_OFFSET] = flags;
    put_u64(buf, SESSION_OFFSET, session);
}

/// Sets the sequence number and send time of a buffer prepared by [`init`]: the only
/// per-probe work on the send path (two stores).
pub fn stamp(buf: &mut [u8], seq: u64, t1_ns: u64) {
    put_u64(buf, SEQ_OFFSET, seq);
    put_u64(buf, T1_OFFSET, t1_ns);
}

/// A checked view of a probe or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe<'a> {
    buf: &'a [u8],
}

impl<'a> Probe<'a> {
    /// Checks magic, version, kind (probe or reply) and length; never panics.
    pub fn parse(buf: &'a [u8]) -> Result<Self, DecodeError> {
        if buf.len() < 4 {
            return Err(DecodeError::Truncated { need: MIN_LEN, got: buf.len() });
        }
        let magic = u16::from_be_bytes([buf[0], buf[1]]);
        if magic != MAGIC {
            return Err(DecodeError::Foreign(magic));
        }
        if buf[2] != VERSION {
            return Err(DecodeError::Version(buf[2]));
        }
        if !matches!(Kind::from_byte(buf[3]), Some(Kind::Probe | Kind::Reply)) {
            return Err(DecodeError::Kind(buf[3]));
        }
        if buf.len() < MIN_LEN {
            return Err(DecodeError::Truncated { need: MIN_LEN, got: buf.len() });
        }
        let declared = usize::from(u16::from_be_bytes([buf[LEN_OFFSET], buf[LEN_OFFSET + 1]]));
        if declared != buf.len() || declared > MAX_LEN {
            return Err(DecodeError::Length { declared, got: buf.len() });
        }
        Ok(Self { buf })
    }

    /// Probe or reply.
    pub fn kind(&self) -> Kind {
        Kind::from_byte(self.buf[3]).unwrap_or(Kind::Probe)
    }
    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buf[FLAGS_OFFSET]
    }
    /// The pinger's session id.
    pub fn session(&self) -> u64 {
        u64_at(self.buf, SESSION_OFFSET)
    }
    /// The sequence number.
    pub fn seq(&self) -> u64 {
        u64_at(self.buf, SEQ_OFFSET)
    }
    /// The pinger's send time (its monotonic clock).
    pub fn t1(&self) -> u64 {
        u64_at(self.buf, T1_OFFSET)
    }
    /// The responder's receive and send times (its wall clock), when it filled them in.
    pub fn responder_times(&self) -> Option<(u64, u64)> {
        (self.flags() & FLAG_TIMESTAMPS != 0 && self.buf.len() >= FULL_LEN)
            .then(|| (u64_at(self.buf, T2_OFFSET), u64_at(self.buf, T3_OFFSET)))
    }
    /// Total length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Never true for a parsed probe; here for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Marks a reply made by [`make_reply`] as carrying the responder's kernel RX time in t2
/// (only a full-form reply carries t2; a compact one is left alone).
pub fn mark_kernel_rx(buf: &mut [u8]) {
    if buf.len() >= FULL_LEN && buf[3] == Kind::Reply as u8 {
        buf[FLAGS_OFFSET] |= FLAG_KERNEL_RX;
    }
}

/// Reads the total length a probe header declares, for framing probes on a TCP stream.
/// Checks magic, version and kind too, so a stream of garbage is rejected at its first
/// frame rather than misframed.
pub fn frame_len(header: &[u8; 8]) -> Result<usize, DecodeError> {
    let magic = u16::from_be_bytes([header[0], header[1]]);
    if magic != MAGIC {
        return Err(DecodeError::Foreign(magic));
    }
    if header[2] != VERSION {
        return Err(DecodeError::Version(header[2]));
    }
    if !matches!(Kind::from_byte(header[3]), Some(Kind::Probe | Kind::Reply)) {
        return Err(DecodeError::Kind(header[3]));
    }
    let len = usize::from(u16::from_be_bytes([header[4], header[5]]));
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return Err(DecodeError::Length { declared: len, got: header.len() });
    }
    Ok(len)
}

/// Turns a parsed probe (in `buf`, as received) into its reply, in place. When the probe
/// is large enough, writes the responder's receive time `t2` and the `t3` that
/// `now_wall_ns` gives just before the send. Returns false, and leaves `buf` alone, when
/// `buf` is not a probe (a reply must never be answered: that would loop).
pub fn make_reply(buf: &mut [u8], t2_wall_ns: u64, now_wall_ns: impl FnOnce() -> u64) -> bool {
    if buf.len() < MIN_LEN || buf[3] != Kind::Probe as u8 {
        return false;
    }
    buf[3] = Kind::Reply as u8;
    if buf.len() >= FULL_LEN {
        buf[FLAGS_OFFSET] |= FLAG_TIMESTAMPS;
        put_u64(buf, T2_OFFSET, t2_wall_ns);
        put_u64(buf, T3_OFFSET, now_wall_ns());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn probe(len: usize, session: u64, seq: u64, t1: u64) -> Vec<u8> {
        let mut b = vec![0xAA; len];
        init(&mut b, session, 0);
        stamp(&mut b, seq, t1);
        b
    }

    #[test]
    fn compact_probe_is_32_bytes_and_has_no_responder_times() {
        let mut b = probe(MIN_LEN, 7, 9, 11);
        assert!(make_reply(&mut b, 100, || 200));
        let p = Probe::parse(&b).unwrap();
        assert_eq!(p.kind(), Kind::Reply);
        assert_eq!((p.session(), p.seq(), p.t1()), (7, 9, 11));
        assert_eq!(p.responder_times(), None);
        assert_eq!(Form::for_len(MIN_LEN), Form::Compact);
    }

    #[test]
    fn full_probe_carries_t2_t3() {
        let mut b = probe(64, 1, 2, 3);
        assert!(make_reply(&mut b, 100, || 250));
        let p = Probe::parse(&b).unwrap();
        assert_eq!(p.responder_times(), Some((100, 250)));
        assert_eq!(b.len(), 64, "a reply is never larger than its probe");
    }

    #[test]
    fn form_names_and_the_views_accessors() {
        assert_eq!((Form::Compact.name(), Form::Full.name()), ("compact", "full"));
        let mut b = vec![0u8; 64];
        init(&mut b, 1, FLAG_REPLY_GROUP);
        let p = Probe::parse(&b).unwrap();
        assert_eq!((p.flags(), p.len(), p.is_empty()), (FLAG_REPLY_GROUP, 64, false));
        // a full-length probe without the timestamps flag carries no responder times
        assert_eq!(p.responder_times(), None);
        // a compact reply with the flag set has no room for them: none, and no panic
        let mut c = vec![0u8; MIN_LEN];
        init(&mut c, 1, FLAG_TIMESTAMPS);
        assert_eq!(Probe::parse(&c).unwrap().responder_times(), None);
    }

    #[test]
    fn the_boundaries_of_parse() {
        // four bytes are enough to tell a foreign datagram
        assert_eq!(Probe::parse(&[0x12, 0x34, VERSION, 0]), Err(DecodeError::Foreign(0x1234)));
        // the largest UDP payload is a valid probe
        let mut big = vec![0u8; MAX_LEN];
        init(&mut big, 1, 0);
        assert_eq!(Probe::parse(&big).map(|p| p.len()), Ok(MAX_LEN));
    }

    /// Only a full-form reply carries t2, so only it is marked as holding the kernel's RX
    /// time, beside the flags it already has.
    #[test]
    fn kernel_rx_marks_only_a_full_reply() {
        let mut full = probe(FULL_LEN, 1, 2, 3);
        assert!(make_reply(&mut full, 100, || 200));
        mark_kernel_rx(&mut full);
        assert_eq!(Probe::parse(&full).unwrap().flags(), FLAG_TIMESTAMPS | FLAG_KERNEL_RX);
        let mut compact = probe(MIN_LEN, 1, 2, 3);
        assert!(make_reply(&mut compact, 100, || 200));
        mark_kernel_rx(&mut compact);
        assert_eq!(Probe::parse(&compact).unwrap().flags(), 0, "a compact reply has no t2");
        let mut unanswered = probe(FULL_LEN, 1, 2, 3);
        mark_kernel_rx(&mut unanswered);
        assert_eq!(Probe::parse(&unanswered).unwrap().flags(), 0, "a probe is not a reply");
    }

    #[test]
    fn a_reply_is_never_answered() {
        let mut b = probe(MIN_LEN, 1, 2, 3);
        assert!(make_reply(&mut b, 0, || 0));
        let before = b.clone();
        assert!(!make_reply(&mut b, 0, || 0));
        assert_eq!(b, before);
    }

    #[test]
    fn rejects_wrong_magic_version_kind_and_length() {
        let good = probe(40, 1, 2, 3);
        let mut b = good.clone();
        b[0] = 0;
        assert!(matches!(Probe::parse(&b), Err(DecodeError::Foreign(_))));
        let mut b = good.clone();
        b[2] = 9;
        assert_eq!(Probe::parse(&b), Err(DecodeError::Version(9)));
        let mut b = good.clone();
        b[3] = 77;
        assert_eq!(Probe::parse(&b), Err(DecodeError::Kind(77)));
        assert_eq!(Probe::parse(&good[..36]), Err(DecodeError::Length { declared: 40, got: 36 }));
        assert_eq!(Probe::parse(&good[..20]), Err(DecodeError::Truncated { need: MIN_LEN, got: 20 }));
    }

    #[test]
    fn parse_and_frame_len_agree_past_the_largest_probe() {
        // 65,508 bytes: longer than any UDP probe can be.
        let mut b = vec![0u8; MAX_LEN + 1];
        b[..8].copy_from_slice(&[0x57, 0x42, 1, 1, 0xff, 0xe4, 0, 0]);
        assert!(Probe::parse(&b).is_err());
        let mut h = [0u8; 8];
        h.copy_from_slice(&b[..8]);
        assert!(frame_len(&h).is_err());
    }

    #[test]
    fn frame_len_reads_the_declared_length() {
        let b = probe(100, 1, 2, 3);
        let mut h = [0u8; 8];
        h.copy_from_slice(&b[..8]);
        assert_eq!(frame_len(&h), Ok(100));
        h[5] = 4;
        h[4] = 0;
        assert!(matches!(frame_len(&h), Err(DecodeError::Length { .. })));
        h[4..6].copy_from_slice(&65_535u16.to_be_bytes());
        assert!(matches!(frame_len(&h), Err(DecodeError::Length { .. })), "longer than any probe");
    }

    proptest! {
        #[test]
        fn round_trip(len in MIN_LEN..2000usize, session: u64, seq: u64, t1: u64, t2: u64, t3: u64) {
            let mut b = probe(len, session, seq, t1);
            let p = Probe::parse(&b).unwrap();
            prop_assert_eq!((p.kind(), p.session(), p.seq(), p.t1()), (Kind::Probe, session, seq, t1));
            prop_assert!(make_reply(&mut b, t2, || t3));
            let r = Probe::parse(&b).unwrap();
            prop_assert_eq!((r.kind(), r.session(), r.seq(), r.t1()), (Kind::Reply, session, seq, t1));
            if len >= FULL_LEN {
                prop_assert_eq!(r.responder_times(), Some((t2, t3)));
            } else {
                prop_assert_eq!(r.responder_times(), None);
            }
        }

        #[test]
        fn truncation_is_always_rejected(len in MIN_LEN..300usize, cut in 0usize..300) {
            let b = probe(len, 1, 2, 3);
            let cut = cut % len;
            prop_assert!(Probe::parse(&b[..cut]).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Probe::parse(&bytes);
            if bytes.len() >= 8 {
                let mut h = [0u8; 8];
                h.copy_from_slice(&bytes[..8]);
                let _ = frame_len(&h);
            }
        }
    }
}
