//! `stream --find-max-rate` through a real bottleneck, in namespaces: a sender, a router
//! (`net.ipv4.ip_forward=1`) shaping its egress toward the receiver with tbf, a receiver.

use wirebench_core::generator::GeneratorVerdict;
use wirebench_core::report::SearchEnding;

use crate::lab::{Lab, qdisc_counter, sh};
use crate::stream_loss::run;

/// A 50 Mbit/s tbf that holds 50 ms of queue (about 300 KB): a trial a little above the
/// link loses nothing in 2 s while its excess fits in that queue, so by loss alone the
/// search answered up to 3 % above the link. Each trial also fails when a queue built
/// (the one-way delay rose), so the answer at the default trial length is within 1 % of
/// the payload rate the shaper passes: 1468-byte payloads in packets of the size its own
/// counters say (`tc -s qdisc`: bytes over packets, 1510 on the wire), 48.6 Mbit/s. On a host
/// too busy to pace a trial near the link (its sender fell short, and its generator says
/// so), the search ends there as the sender's limit: then the answer is what was sent,
/// never above the link.
#[test]
fn the_loss_free_rate_through_a_shaper_is_the_shapers_payload_rate() {
    let mut lab = Lab::new("fmr");
    let snd = lab.ns("snd");
    let rtr = lab.ns("rtr");
    let rcv = lab.ns("rcv");
    Lab::link(&snd, "eth0", "10.77.241.1/24", &rtr, "eth0", Some("10.77.241.254/24"));
    Lab::link(&rtr, "eth1", "10.77.242.254/24", &rcv, "eth0", Some("10.77.242.2/24"));
    sh(&["ip", "-n", &snd, "route", "add", "default", "via", "10.77.241.254"]);
    sh(&["ip", "-n", &rcv, "route", "add", "default", "via", "10.77.242.254"]);
    sh(&["ip", "netns", "exec", &rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(&[
        "ip", "netns", "exec", &rtr, "tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "50mbit", "burst",
        "32kb", "latency", "50ms",
    ]);
    lab.serve(&rcv, &["serve", "--listen", "0.0.0.0:7878", "--open"]);
    let (bytes0, packets0) = (qdisc_counter(&rtr, "eth1", "Sent"), qdisc_counter(&rtr, "eth1", "bytes"));
    let (s, text) = run(&snd, &["stream", "10.77.242.2:7878", "--find-max-rate", "--no-hiccup"]);
    let (bytes1, packets1) = (qdisc_counter(&rtr, "eth1", "Sent"), qdisc_counter(&rtr, "eth1", "bytes"));
    let search = s.search.as_ref().expect("a search");
    // the shaper's own figures: its bytes per packet (the data's 1510 and a few control
    // segments), and so the payload rate it passes
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    let per_packet = (bytes1 - bytes0) as f64 / (packets1 - packets0) as f64;
    assert!((1_490.0..=1_510.0).contains(&per_packet), "{per_packet} bytes a packet");
    let payload = 50e6 * 1468.0 / per_packet;
    if search.ending == SearchEnding::SenderLimited {
        let missed = s.generator.as_ref().is_some_and(|g| g.verdict != GeneratorVerdict::Kept);
        assert!(missed && search.best_bits_per_s <= payload * 1.005, "{text}");
        return;
    }
    assert_eq!(search.ending, SearchEnding::Found, "{text}");
    let off = (search.best_bits_per_s - payload) / payload;
    assert!(
        off.abs() <= 0.01,
        "{:.2} Mbit/s against the shaper's {:.2}: {text}",
        search.best_bits_per_s / 1e6,
        payload / 1e6
    );
    // a trial failed on its queue alone: by loss it passed
    assert!(search.trials.iter().any(|t| t.queue && t.loss == 0.0 && !t.passed), "{text}");
    assert!(search.trials.iter().all(|t| t.passed != (t.queue || t.loss > 0.0)), "{:?}", search.trials);
    assert!(text.contains("highest rate with loss <= 0.0000%: "), "{text}");
}
