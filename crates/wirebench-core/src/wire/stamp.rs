//! STAMP test packets (RFC 8762), with the session id of RFC 8972 §3 and its TLVs handled as
//! a reflector must. The standard's own format, not ours: no magic, so a STAMP socket carries
//! nothing else. Unauthenticated STAMP is TWAMP-Light on the wire (RFC 8762 §4.6).
//!
//! ```text
//! session-sender, unauthenticated (44 bytes)     reflector, unauthenticated (44 bytes)
//!  0  4 sequence number                            0  4 reflector's sequence number
//!  4  8 timestamp T1                               4  8 timestamp T3 (reply sent)
//! 12  2 error estimate                            12  2 error estimate (the reflector's)
//! 14  2 session id (SSID)                         14  2 SSID (echoed)
//! 16 28 MBZ                                       16  8 receive timestamp T2
//!                                                 24  4 session-sender sequence number
//!                                                 28  8 session-sender timestamp T1
//!                                                 36  2 session-sender error estimate
//!                                                 38  2 MBZ
//!                                                 40  1 session-sender TTL
//!                                                 41  3 MBZ
//! ```
//! Authenticated (112 bytes each way, §4.2.2 and §4.3.2) spreads the same fields out with
//! MBZ gaps and ends in 16 bytes of HMAC-SHA-256 over the 96 before it. TLVs follow the
//! base packet. A reply is exactly as long as its request: a reflector cannot amplify.
//!
//! Timestamps are 64-bit NTP (seconds since 1900, 32-bit fraction) or, when the error
//! estimate's Z bit is set, truncated PTPv2 (seconds since 1970, nanoseconds). Each side's
//! Z bit describes its own timestamps: the reflector states its format, never echoes the
//! sender's.

use crate::auth;

/// The registered STAMP port.
pub const PORT: u16 = 862;
/// An unauthenticated packet, either direction.
pub const BASE_LEN: usize = 44;
/// An authenticated packet, either direction.
pub const AUTH_LEN: usize = 112;
/// Where the HMAC starts in an authenticated packet; it covers the bytes before it.
pub const HMAC_AT: usize = 96;
/// The largest packet (a UDP/IPv4 payload).
pub const MAX_LEN: usize = 65_507;
/// The shortest key accepted (RFC 8762 §4.4 leaves key management out; 128 bits is the
/// floor other implementations ask for).
pub const MIN_KEY_LEN: usize = 16;

/// TLV header flags (RFC 8972 §4): unrecognised type, malformed, integrity check failed.
pub const TLV_U: u8 = 0x80;
/// The TLV is malformed (its length runs past the packet).
pub const TLV_M: u8 = 0x40;
/// TLV type 1: Extra Padding, echoed as it came.
pub const TLV_EXTRA_PADDING: u8 = 1;

/// Seconds from the NTP era (1900) to the Unix epoch.
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;
const NS: u64 = 1_000_000_000;

/// How timestamps are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsFormat {
    /// NTP 64-bit (Z = 0), the default.
    #[default]
    Ntp,
    /// Truncated PTPv2 (Z = 1).
    Ptp,
}

impl TsFormat {
    /// The name used in flags and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ntp => "ntp",
            Self::Ptp => "ptp",
        }
    }

    /// Encodes Unix-epoch nanoseconds.
    #[expect(clippy::cast_possible_truncation, reason = "NTP seconds wrap at the era by design")]
    pub const fn encode(self, unix_ns: u64) -> u64 {
        let (secs, ns) = (unix_ns / NS, unix_ns % NS);
        match self {
            Self::Ntp => {
                let s = (secs + NTP_UNIX_OFFSET) as u32 as u64;
                // The fraction rounded to nearest, so decode(encode(x)) is within 0.5 ns.
                let frac = ((ns << 32) + NS / 2) / NS;
                if frac >> 32 != 0 { ((s + 1) & 0xFFFF_FFFF) << 32 } else { (s << 32) | frac }
            }
            Self::Ptp => ((secs as u32 as u64) << 32) | ns,
        }
    }

    /// Decodes to Unix-epoch nanoseconds; `None` for a PTP nanosecond field of a second or
    /// more. NTP seconds below 2^31 are read as the next era (after 2036, RFC 4330 §3).
    pub const fn decode(self, raw: u64) -> Option<u64> {
        let (hi, lo) = (raw >> 32, raw & 0xFFFF_FFFF);
        match self {
            Self::Ntp => {
                let secs = if hi < 0x8000_0000 { hi + (1 << 32) } else { hi };
                let Some(unix) = secs.checked_sub(NTP_UNIX_OFFSET) else { return None };
                Some(unix * NS + ((lo * NS + (1 << 31)) >> 32))
            }
            Self::Ptp => {
                if lo >= NS {
                    return None;
                }
                Some(hi * NS + lo)
            }
        }
    }
}

