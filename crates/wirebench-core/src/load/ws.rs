//! WebSocket frames as the load client reads and writes them (RFC 6455 section 5): a
//! server's frame header checked on the bytes as they arrived, and the client's frames
//! written masked. No extensions are negotiated, so every reserved bit must be clear.

/// A continuation frame's opcode.
pub const CONTINUATION: u8 = 0x0;
/// A text frame's opcode.
pub const TEXT: u8 = 0x1;
/// A binary frame's opcode.
pub const BINARY: u8 = 0x2;
/// A close frame's opcode.
pub const CLOSE: u8 = 0x8;
/// A ping's opcode.
pub const PING: u8 = 0x9;
/// A pong's opcode.
pub const PONG: u8 = 0xA;

/// The largest payload a control frame may carry.
const CONTROL_MAX: usize = 125;

/// A frame header read from the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The last frame of its message.
    pub fin: bool,
    pub opcode: u8,
    /// Payload bytes.
    pub len: usize,
    /// Header bytes: the payload starts here.
    pub at: usize,
}

impl Head {
    /// Header and payload.
    pub const fn total(&self) -> usize {
        self.at + self.len
    }
}

/// The header at the front of `b`: `Ok(None)` while it is incomplete, an error for a frame
/// a server must not send or one longer than `max`.
pub fn head(b: &[u8], max: usize) -> Result<Option<Head>, &'static str> {
    let [b0, b1, ..] = *b else { return Ok(None) };
    if b0 & 0x70 != 0 {
        return Err("reserved bits set without an extension");
    }
    if b1 & 0x80 != 0 {
        return Err("a masked frame from the server");
    }
    let (fin, opcode) = (b0 & 0x80 != 0, b0 & 0x0F);
    let (len, at) = match b1 & 0x7F {
        126 => match b.get(2..4) {
            Some(l) => (u64::from(u16::from_be_bytes([l[0], l[1]])), 4),
            None => return Ok(None),
        },
        127 => match b.get(2..10) {
            Some(l) => (u64::from_be_bytes(l.try_into().expect("eight bytes")), 10),
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    if len >> 63 != 0 {
        return Err("a length with its top bit set");
    }
    match opcode {
        CLOSE | PING | PONG if !fin => return Err("a fragmented control frame"),
        CLOSE | PING | PONG if len > CONTROL_MAX as u64 => return Err("a control frame over 125 bytes"),
        CONTINUATION | TEXT | BINARY | CLOSE | PING | PONG => {}
        _ => return Err("a reserved opcode"),
    }
    let len = usize::try_from(len).ok().filter(|&l| l <= max).ok_or("a frame over the size limit")?;
    Ok(Some(Head { fin, opcode, len, at }))
}

/// Appends a final frame of `opcode` carrying `payload` to `out`, masked with `key`.
pub fn write(out: &mut Vec<u8>, opcode: u8, payload: &[u8], key: [u8; 4]) {
    const MASKED: u8 = 0x80;
    out.push(0x80 | opcode);
    let len = payload.len();
    if let Ok(short) = u8::try_from(len)
        && short <= 125
    {
        out.push(MASKED | short);
    } else if let Ok(mid) = u16::try_from(len) {
        out.push(MASKED | 0x7E);
        out.extend_from_slice(&mid.to_be_bytes());
    } else {
        out.push(MASKED | 0x7F);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&key);
    let from = out.len();
    out.extend_from_slice(payload);
    mask(&mut out[from..], key);
}

/// XORs `b` with `key` repeated (masking and unmasking are the same), eight bytes at a time.
fn mask(b: &mut [u8], key: [u8; 4]) {
    let k8 = u64::from_ne_bytes([key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]]);
    let mut chunks = b.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes((&*c).try_into().expect("eight bytes")) ^ k8;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    // the tail starts at a multiple of 8, so its key starts at key[0]
    for (x, k) in chunks.into_remainder().iter_mut().zip(key.iter().cycle()) {
        *x ^= k;
    }
}

