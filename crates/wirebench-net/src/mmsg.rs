//! `recvmmsg` with every header reset before each call.
//!
//! Why not nix's `recvmmsg`: it sets each header's iovec but leaves `msg_controllen` (and
//! `msg_namelen`) as the kernel left them after the previous call. The kernel writes back
//! the control bytes it actually used, so once a slot has received a datagram without a GRO
//! control message (a plain datagram), that slot's control space is 0 for good: every later
//! GRO run landing in it arrives with no segment size and reads as one datagram the size of
//! the whole run. A stream receiver then rejects all of it. That was the cause of the
//! "99.9 % loss" flat-out streams; `tests::a_gro_run_after_a_plain_datagram_keeps_its_segment_size`
//! in `batch.rs` guards it.
//! The control space (64 bytes) holds the GRO message with room to spare, so `MSG_CTRUNC`
//! cannot happen.
//!
//! The headers live on the stack of each call (they hold raw pointers into the caller's
//! buffer), and only as many as the call offers are written; the address and control
//! buffers are plain bytes owned here, parsed without `unsafe`.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Bytes of control space per slot: room for `UDP_GRO` and `SO_RXQ_OVFL` (24 bytes each)
/// and `SCM_TIMESTAMPING` (three timespecs, 64 bytes).
const CMSG_BYTES: usize = 128;
/// Bytes of address space per slot (`sizeof(struct sockaddr_storage)`).
const NAME_BYTES: usize = 128;
/// The same as a `socklen_t`.
const NAME_LEN: libc::socklen_t = 128;

#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
struct Aligned<const N: usize>([u8; N]);

/// One received message of a [`Slots::recv`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msg {
    /// Bytes received.
    pub(crate) len: usize,
    /// `UDP_GRO` segment size, when the kernel coalesced a run.
    pub(crate) gro: Option<usize>,
    /// The sender.
    pub(crate) from: Option<SocketAddr>,
    /// The software RX timestamp (`SO_TIMESTAMPING`, `CLOCK_REALTIME` ns), when the socket
    /// has them on (`crate::stamp::enable`); a GRO run carries its first segment's.
    pub(crate) rx_ns: Option<u64>,
}

/// Address and control buffers for `N` messages.
#[derive(Debug)]
pub(crate) struct Slots<const N: usize> {
    names: [Aligned<NAME_BYTES>; N],
    cmsgs: [Aligned<CMSG_BYTES>; N],
}

impl<const N: usize> Slots<N> {
    pub(crate) fn new() -> Self {
        Self { names: [Aligned([0; NAME_BYTES]); N], cmsgs: [Aligned([0; CMSG_BYTES]); N] }
    }