/// The error estimate (RFC 4656 §4.1.2): S (synchronised to UTC), Z (timestamp format), and
/// the error, `multiplier × 2^(scale − 32)` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorEstimate(pub u16);

impl ErrorEstimate {
    const S: u16 = 0x8000;
    const Z: u16 = 0x4000;

    /// An estimate of `error_ns` (rounded up to what the field can say; the multiplier is
    /// never zero).
    pub fn new(synced: bool, format: TsFormat, error_ns: u64) -> Self {
        let mut scale = 0u16;
        // multiplier = ceil(error × 2^(32 − scale)), the smallest scale where it fits a byte.
        let mult = loop {
            let shift = 32 - i32::from(scale);
            let m = if shift >= 0 {
                (u128::from(error_ns) << shift).div_ceil(u128::from(NS))
            } else {
                u128::from(error_ns).div_ceil(u128::from(NS) << -shift)
            };
            if m <= 255 || scale == 63 {
                break u16::try_from(m.clamp(1, 255)).unwrap_or(255);
            }
            scale += 1;
        };
        let mut v = (scale << 8) | mult;
        if synced {
            v |= Self::S;
        }
        if format == TsFormat::Ptp {
            v |= Self::Z;
        }
        Self(v)
    }

    /// The timestamp format the Z bit names.
    pub const fn format(self) -> TsFormat {
        if self.0 & Self::Z != 0 { TsFormat::Ptp } else { TsFormat::Ntp }
    }

    /// The S bit: the clock is synchronised to UTC by an external source.
    pub const fn synced(self) -> bool {
        self.0 & Self::S != 0
    }

    /// The error in nanoseconds (saturating).
    pub fn error_ns(self) -> u64 {
        let scale = i32::from((self.0 >> 8) & 0x3F);
        let mult = u128::from(self.0 & 0xFF);
        let ns =
            if scale >= 32 { (mult * u128::from(NS)) << (scale - 32) } else { (mult * u128::from(NS)) >> (32 - scale) };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// An HMAC-SHA-256 key (RFC 8762 §4.4): the same keyed HMAC and truncated, constant-time
/// tags as wirebench's own datagrams ([`crate::auth::Key`]), at least [`MIN_KEY_LEN`] bytes.
/// Signing clones the keyed state and allocates nothing.
#[derive(Clone)]
pub struct Key(auth::Key);

// STAMP's HMAC field is the truncated tag wirebench's datagrams carry.
const _: () = assert!(auth::TAG_LEN == AUTH_LEN - HMAC_AT);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from its bytes; `None` when shorter than [`MIN_KEY_LEN`].
    pub fn new(bytes: &[u8]) -> Option<Self> {
        (bytes.len() >= MIN_KEY_LEN).then(|| Self(auth::Key::new(bytes)))
    }

    /// A key from hex (as `stamp-suite --hmac-key` takes it), surrounding space ignored.
    pub fn from_hex(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("a STAMP key is hex digits, two per byte".into());
        }
        let bytes: Vec<u8> =
            (0..s.len()).step_by(2).filter_map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect();
        Self::new(&bytes).ok_or_else(|| {
            format!(
                "a STAMP key needs at least {MIN_KEY_LEN} bytes ({} hex digits), got {}",
                MIN_KEY_LEN * 2,
                bytes.len()
            )
        })
    }

    /// Writes the HMAC of an authenticated packet's first 96 bytes into bytes 96..112.
    fn sign(&self, pkt: &mut [u8]) {
        let tag = self.0.short_tag(&[&pkt[..HMAC_AT]]);
        pkt[HMAC_AT..AUTH_LEN].copy_from_slice(&tag);
    }

    /// Checks an authenticated packet's HMAC, in constant time.
    fn verify(&self, pkt: &[u8]) -> bool {
        self.0.verify(&[&pkt[..HMAC_AT]], &pkt[HMAC_AT..AUTH_LEN])
    }
}

