//! The sending host's egress qdisc drops, from a netlink `RTM_GETQDISC` dump (what
//! `tc -s qdisc show` prints as `dropped`). A datagram the qdisc of the outgoing interface
//! drops never reaches the wire, and no other counter sees all of them: a send whose whole
//! packet the qdisc refuses returns `ENOBUFS` and counts in `Udp SndbufErrors` (one count
//! per send, however many datagrams a GSO batch held), but a GSO batch the qdisc splits
//! (tbf segments one larger than its burst) and drops in part counts only here, per
//! datagram. The interface's `tx_dropped` counts neither. Pure: the binary sends the
//! request and hands the replies here.
//!
//! Only root qdiscs are summed (parent `TC_H_ROOT`): a classful root (htb, mq) counts its
//! children's drops in its own statistics, so adding the children would count them twice.

/// `NLMSG_ERROR`.
const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
const NLMSG_DONE: u16 = 3;
/// `RTM_NEWQDISC`: one qdisc of a dump.
pub const RTM_NEWQDISC: u16 = 36;
/// `RTM_GETQDISC`: the request.
pub const RTM_GETQDISC: u16 = 38;
/// `TC_H_ROOT`: the parent of a root qdisc.
const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// `TCA_STATS`: `struct tc_stats` (drops at byte 12).
const TCA_STATS: u16 = 3;
/// `TCA_STATS2`: nested `TCA_STATS_*`.
const TCA_STATS2: u16 = 7;
/// `TCA_STATS_QUEUE` inside `TCA_STATS2`: `struct gnet_stats_queue` (drops at byte 8).
const TCA_STATS_QUEUE: u16 = 3;
/// `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// `struct tcmsg`.
const TCMSG: usize = 20;

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The request: a dump of every qdisc (`nlmsghdr` + a zeroed `tcmsg`), sequence `seq`.
pub fn dump_request(seq: u32) -> [u8; NLMSG_HDR + TCMSG] {
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_DUMP: u16 = 0x300;
    let mut b = [0u8; NLMSG_HDR + TCMSG];
    #[expect(clippy::cast_possible_truncation, reason = "36 bytes")]
    b[0..4].copy_from_slice(&((NLMSG_HDR + TCMSG) as u32).to_ne_bytes());
    b[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    b[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    b
}

/// What one receive of a dump held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Part {
    /// Drops of the root qdiscs on the interfaces asked for.
    pub drops: u64,
    /// The dump ended (`NLMSG_DONE`), or the kernel answered with an error.
    pub done: bool,
}

/// The drops in one qdisc message's attributes (`TCA_STATS2`'s queue, else `TCA_STATS`).
fn drops_of(attrs: &[u8]) -> Option<u32> {
    let mut legacy = None;
    let mut at = 0;
    while at + 4 <= attrs.len() {
        let len = usize::from(u16_at(attrs, at)?);
        let kind = u16_at(attrs, at + 2)? & 0x3FFF;
        if len < 4 || at + len > attrs.len() {
            return legacy;
        }
        let body = &attrs[at + 4..at + len];
        if kind == TCA_STATS2 {
            let mut i = 0;
            while i + 4 <= body.len() {
                let l = usize::from(u16_at(body, i)?);
                if l < 4 || i + l > body.len() {
                    break;
                }
                if u16_at(body, i + 2)? & 0x3FFF == TCA_STATS_QUEUE {
                    return u32_at(body, i + 4 + 8);
                }
                i += align4(l);
            }
        } else if kind == TCA_STATS {
            legacy = u32_at(body, 12);
        }
        at += align4(len);
    }
    legacy
}

/// Parses one receive of a dump: the drops of the root qdiscs on `ifindexes`. Malformed
/// or truncated messages end the parse (what was read so far counts) and the dump.
pub fn parse(buf: &[u8], ifindexes: &[u32]) -> Part {
    let mut part = Part::default();
    let mut at = 0;
    while at + NLMSG_HDR <= buf.len() {
        let (Some(len), Some(kind)) = (u32_at(buf, at), u16_at(buf, at + 4)) else { break };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len < NLMSG_HDR || len > buf.len() - at {
            part.done = true;
            break;
        }
        let msg = &buf[at..at + len];
        match kind {
            NLMSG_DONE | NLMSG_ERROR => {
                part.done = true;
                break;
            }
            RTM_NEWQDISC if msg.len() >= NLMSG_HDR + TCMSG => {
                let ifindex = u32_at(msg, NLMSG_HDR + 4).unwrap_or(0);
                let parent = u32_at(msg, NLMSG_HDR + 12).unwrap_or(0);
                if parent == TC_H_ROOT && ifindexes.contains(&ifindex) {
                    part.drops += u64::from(drops_of(&msg[NLMSG_HDR + TCMSG..]).unwrap_or(0));
                }
            }
            _ => {}
        }
        at += align4(len);
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&u16::try_from(4 + body.len()).unwrap().to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(body);
        let to = align4(a.len());
        assert!((a.len()..a.len() + 4).contains(&to), "aligned {} to {to}", a.len());
        a.resize(to, 0);
        a
    }

    fn u32s(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    /// A netlink message of type `kind` with `body` after its header.
    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = u32s(&[u32::try_from(NLMSG_HDR + body.len()).unwrap()]);
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(body);
        m
    }

    /// A qdisc message on ifindex `ifindex` under `parent` with these attributes.
    fn qdisc_with(ifindex: u32, parent: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut body = u32s(&[0, ifindex, 0x8005_0000, parent, 1]);
        body.extend(attrs.concat());
        message(RTM_NEWQDISC, &body)
    }

    /// `TCA_STATS2` holding `nested`.
    fn stats2(nested: &[Vec<u8>]) -> Vec<u8> {
        attr(TCA_STATS2, &nested.concat())
    }

    /// `TCA_STATS_QUEUE` with `drops`.
    fn queue(drops: u32) -> Vec<u8> {
        attr(TCA_STATS_QUEUE, &u32s(&[0, 0, drops, 0, 7]))
    }

    /// The legacy `TCA_STATS` with `drops`.
    fn legacy(drops: u32) -> Vec<u8> {
        let mut legacy = vec![0u8; 8];
        legacy.extend(u32s(&[3, drops, 0, 0, 0, 0, 0]));
        attr(TCA_STATS, &legacy)
    }

    /// A qdisc message: `tc -s` of a tbf on ifindex `ifindex` under `parent`, with drops in
    /// `TCA_STATS2` (`stats2`) or in the legacy `TCA_STATS` only.
    fn qdisc(ifindex: u32, parent: u32, drops: u32, stats2: bool) -> Vec<u8> {
        let mut attrs = vec![attr(1, b"tbf\0")];
        if stats2 {
            attrs.push(self::stats2(&[attr(1, &[0u8; 16]), queue(drops)]));
        }
        attrs.push(legacy(drops));
        qdisc_with(ifindex, parent, &attrs)
    }

    /// The drops `parse` reads from one root qdisc on ifindex 2 with these attributes.
    fn drops(attrs: &[Vec<u8>]) -> u64 {
        parse(&qdisc_with(2, TC_H_ROOT, attrs), &[2]).drops
    }

    fn done() -> Vec<u8> {
        let mut m = u32s(&[20]);
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&[0u8; 14]);
        m
    }

    #[test]
    fn root_qdiscs_of_the_interfaces_asked_for_are_summed() {
        let buf = [
            qdisc(2, TC_H_ROOT, 6_876, true),
            qdisc(2, 0x8005_0001, 999, true), // a child: counted in its root already
            qdisc(3, TC_H_ROOT, 50, false),   // TCA_STATS only
            qdisc(4, TC_H_ROOT, 7, true),     // another interface
        ]
        .concat();
        assert_eq!(parse(&buf, &[2, 3]), Part { drops: 6_926, done: false });
        assert_eq!(parse(&[buf, done()].concat(), &[2]), Part { drops: 6_876, done: true });
        assert_eq!(parse(&done(), &[2]), Part { drops: 0, done: true });
    }

    #[test]
    fn truncated_and_garbage_input_never_panics() {
        let buf = [qdisc(2, TC_H_ROOT, 5, true), done()].concat();
        for cut in 0..buf.len() {
            let p = parse(&buf[..cut], &[2]);
            assert!(p.drops <= 5, "{cut}: {p:?}");
        }
        let mut bad = buf.clone();
        bad[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse(&bad, &[2]), Part { drops: 0, done: true });
        let r = dump_request(7);
        assert_eq!((u32_at(&r, 0), u16_at(&r, 4), u32_at(&r, 8)), (Some(36), Some(RTM_GETQDISC), Some(7)));
        // NLM_F_REQUEST | NLM_F_DUMP: without them the kernel answers no dump
        assert_eq!(u16_at(&r, 6), Some(0x301));
    }

    #[test]
    fn the_queue_of_stats2_is_read_before_the_legacy_stats() {
        // Different counts in the two places show which one is read.
        let basic = attr(1, &[0u8; 16]);
        assert_eq!(drops(&[stats2(&[basic.clone(), queue(40)]), legacy(1)]), 40);
        assert_eq!(drops(&[stats2(&[basic.clone(), queue(40)])]), 40, "TCA_STATS2 alone");
        assert_eq!(drops(&[stats2(&[basic]), legacy(1)]), 1, "no queue in TCA_STATS2");
        // Empty attributes (4 bytes, no body) are skipped, outside and inside TCA_STATS2.
        let empty = attr(9, &[]);
        assert_eq!(drops(&[empty.clone(), stats2(&[empty, queue(40)])]), 40);
        // A long attribute first (tbf's TCA_OPTIONS) does not hide those after it.
        let options = attr(2, &[0u8; 60]);
        assert_eq!(drops(&[options.clone(), legacy(50)]), 50);
        assert_eq!(drops(&[attr(1, b"tbf\0"), options, stats2(&[attr(1, &[0u8; 16]), queue(40)]), legacy(1)]), 40);
    }

    #[test]
    fn a_malformed_attribute_ends_the_read_of_a_message() {
        // A length below the 4-byte header: what was read before it counts, nothing after.
        let short = [2u16.to_ne_bytes(), 9u16.to_ne_bytes()].concat();
        assert_eq!(drops(&[legacy(1), short.clone(), stats2(&[queue(40)])]), 1);
        // The same inside TCA_STATS2: its queue after the bad attribute is not read.
        assert_eq!(drops(&[stats2(&[short, queue(40)]), legacy(1)]), 1);
        // A nested queue whose length runs past TCA_STATS2's end is not read.
        let mut long = queue(40);
        long[0..2].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(drops(&[stats2(&[long]), legacy(1)]), 1);
    }

    #[test]
    fn short_messages_end_or_are_skipped_without_panicking() {
        // A header-only message (16 bytes) of another type is skipped.
        let noop = message(1, &[]);
        assert_eq!(noop.len(), NLMSG_HDR);
        let q = qdisc(2, TC_H_ROOT, 5, true);
        assert_eq!(parse(&[noop, q.clone()].concat(), &[2]), Part { drops: 5, done: false });
        // A length below the header's is malformed: the parse ends there.
        let mut bad = message(1, &[]);
        bad[0..4].copy_from_slice(&8u32.to_ne_bytes());
        assert_eq!(parse(&[bad, q].concat(), &[2]), Part { drops: 0, done: true });
        // A qdisc message too short for its tcmsg is not read, though its parent and
        // ifindex are in it.
        let cut = message(RTM_NEWQDISC, &u32s(&[0, 2, 0, TC_H_ROOT]));
        assert_eq!(cut.len(), NLMSG_HDR + 16);
        let q = qdisc(2, TC_H_ROOT, 5, true);
        assert_eq!(parse(&[cut, q].concat(), &[2]), Part { drops: 5, done: false });
    }
}
