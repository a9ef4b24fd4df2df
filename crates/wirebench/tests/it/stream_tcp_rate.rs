//! The TCP stream's rate against the link it crossed, in namespaces: four connections
//! through a 40 Mbit/s tbf. A TCP sender's last write returns while its socket buffers and
//! the qdisc still hold what it wrote; a rate over the sending time counted those bytes in
//! too little time and came out above the link (here 44.4 Mbit/s of payload through 40;
//! 964 Mbit/s through 1 Gbit/s, which carries at most 956).
//! Over the receiving time it stays below the link, and the tbf's own byte counter agrees.

use crate::lab::{Lab, qdisc_counter, sh};

/// The tbf's rate, bits per second of whole Ethernet frames (tbf counts `skb->len`, the
/// 14-byte Ethernet header included).
const LINK_BITS: f64 = 40e6;

/// Payload bytes to frame bytes: MTU 1500 carries 1448 bytes of TCP payload (1500 - 20 IP
/// - 20 TCP - 12 timestamp option) in a 1514-byte frame.
const WIRE_PER_PAYLOAD: f64 = 1514.0 / 1448.0;

/// Forward (this client writes through the tbf on its link) and reverse (serve writes
/// through the tbf on its own): the payload rate with its headers is at most the tbf's rate
/// plus 1 % (its 32 KB bucket over the run is 0.2 %, the rest is for the estimate of the
/// receiving time) and within 15 % below it; the tbf's bytes are the payload's frames, and
/// over the same time they say the same. (The rate over the writing time, before: 44.4 Mbit/s
/// of payload, 46.4 with headers.)
#[test]
fn tcp_rate_through_a_tbf_is_at_most_the_link() {
    let mut lab = Lab::new("tcprt");
    let snd = lab.ns("snd");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.201.1/24", &rcv, "eth0", Some("10.77.201.2/24"));
    for ns in [&snd, &rcv] {
        sh(&[
            "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "40mbit", "burst",
            "32kb", "limit", "256kb",
        ]);
    }
    lab.serve(&rcv, &["serve", "--listen", "10.77.201.2:7878", "--open"]);
    for (direction, shaper) in [("forward", &snd), ("reverse", &rcv)] {
        let before = qdisc_counter(shaper, "eth0", "Sent");
        let mut args = vec!["stream", "10.77.201.2:7878", "--proto", "tcp", "--parallel", "4", "--duration", "3s"];
        if direction == "reverse" {
            args.push("--reverse");
        }
        let (s, out) = crate::stream_loss::run(&snd, &args);
        eprintln!("{out}");
        let tbf_bytes = qdisc_counter(shaper, "eth0", "Sent") - before;
        let r = &s.receivers[0];
        assert_eq!(r.direction.as_str(), direction);
        assert_eq!(r.total.received, r.sent, "{direction}: TCP loses nothing");
        assert!(r.over_receive_time(), "{direction}: {r:?}");
        let payload = r.bits_per_s();
        let wire = payload * WIRE_PER_PAYLOAD;
        // What crossed the tbf: the payload's frames, and a little more (handshakes, ACKs
        // of the other direction's control messages).
        let frames = r.total.bytes as f64 * WIRE_PER_PAYLOAD;
        let tbf_rate = tbf_bytes as f64 * 8e9 / r.time_base_ns() as f64;
        eprintln!(
            "{direction}: payload {:.2} Mbit/s, with headers {:.2} Mbit/s over {:.3} s; writes {:?} Mbit/s over {:?} s; tbf sent {tbf_bytes} B ({:.2} Mbit/s over the receiving time), frames of the payload {frames:.0} B",
            payload / 1e6,
            wire / 1e6,
            r.time_base_ns() as f64 / 1e9,
            s.sender.map(|x| x.bits_per_s / 1e6),
            s.sender.map(|x| x.send_ns as f64 / 1e9),
            tbf_rate / 1e6,
        );
        assert!(wire <= LINK_BITS * 1.01, "{direction}: {wire:.0} bit/s with headers through a {LINK_BITS} bit/s tbf");
        assert!(wire >= LINK_BITS * 0.85, "{direction}: {wire:.0} bit/s with headers, far below {LINK_BITS}");
        assert!(
            (tbf_bytes as f64 - frames).abs() <= frames * 0.02,
            "{direction}: tbf {tbf_bytes} B, frames {frames:.0} B"
        );
        assert!(tbf_rate <= LINK_BITS * 1.03, "{direction}: the tbf's own bytes {tbf_rate:.0} bit/s");
    }
}