/// Why a packet was dropped. Copy, so counting costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    /// Shorter than the base packet of the mode.
    #[error("truncated: {got} bytes, need {need}")]
    Truncated {
        /// Bytes the mode's base packet has.
        need: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// Longer than a reply buffer or a UDP datagram can hold.
    #[error("oversized: {0} bytes")]
    Oversized(usize),
    /// The HMAC did not match the key.
    #[error("authentication failed")]
    Auth,
    /// A timestamp field that is not a time (a PTP nanosecond field of a second or more).
    #[error("malformed timestamp")]
    Timestamp,
}

/// Offsets of one mode's fields.
struct Layout {
    len: usize,
    ts: usize,
    err: usize,
    ssid: usize,
    // Reflected packets only.
    t2: usize,
    sender_seq: usize,
    sender_ts: usize,
    sender_err: usize,
    ttl: usize,
}

const UNAUTH: Layout =
    Layout { len: BASE_LEN, ts: 4, err: 12, ssid: 14, t2: 16, sender_seq: 24, sender_ts: 28, sender_err: 36, ttl: 40 };
const AUTH: Layout =
    Layout { len: AUTH_LEN, ts: 16, err: 24, ssid: 26, t2: 32, sender_seq: 48, sender_ts: 64, sender_err: 72, ttl: 80 };

const fn layout(auth: bool) -> &'static Layout {
    if auth { &AUTH } else { &UNAUTH }
}

fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn get64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// The base length of a mode.
pub const fn base_len(auth: bool) -> usize {
    layout(auth).len
}

/// The session-sender's side: writes test packets of a fixed length and reads reflections.
#[derive(Debug, Clone)]
pub struct Sender {
    /// Authenticated mode's key.
    pub key: Option<Key>,
    /// The format of T1.
    pub format: TsFormat,
    /// The error estimate sent with T1 (its Z bit follows `format`).
    pub error: ErrorEstimate,
    /// The session id (RFC 8972 §3).
    pub ssid: u16,
}

impl Sender {
    /// Lays out a test packet in `buf` (its whole length is sent): zeros, the error estimate
    /// and SSID, and beyond the base an Extra Padding TLV filling the rest. `buf` must be the
    /// base length or at least 4 bytes longer ([`Sender::valid_len`]).
    pub fn init(&self, buf: &mut [u8]) {
        let l = layout(self.key.is_some());
        buf.fill(0);
        put16(buf, l.err, self.error.0);
        put16(buf, l.ssid, self.ssid);
        if buf.len() >= l.len + 4 {
            buf[l.len + 1] = TLV_EXTRA_PADDING;
            put16(buf, l.len + 2, u16::try_from(buf.len() - l.len - 4).unwrap_or(u16::MAX));
        }
    }

    /// Whether a test packet can be `len` bytes long in this mode.
    pub fn valid_len(&self, len: usize) -> bool {
        let base = base_len(self.key.is_some());
        len == base || (len >= base + 4 && u16::try_from(len - base - 4).is_ok() && len <= MAX_LEN)
    }

    /// Writes the sequence number and T1 (Unix ns), and signs.
    pub fn stamp(&self, buf: &mut [u8], seq: u32, t1_unix_ns: u64) {
        let l = layout(self.key.is_some());
        put32(buf, 0, seq);
        put64(buf, l.ts, self.format.encode(t1_unix_ns));
        if let Some(k) = &self.key {
            k.sign(buf);
        }
    }

    /// Reads a reflected packet; checks its HMAC in authenticated mode.
    pub fn parse(&self, buf: &[u8]) -> Result<Reflected, Reject> {
        let auth = self.key.is_some();
        let l = layout(auth);
        if buf.len() < l.len {
            return Err(Reject::Truncated { need: l.len, got: buf.len() });
        }
        if let Some(k) = &self.key
            && !k.verify(buf)
        {
            return Err(Reject::Auth);
        }
        let error = ErrorEstimate(get16(buf, l.err));
        let sender_error = ErrorEstimate(get16(buf, l.sender_err));
        let t3 = error.format().decode(get64(buf, l.ts)).ok_or(Reject::Timestamp)?;
        let t2 = error.format().decode(get64(buf, l.t2)).ok_or(Reject::Timestamp)?;
        let t1 = sender_error.format().decode(get64(buf, l.sender_ts)).ok_or(Reject::Timestamp)?;
        Ok(Reflected {
            seq: get32(buf, 0),
            t3_unix_ns: t3,
            error,
            ssid: get16(buf, l.ssid),
            t2_unix_ns: t2,
            sender_seq: get32(buf, l.sender_seq),
            t1_unix_ns: t1,
            ttl: buf[l.ttl],
            len: buf.len(),
        })
    }
}