/// A close frame's payload: its code (`None`: none given) once the code and the reason are
/// found valid.
pub fn close_code(payload: &[u8]) -> Result<Option<u16>, &'static str> {
    match payload {
        [] => Ok(None),
        [_] => Err("a close frame with a one-byte payload"),
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            // RFC 6455 section 7.4 and IANA's registry: 1004-1006 and 1015 are never sent,
            // the rest below 3000 is unassigned; 3000-4999 belong to libraries and apps.
            if !matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
                return Err("a close code a peer may not send");
            }
            std::str::from_utf8(reason).map_err(|_| "a close reason that is not UTF-8")?;
            Ok(Some(code))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    /// RFC 6455 section 5.7's examples.
    #[test]
    fn the_standards_examples() {
        let mut out = Vec::new();
        write(&mut out, TEXT, b"Hello", [0x37, 0xfa, 0x21, 0x3d]);
        assert_eq!(out, [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58], "a masked text frame");
        let hello = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        assert_eq!(head(&hello, MAX), Ok(Some(Head { fin: true, opcode: TEXT, len: 5, at: 2 })));
        let (first, last) = ([0x01, 0x03, 0x48, 0x65, 0x6c], [0x80, 0x02, 0x6c, 0x6f]);
        assert_eq!(head(&first, MAX), Ok(Some(Head { fin: false, opcode: TEXT, len: 3, at: 2 })), "fragment 1");
        assert_eq!(head(&last, MAX), Ok(Some(Head { fin: true, opcode: CONTINUATION, len: 2, at: 2 })), "fragment 2");
        let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        assert_eq!(head(&ping, MAX), Ok(Some(Head { fin: true, opcode: PING, len: 5, at: 2 })));
        assert_eq!(head(&[0x82, 0x7E, 0x01, 0x00], MAX), Ok(Some(Head { fin: true, opcode: BINARY, len: 256, at: 4 })));
        let k64 = [0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0, 0];
        assert_eq!(head(&k64, MAX), Ok(Some(Head { fin: true, opcode: BINARY, len: 65_536, at: 10 })));
        // every shorter prefix of a header is incomplete, not an error
        for h in [&hello[..2], &[0x82, 0x7E, 0x01, 0x00][..], &k64[..]] {
            for cut in 0..h.len() {
                assert_eq!(head(&h[..cut], MAX), Ok(None), "{h:x?} cut at {cut}");
            }
        }
    }

    #[test]
    fn written_headers_use_the_shortest_length_form() {
        let key = [1, 2, 3, 4];
        for (len, header) in [(0usize, 2 + 4), (125, 6), (126, 8), (0xFFFF, 8), (0x1_0000, 14)] {
            let payload = vec![0u8; len];
            let mut out = vec![0xEE]; // appended after what is there
            write(&mut out, BINARY, &payload, key);
            assert_eq!(out[0], 0xEE);
            assert_eq!(out.len(), 1 + header + len, "length {len}");
            assert_eq!(out[1], 0x82, "final, binary");
            let b1 = out[2];
            assert_eq!(b1 & 0x80, 0x80, "masked");
            let declared = match b1 & 0x7F {
                126 => usize::from(u16::from_be_bytes([out[3], out[4]])),
                127 => usize::try_from(u64::from_be_bytes(out[3..11].try_into().unwrap())).unwrap(),
                n => usize::from(n),
            };
            assert_eq!(declared, len);
            assert_eq!(out[header - 3..=header], key, "the key before the payload");
            // zeros masked are the key repeated
            let body = &out[1 + header..];
            assert!(body.iter().enumerate().all(|(i, b)| *b == key[i % 4]), "length {len}");
        }
    }

    #[test]
    fn masking_twice_gives_the_bytes_back_at_every_length() {
        let key = [0xa5, 0x5a, 0x0f, 0xf0];
        for len in 0..40u8 {
            let payload: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37)).collect();
            let mut b = payload.clone();
            mask(&mut b, key);
            assert!(b.iter().zip(&payload).enumerate().all(|(i, (m, p))| *m == p ^ key[i % 4]), "length {len}");
            mask(&mut b, key);
            assert_eq!(b, payload);
        }
    }

    #[test]
    fn frames_a_server_may_not_send_are_refused() {
        assert!(head(&[0x91, 0x00], MAX).is_err(), "RSV1 without an extension");
        assert!(head(&[0xA1, 0x00], MAX).is_err(), "RSV2");
        assert!(head(&[0xC1, 0x00], MAX).is_err(), "RSV3");
        assert!(head(&[0x81, 0x80, 1, 2, 3, 4], MAX).is_err(), "masked");
        assert!(head(&[0x83, 0x00], MAX).is_err(), "reserved data opcode");
        assert!(head(&[0x8B, 0x00], MAX).is_err(), "reserved control opcode");
        assert!(head(&[0x09, 0x00], MAX).is_err(), "a ping without FIN");
        assert!(head(&[0x08, 0x00], MAX).is_err(), "a close without FIN");
        assert!(head(&[0x0A, 0x00], MAX).is_err(), "a pong without FIN");
        assert!(head(&[0x89, 0x7E, 0x00, 0x7E], MAX).is_err(), "a 126-byte ping");
        assert_eq!(head(&[0x89, 0x7D], MAX), Ok(Some(Head { fin: true, opcode: PING, len: 125, at: 2 })));
        assert_eq!(head(&[0x8A, 0x7D], MAX), Ok(Some(Head { fin: true, opcode: PONG, len: 125, at: 2 })));
        assert_eq!(head(&[0x88, 0x02], MAX), Ok(Some(Head { fin: true, opcode: CLOSE, len: 2, at: 2 })));
        let mut top = vec![0x82, 0x7F, 0x80];
        top.extend_from_slice(&[0; 7]);
        assert!(head(&top, usize::MAX).is_err(), "a 64-bit length with its top bit set");
        assert_eq!(
            head(&[0x02, 0x7E, 0x01, 0x00], 256),
            Ok(Some(Head { fin: false, opcode: BINARY, len: 256, at: 4 }))
        );
        assert!(head(&[0x02, 0x7E, 0x01, 0x01], 256).is_err(), "one byte over the limit");
        assert_eq!(Head { fin: true, opcode: TEXT, len: 7, at: 4 }.total(), 11);
    }

    #[test]
    fn close_codes_and_reasons_are_checked() {
        assert_eq!(close_code(&[]), Ok(None));
        assert!(close_code(&[0x03]).is_err());
        for ok in [1000u16, 1003, 1007, 1011, 1014, 3000, 4999] {
            assert_eq!(close_code(&ok.to_be_bytes()), Ok(Some(ok)), "{ok}");
        }
        for bad in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            assert!(close_code(&bad.to_be_bytes()).is_err(), "{bad}");
        }
        assert_eq!(close_code(b"\x03\xe8bye"), Ok(Some(1000)));
        assert!(close_code(b"\x03\xe8\xff").is_err(), "a reason that is not UTF-8");
    }
}