    /// One `recvmmsg(MSG_WAITFORONE)`, message `k` into `data[k * slot..][..slot]`, offering
    /// the first `want` slots (at most `N`, and as many as `data` holds): waits (up to the
    /// socket's timeout) for the first message only. Fills `out` and returns how many
    /// messages arrived; 0 on timeout or `EINTR`. Only the offered headers are set up (a call
    /// that offers 4 of 32 slots writes an eighth of them).
    pub(crate) fn recv(
        &mut self,
        fd: RawFd,
        data: &mut [u8],
        slot: usize,
        out: &mut [Msg; N],
        want: usize,
    ) -> io::Result<usize> {
        let want = want.min(N).min(data.len() / slot.max(1));
        if want == 0 {
            return Ok(0);
        }
        let mut iovs: [MaybeUninit<libc::iovec>; N] = [const { MaybeUninit::uninit() }; N];
        let mut hdrs: [MaybeUninit<libc::mmsghdr>; N] = [const { MaybeUninit::uninit() }; N];
        let bufs = data.chunks_exact_mut(slot.max(1));
        let slots = iovs.iter_mut().zip(bufs).zip(&mut self.names).zip(&mut self.cmsgs).take(want);
        for (h, (((iov, b), name), cmsg)) in hdrs.iter_mut().zip(slots) {
            let iov = iov.write(libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() });
            #[expect(unsafe_code, reason = "mmsghdr is plain C data; zero is a valid value for every field")]
            // SAFETY: `mmsghdr` holds integers and raw pointers only; all-zero is a valid value.
            let m = h.write(unsafe { std::mem::zeroed() });
            m.msg_hdr.msg_name = name.0.as_mut_ptr().cast();
            m.msg_hdr.msg_namelen = NAME_LEN;
            m.msg_hdr.msg_iov = std::ptr::from_mut(iov);
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = cmsg.0.as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = CMSG_BYTES as _;
        }
        #[expect(unsafe_code, reason = "recvmmsg: nix's wrapper does not reset msg_controllen (see the module docs)")]
        // SAFETY: the first `want` headers (and their iovecs) are initialised above, and only
        // those are passed (`MaybeUninit<T>` has `T`'s layout). Each points at memory that
        // outlives the call: its iovec (on this stack) covering `iov_len` writable bytes of
        // `data`, and this struct's name and control buffers of the lengths given; the kernel
        // writes at most the given lengths and fills `msg_len`, `msg_namelen`,
        // `msg_controllen` and `msg_flags`. No timeout pointer.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                libc::c_uint::try_from(want).unwrap_or(libc::c_uint::MAX),
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        let n = usize::try_from(rc).unwrap_or(0).min(want);
        for k in 0..n {
            #[expect(unsafe_code, reason = "reading back a header initialised above")]
            // SAFETY: `k < n <= want`: header `k` was initialised before the call.
            let m = unsafe { hdrs[k].assume_init_ref() };
            let h = &m.msg_hdr;
            let name_len = usize::try_from(h.msg_namelen).unwrap_or(0).min(NAME_BYTES);
            #[allow(clippy::unnecessary_cast, reason = "size_t on glibc, socklen_t on musl")]
            let cmsg_len = (h.msg_controllen as usize).min(CMSG_BYTES);
            out[k] = Msg {
                len: m.msg_len as usize,
                gro: gro_segment(&self.cmsgs[k].0[..cmsg_len]),
                from: sockaddr(&self.names[k].0[..name_len]),
                rx_ns: rx_stamp(&self.cmsgs[k].0[..cmsg_len]),
            };
        }
        Ok(n)
    }
}

const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
const ALIGN: usize = std::mem::size_of::<usize>();