/// A reflected packet, its timestamps in Unix ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reflected {
    /// The reflector's sequence number (the sender's in stateless mode).
    pub seq: u32,
    /// When the reflector sent it.
    pub t3_unix_ns: u64,
    /// The reflector's error estimate (its Z bit is the format of T2 and T3).
    pub error: ErrorEstimate,
    /// The SSID (zero from a reflector that predates RFC 8972).
    pub ssid: u16,
    /// When the reflector received the test packet.
    pub t2_unix_ns: u64,
    /// The test packet's sequence number.
    pub sender_seq: u32,
    /// The test packet's T1, echoed.
    pub t1_unix_ns: u64,
    /// The test packet's TTL as the reflector saw it.
    pub ttl: u8,
    /// The packet's length.
    pub len: usize,
}

/// A session-sender's test packet, as a reflector reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestPacket {
    /// Sequence number.
    pub seq: u32,
    /// The SSID.
    pub ssid: u16,
}

/// What a reflector needs to answer one test packet.
#[derive(Debug, Clone)]
pub struct Reflector {
    /// Authenticated mode's key.
    pub key: Option<Key>,
    /// The reflector's timestamp format (stated by its own Z bit).
    pub format: TsFormat,
    /// The reflector's error estimate without its Z bit (set from `format`).
    pub error: ErrorEstimate,
}

impl Reflector {
    /// Reads a test packet: length and, in authenticated mode, its HMAC.
    pub fn check(&self, req: &[u8]) -> Result<TestPacket, Reject> {
        let l = layout(self.key.is_some());
        if req.len() < l.len {
            return Err(Reject::Truncated { need: l.len, got: req.len() });
        }
        if req.len() > MAX_LEN {
            return Err(Reject::Oversized(req.len()));
        }
        if let Some(k) = &self.key
            && !k.verify(req)
        {
            return Err(Reject::Auth);
        }
        Ok(TestPacket { seq: get32(req, 0), ssid: get16(req, l.ssid) })
    }

    /// Writes the reflection of `req` (already [`check`](Self::check)ed) into `out`, the
    /// same length as `req`: `seq` is the reflector's sequence number (the sender's in
    /// stateless mode), `t2` the receive time, `ttl` the test packet's TTL; T3 is read from
    /// `now` as late as possible. Returns the length, or `None` when `out` is too small.
    pub fn reflect(
        &self,
        req: &[u8],
        out: &mut [u8],
        seq: u32,
        t2_unix_ns: u64,
        ttl: u8,
        now: impl FnOnce() -> u64,
    ) -> Option<usize> {
        let auth = self.key.is_some();
        let l = layout(auth);
        let n = req.len();
        if out.len() < n || n < l.len {
            return None;
        }
        let out = &mut out[..n];
        out[..l.len].fill(0);
        // The TLVs come back as they came, with the reflector's verdict in their flags.
        out[l.len..].copy_from_slice(&req[l.len..]);
        mark_tlvs(&mut out[l.len..]);
        let mut err = self.error.0 & !ErrorEstimate::Z;
        if self.format == TsFormat::Ptp {
            err |= ErrorEstimate::Z;
        }
        put32(out, 0, seq);
        put16(out, l.err, err);
        put16(out, l.ssid, get16(req, l.ssid));
        put64(out, l.t2, self.format.encode(t2_unix_ns));
        put32(out, l.sender_seq, get32(req, 0));
        put64(out, l.sender_ts, get64(req, l.ts));
        put16(out, l.sender_err, get16(req, l.err));
        out[l.ttl] = ttl;
        put64(out, l.ts, self.format.encode(now()));
        if let Some(k) = &self.key {
            k.sign(out);
        }
        Some(n)
    }
}

/// Sets each TLV's verdict flags in place (RFC 8972 §4): Extra Padding is understood, any
/// other type is flagged unrecognised (U); a TLV whose length runs past the packet is flagged
/// malformed (M) and ends the walk. All-zero bytes after the base are TWAMP-Light padding,
/// not TLVs, and are left alone.
fn mark_tlvs(tlvs: &mut [u8]) {
    if tlvs.iter().all(|&b| b == 0) {
        return;
    }
    let mut at = 0;
    while at + 4 <= tlvs.len() {
        let len = usize::from(get16(tlvs, at + 2));
        if at + 4 + len > tlvs.len() {
            tlvs[at] |= TLV_M;
            return;
        }
        if tlvs[at + 1] != TLV_EXTRA_PADDING {
            tlvs[at] |= TLV_U;
        }
        at += 4 + len;
    }
}

/// Maps the engine's 64-bit sequence numbers onto STAMP's 32 bits and back. The top 2^20
/// values of the 32-bit space are discovery probes (the engine numbers those from
/// `discovery_base` up); measured probes wrap below them.
#[derive(Debug, Clone, Copy)]
pub struct SeqMap {
    /// The engine's first discovery sequence number.
    pub discovery_base: u64,
}

const WIRE_DISCOVERY: u32 = u32::MAX - ((1 << 20) - 1);

impl SeqMap {
    /// The wire number of engine sequence `seq`.
    #[expect(clippy::cast_possible_truncation, reason = "reduced into the 32-bit space first")]
    pub const fn to_wire(self, seq: u64) -> u32 {
        if seq >= self.discovery_base {
            WIRE_DISCOVERY.wrapping_add((seq - self.discovery_base) as u32)
        } else {
            (seq % WIRE_DISCOVERY as u64) as u32
        }
    }

    /// The engine sequence of wire number `w`, taking the measured one nearest below
    /// `next` (one past the last sent).
    pub const fn from_wire(self, w: u32, next: u64) -> u64 {
        if w >= WIRE_DISCOVERY {
            return self.discovery_base + (w - WIRE_DISCOVERY) as u64;
        }
        let span = WIRE_DISCOVERY as u64;
        let base = next - next % span;
        let c = base + w as u64;
        if c >= next && base >= span { c - span } else { c }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::from_hex("000102030405060708090a0b0c0d0e0f").unwrap()
    }

    #[test]
    fn ntp_and_ptp_timestamps_round_trip_and_read_known_values() {
        // 2026-11-29T00:00:00.5Z
        let t = 1_795_910_400 * NS + 500_000_000;
        let ntp = TsFormat::Ntp.encode(t);
        assert_eq!(ntp >> 32, 1_795_910_400 + NTP_UNIX_OFFSET);
        assert_eq!(ntp & 0xFFFF_FFFF, 0x8000_0000, "half a second is half the fraction");
        assert_eq!(TsFormat::Ptp.encode(t), (1_795_910_400 << 32) + 500_000_000);
        for ns in [0, 1, 123_456_789, 999_999_999] {
            let x = 1_795_910_400 * NS + ns;
            assert_eq!(TsFormat::Ptp.decode(TsFormat::Ptp.encode(x)), Some(x));
            let back = TsFormat::Ntp.decode(TsFormat::Ntp.encode(x)).unwrap();
            assert!(back.abs_diff(x) <= 1, "{x} came back as {back}");
        }
        assert_eq!(TsFormat::Ptp.decode((1 << 32) | NS), None, "a nanosecond field of a whole second");
        // NTP era 1: seconds below 2^31 are after 2036.
        let after_2036 = TsFormat::Ntp.decode(5 << 32).unwrap();
        assert_eq!(after_2036 / NS, (1 << 32) + 5 - NTP_UNIX_OFFSET);
    }