/// The data of the first control message of `level` and `kind` in a control buffer (as
/// the kernel laid it out).
fn find(c: &[u8], want_level: i32, want_kind: i32) -> Option<&[u8]> {
    let mut at = 0;
    while at + HDR <= c.len() {
        let len = usize::from_ne_bytes(c[at..at + ALIGN].try_into().ok()?);
        let level = i32::from_ne_bytes(c[at + ALIGN..at + ALIGN + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(c[at + ALIGN + 4..at + ALIGN + 8].try_into().ok()?);
        if len < HDR || at + len > c.len() {
            return None;
        }
        if level == want_level && kind == want_kind {
            return Some(&c[at + HDR..at + len]);
        }
        at += len.next_multiple_of(ALIGN);
    }
    None
}

/// The `UDP_GRO` segment size in a control buffer.
fn gro_segment(c: &[u8]) -> Option<usize> {
    let d = find(c, libc::SOL_UDP, libc::UDP_GRO)?;
    let seg = i32::from_ne_bytes(d.get(..4)?.try_into().ok()?);
    usize::try_from(seg).ok().filter(|&s| s > 0)
}

/// The software time of an `SCM_TIMESTAMPING` message (`struct scm_timestamping`: software,
/// deprecated, hardware; native `timespec`s) in a control buffer.
fn rx_stamp(c: &[u8]) -> Option<u64> {
    const WORD: usize = std::mem::size_of::<libc::time_t>();
    let d = find(c, libc::SOL_SOCKET, libc::SCM_TIMESTAMPING)?;
    let sec = libc::time_t::from_ne_bytes(d.get(..WORD)?.try_into().ok()?);
    let nsec = libc::c_long::from_ne_bytes(d.get(WORD..2 * WORD)?.try_into().ok()?);
    #[allow(clippy::useless_conversion, reason = "time_t and c_long are i64 on 64-bit targets, narrower elsewhere")]
    crate::stamp::ns_of(i64::from(sec), i64::from(nsec))
}

/// A `sockaddr_in` or `sockaddr_in6` from its bytes.
fn sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SocketAddrV4::new(Ipv4Addr::from(ip), port).into())
        }
        libc::AF_INET6 => {
            let flow = u32::from_be_bytes(b.get(4..8)?.try_into().ok()?);
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(b.get(24..28)?.try_into().ok()?);
            Some(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope).into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let len = HDR + data.len();
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(data);
        v.resize(len.next_multiple_of(ALIGN), 0);
        v
    }

    #[test]
    fn finds_the_gro_size_among_other_messages() {
        let mut c = cmsg(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &7u32.to_ne_bytes());
        c.extend(cmsg(libc::SOL_UDP, libc::UDP_GRO, &1468i32.to_ne_bytes()));
        assert_eq!(gro_segment(&c), Some(1468));
        assert_eq!(gro_segment(&c[..HDR + 8]), None, "cut short");
        assert_eq!(gro_segment(&[]), None);
        let mut bad = cmsg(libc::SOL_UDP, libc::UDP_GRO, &64i32.to_ne_bytes());
        bad[..ALIGN].copy_from_slice(&1000usize.to_ne_bytes());
        assert_eq!(gro_segment(&bad), None, "a length past the buffer");
    }

    #[test]
    fn finds_the_software_rx_stamp_beside_the_gro_size() {
        let ts = |s: i64, n: i64| [s.to_ne_bytes(), n.to_ne_bytes()].concat();
        let stamps = [ts(1_700_000_000, 5), ts(0, 0), ts(0, 0)].concat();
        let mut c = cmsg(libc::SOL_UDP, libc::UDP_GRO, &1468i32.to_ne_bytes());
        c.extend(cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &stamps));
        assert!(c.len() <= CMSG_BYTES, "the control space holds both");
        assert_eq!(rx_stamp(&c), Some(1_700_000_000_000_000_005));
        assert_eq!(gro_segment(&c), Some(1468));
        assert_eq!(rx_stamp(&c[..c.len() - 40]), None, "cut short");
        let zero = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &[ts(0, 0), ts(0, 0), ts(0, 0)].concat());
        assert_eq!(rx_stamp(&zero), None, "no software stamp given");
        assert_eq!(rx_stamp(&cmsg(libc::SOL_UDP, libc::UDP_GRO, &1i32.to_ne_bytes())), None);
    }

    #[test]
    fn reads_both_address_families() {
        let mut v4 = Vec::new();
        v4.extend_from_slice(&u16::try_from(libc::AF_INET).unwrap().to_ne_bytes());
        v4.extend_from_slice(&4567u16.to_be_bytes());
        v4.extend_from_slice(&[10, 1, 2, 3]);
        v4.resize(16, 0);
        assert_eq!(sockaddr(&v4), Some(SocketAddr::from(([10, 1, 2, 3], 4567))));
        let mut v6 = Vec::new();
        v6.extend_from_slice(&u16::try_from(libc::AF_INET6).unwrap().to_ne_bytes());
        v6.extend_from_slice(&7878u16.to_be_bytes());
        v6.extend_from_slice(&0u32.to_be_bytes());
        v6.extend_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        v6.extend_from_slice(&2u32.to_ne_bytes());
        assert_eq!(sockaddr(&v6), Some("[fe80::1%2]:7878".parse().unwrap()));
        assert_eq!(sockaddr(&v4[..3]), None);
        assert_eq!(sockaddr(&[0u8; 16]), None, "no family");
    }
}