    /// The fraction is rounded to the nearest 2^-32 s both ways, and era 0 ends where the
    /// top bit of the seconds does (RFC 4330 §3).
    #[test]
    fn ntp_fractions_round_to_nearest_and_era_0_starts_at_the_top_bit() {
        let t = 1_795_910_400 * NS;
        // 2 ns is 8.59 fraction units: 9, not 8.
        assert_eq!(TsFormat::Ntp.encode(t + 2) & 0xFFFF_FFFF, 9);
        // 3 units are 0.698 ns: 1 ns, not 0.
        let secs = (1_795_910_400 + NTP_UNIX_OFFSET) << 32;
        assert_eq!(TsFormat::Ntp.decode(secs | 3), Some(t + 1));
        // Half a unit each way is under 0.5 ns: every whole ns comes back exactly.
        for ns in (0..NS).step_by(999_983).chain([1, 2, 3, NS - 2, NS - 1]) {
            assert_eq!(TsFormat::Ntp.decode(TsFormat::Ntp.encode(t + ns)), Some(t + ns), "{ns}");
        }
        // Seconds with the top bit set are era 0 (1968 on): 2^31 is before 1970, no Unix time.
        assert_eq!(TsFormat::Ntp.decode(0x8000_0000 << 32), None);
        let last_of_era_1 = TsFormat::Ntp.decode(0x7FFF_FFFF << 32).map(|u| u / NS);
        assert_eq!(last_of_era_1, Some((1 << 32) + 0x7FFF_FFFF - NTP_UNIX_OFFSET));
        assert_eq!((TsFormat::Ntp.name(), TsFormat::Ptp.name()), ("ntp", "ptp"), "the --format spellings");
    }

    #[test]
    fn error_estimates_round_up_and_carry_the_format() {
        let e = ErrorEstimate::new(true, TsFormat::Ptp, 1_000);
        assert!(e.synced() && e.format() == TsFormat::Ptp);
        assert!(e.error_ns() >= 1_000 && e.error_ns() < 1_010, "{}", e.error_ns());
        let e = ErrorEstimate::new(false, TsFormat::Ntp, 2 * NS);
        assert!(!e.synced() && e.format() == TsFormat::Ntp);
        assert!(e.error_ns() >= 2 * NS && e.error_ns() < 2 * NS + NS / 100, "{}", e.error_ns());
        assert_eq!(ErrorEstimate::new(false, TsFormat::Ntp, 0).0 & 0xFF, 1, "the multiplier is never zero");
        // RFC 4656's example: scale 0, multiplier 1 is 2^-32 s.
        assert_eq!(ErrorEstimate(1).error_ns(), 0);
        assert_eq!(ErrorEstimate((32 << 8) | 3).error_ns(), 3 * NS);
        // Each scale step past 32 doubles the unit: 3 × 2^3 s.
        assert_eq!(ErrorEstimate((35 << 8) | 3).error_ns(), 24 * NS);
    }

    #[test]
    fn keys_come_from_hex_of_at_least_16_bytes() {
        assert!(Key::from_hex("00112233445566778899aabbccddeeff\n").is_ok());
        assert!(Key::from_hex("0011").unwrap_err().contains("at least 16 bytes"));
        assert!(Key::from_hex("zz112233445566778899aabbccddeeff").unwrap_err().contains("hex"));
        assert!(Key::from_hex("0").is_err());
        assert_eq!(format!("{:?}", key()), "Key(..)");
    }

    fn reflector(key: Option<Key>, format: TsFormat) -> Reflector {
        Reflector { key, format, error: ErrorEstimate::new(true, TsFormat::Ntp, 500) }
    }

    /// A sender's packet through a reflector and back, in both modes and all four format
    /// pairs: every field lands where the RFC puts it and reads back.
    #[test]
    fn a_test_packet_is_reflected_field_by_field() {
        // Every byte of the sequence number differs, so each is read from its own place.
        const SEQ: u32 = 0x0701_0203;
        for auth in [false, true] {
            for (sf, rf) in
                [(TsFormat::Ntp, TsFormat::Ntp), (TsFormat::Ptp, TsFormat::Ntp), (TsFormat::Ntp, TsFormat::Ptp)]
            {
                let k = auth.then(key);
                let s = Sender { key: k.clone(), format: sf, error: ErrorEstimate::new(false, sf, 1000), ssid: 0xBEEF };
                let len = base_len(auth);
                let mut pkt = vec![0u8; len];
                s.init(&mut pkt);
                let t1 = 1_795_910_400 * NS + 1_000;
                s.stamp(&mut pkt, SEQ, t1);
                assert_eq!(get32(&pkt, 0), SEQ);
                let r = reflector(k, rf);
                let tp = r.check(&pkt).unwrap();
                assert_eq!(tp, TestPacket { seq: SEQ, ssid: 0xBEEF });
                let mut out = vec![0xAAu8; 200];
                let n = r.reflect(&pkt, &mut out, 99, t1 + 5_000, 61, || t1 + 9_000).unwrap();
                assert_eq!(n, len, "a reply is as long as its request");
                let got = s.parse(&out[..n]).unwrap();
                assert_eq!((got.seq, got.sender_seq, got.ssid, got.ttl, got.len), (99, SEQ, 0xBEEF, 61, len));
                assert_eq!(got.error.format(), rf, "the reflector states its own format");
                assert_eq!(got.error, ErrorEstimate::new(true, rf, 500), "and its own estimate");
                assert!(got.t1_unix_ns.abs_diff(t1) <= 1);
                assert!(got.t2_unix_ns.abs_diff(t1 + 5_000) <= 1);
                assert!(got.t3_unix_ns.abs_diff(t1 + 9_000) <= 1);
                let lay = layout(auth);
                assert_eq!(get16(&out, lay.sender_err), s.error.0, "the sender's estimate echoed");
            }
        }
    }

    #[test]
    fn authentication_rejects_a_wrong_key_and_a_flipped_bit() {
        let s = Sender { key: Some(key()), format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 1 };
        let mut pkt = vec![0u8; AUTH_LEN];
        s.init(&mut pkt);
        s.stamp(&mut pkt, 1, 1_795_910_400 * NS);
        let other = Key::new(&[9u8; 32]).unwrap();
        assert_eq!(reflector(Some(other), TsFormat::Ntp).check(&pkt), Err(Reject::Auth));
        let r = reflector(Some(key()), TsFormat::Ntp);
        assert!(r.check(&pkt).is_ok());
        pkt[3] ^= 1;
        assert_eq!(r.check(&pkt), Err(Reject::Auth));
        assert_eq!(r.check(&pkt[..50]), Err(Reject::Truncated { need: AUTH_LEN, got: 50 }));
        assert_eq!(reflector(None, TsFormat::Ntp).check(&pkt[..43]), Err(Reject::Truncated { need: 44, got: 43 }));
        // A reflection signed with another key is refused by the sender.
        let mut out = [0u8; AUTH_LEN];
        pkt[3] ^= 1;
        let rogue = reflector(Key::new(&[9u8; 32]), TsFormat::Ntp);
        rogue.reflect(&pkt, &mut out, 1, 0, 64, || 0).unwrap();
        assert_eq!(s.parse(&out), Err(Reject::Auth));
    }

    #[test]
    fn tlvs_are_echoed_with_the_reflectors_verdict() {
        let s = Sender { key: None, format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 1 };
        assert!(s.valid_len(44) && s.valid_len(48) && s.valid_len(100));
        assert!(!s.valid_len(45) && !s.valid_len(47) && !s.valid_len(43));
        // Up to a whole UDP/IPv4 payload in either mode: its TLV length still fits 16 bits.
        let authed = Sender { key: Some(key()), ..s.clone() };
        for sender in [&s, &authed] {
            assert!(sender.valid_len(MAX_LEN) && !sender.valid_len(MAX_LEN + 1));
        }
        let mut pkt = vec![0u8; 44 + 4 + 8 + 4 + 2 + 4 + 100];
        // Extra padding of 8, an unknown type 200 of 2, then a TLV claiming 100 bytes it lacks.
        pkt[44 + 1] = TLV_EXTRA_PADDING;
        put16(&mut pkt, 44 + 2, 8);
        pkt[56 + 1] = 200;
        put16(&mut pkt, 56 + 2, 2);
        pkt[62 + 1] = 201;
        put16(&mut pkt, 62 + 2, 200);
        let r = reflector(None, TsFormat::Ntp);
        let mut out = vec![0u8; pkt.len()];
        assert_eq!(r.reflect(&pkt, &mut out, 0, 0, 1, || 0), Some(pkt.len()));
        assert_eq!(out[44], 0, "extra padding is understood");
        assert_eq!(out[56], TLV_U, "an unknown type is flagged U");
        assert_eq!(out[62], TLV_M, "a length past the end is flagged M");
        assert_eq!(&out[66..], &pkt[66..], "the rest comes back as it came");
        // TWAMP-Light zero padding is not a TLV list.
        let pad = vec![0u8; 44 + 20];
        let mut out = vec![1u8; pad.len()];
        r.reflect(&pad, &mut out, 0, 0, 1, || 0).unwrap();
        assert!(out[44..].iter().all(|&b| b == 0));
        // A sender's padded packet carries one Extra Padding TLV filling the rest.
        let mut p = vec![0xFFu8; 64];
        s.init(&mut p);
        assert_eq!((p[45], get16(&p, 46)), (TLV_EXTRA_PADDING, 16));
        assert!(r.reflect(&p, &mut [0u8; 63], 0, 0, 1, || 0).is_none(), "no room: no reply");
    }

    /// A reflector takes a test packet up to a whole UDP/IPv4 payload; one byte more is
    /// refused as oversized.
    #[test]
    fn a_reflector_takes_up_to_a_whole_udp_payload() {
        let s = Sender { key: None, format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 7 };
        let mut pkt = vec![0u8; MAX_LEN + 1];
        s.init(&mut pkt[..MAX_LEN]);
        let r = reflector(None, TsFormat::Ntp);
        assert_eq!(r.check(&pkt[..MAX_LEN]), Ok(TestPacket { seq: 0, ssid: 7 }));
        assert_eq!(r.check(&pkt), Err(Reject::Oversized(MAX_LEN + 1)));
    }

    /// A TLV that ends at the packet's last byte is whole, and a TLV is read from where the
    /// one before it ends, however short it is.
    #[test]
    fn tlvs_that_end_with_the_packet_are_whole() {
        let s = Sender { key: None, format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 1 };
        let r = reflector(None, TsFormat::Ntp);
        // A sender's padded packet: one Extra Padding TLV up to the end.
        let mut p = vec![0u8; 64];
        s.init(&mut p);
        let mut out = vec![0u8; p.len()];
        assert_eq!(r.reflect(&p, &mut out, 0, 0, 1, || 0), Some(p.len()));
        assert_eq!(out[44], 0, "understood and whole");
        // Extra Padding of 8, then an empty TLV of unknown type 200 that ends the packet.
        let mut pkt = vec![0u8; 44 + 12 + 4];
        pkt[44 + 1] = TLV_EXTRA_PADDING;
        put16(&mut pkt, 44 + 2, 8);
        pkt[56 + 1] = 200;
        let mut out = vec![0u8; pkt.len()];
        assert_eq!(r.reflect(&pkt, &mut out, 0, 0, 1, || 0), Some(pkt.len()));
        assert_eq!((out[44], out[56]), (0, TLV_U), "padding understood, the unknown type flagged U only");
    }

    #[test]
    fn sequence_numbers_map_to_32_bits_and_back() {
        let m = SeqMap { discovery_base: u64::MAX - (1 << 20) };
        // Discovery takes the top 2^20 wire numbers, measured probes every one below.
        assert_eq!(u64::from(m.to_wire(m.discovery_base)), (1 << 32) - (1 << 20));
        assert_eq!(m.to_wire(m.discovery_base + (1 << 20) - 1), u32::MAX);
        let last_measured = (1u64 << 32) - (1 << 20) - 1;
        assert_eq!(u64::from(m.to_wire(last_measured)), last_measured);
        for (seq, next) in
            [(0, 1), (5, 10), (1 << 33, (1 << 33) + 3), (u64::from(WIRE_DISCOVERY) - 1, u64::from(WIRE_DISCOVERY) + 2)]
        {
            assert_eq!(m.from_wire(m.to_wire(seq), next), seq, "seq {seq} next {next}");
        }
        for k in [0, 1, (1 << 20) - 1] {
            let seq = m.discovery_base + k;
            assert!(m.to_wire(seq) >= WIRE_DISCOVERY);
            assert_eq!(m.from_wire(m.to_wire(seq), 0), seq);
        }
    }

    proptest::proptest! {
        /// Nothing from the wire panics either side, whatever its length or bytes.
        #[test]
        fn any_bytes_are_refused_or_reflected_without_panic(bytes in proptest::collection::vec(0u8..=255, 0..300), auth: bool) {
            let r = reflector(auth.then(key), TsFormat::Ntp);
            if r.check(&bytes).is_ok() {
                let mut out = vec![0u8; bytes.len()];
                proptest::prop_assert_eq!(r.reflect(&bytes, &mut out, 0, 0, 1, || 0), Some(bytes.len()));
            }
            let s = Sender { key: auth.then(key), format: TsFormat::Ntp, error: ErrorEstimate(1), ssid: 0 };
            let _ = s.parse(&bytes);
        }
    }
}
