//! Tests of the fleet matrix: merging, refusing, the verdicts on it.

#![allow(clippy::cast_possible_truncation)]

use super::*;
use crate::mesh::api::{CellReport, WindowRef};
use crate::mesh::window::histogram_of;

fn node(i: usize) -> NodeRef {
    NodeRef { addr: format!("10.0.0.{i}:7878"), name: Some(format!("n{i}")), zone: None, stamp: false }
}

fn cell(peer: usize, proto: Proto, samples: &[u32], lost: u64) -> CellReport {
    let h = histogram_of(samples);
    let received = samples.len() as u64;
    CellReport {
        peer: node(peer),
        proto,
        sent: received + lost,
        received,
        lost,
        late: 0,
        duplicates: 0,
        rtt: RttSummary::of(&h),
        histogram: (received > 0).then(|| encode_histogram(&h)),
    }
}

fn report(me: usize, cells: Vec<CellReport>) -> MatrixReport {
    MatrixReport {
        api_version: API_VERSION,
        agent: node(me),
        window: Some(WindowRef { index: 3, len_ns: 10_000_000_000, start_unix_ns: 1_000 + me as u64 }),
        cells,
    }
}

/// Four agents; node 4's agent is down and nobody reaches it.
fn fleet() -> MatrixBuilder {
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=3 {
        let mut cells = Vec::new();
        for peer in (1..=4).filter(|&p| p != me) {
            let (samples, lost): (Vec<u32>, u64) =
                if peer == 4 { (vec![], 10) } else { ((1..=10).map(|i| me as u32 * 1000 + i).collect(), 0) };
            cells.push(cell(peer, Proto::Udp, &samples, lost));
        }
        b.add_report(&report(me, cells)).unwrap();
    }
    b.add_unreachable(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", "connection refused");
    b
}

/// Agents 1 to 3 probing nodes 1 to `nodes` on each of `protos`: node 4 answers nothing (10
/// lost), every other cell is good.
fn node_4_unheard(nodes: usize, protos: &[Proto]) -> MatrixBuilder {
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=3 {
        let mut cells = Vec::new();
        for p in (1..=nodes).filter(|&p| p != me) {
            for &proto in protos {
                cells.push(if p == 4 { cell(p, proto, &[], 10) } else { cell(p, proto, &[100; 10], 0) });
            }
        }
        b.add_report(&report(me, cells)).unwrap();
    }
    b
}

/// The problems' one-line summaries, in order.
fn named(r: &MeshResults) -> Vec<&str> {
    r.problems.iter().map(|p| p.summary.as_str()).collect()
}

#[test]
fn merges_rows_and_names_a_dead_node() {
    let r = fleet().finish(&Thresholds::default());
    assert_eq!(r.nodes.iter().map(MeshNode::label).collect::<Vec<_>>(), ["n1", "n2", "n3", "n4"]);
    assert!(!r.nodes[3].reported && r.nodes[3].error.as_deref() == Some("connection refused"));
    assert_eq!(r.cells.len(), 9);
    assert_eq!(r.window_start_unix_ns, Some(1_003));
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!((r.problems[0].kind.as_str(), r.problems[0].down), ("node", true));
    assert_eq!(r.problems[0].summary, "unicast node n4: agent unreachable and column bad (3/3)");
    // Exact merge: 60 samples, 1001..1010, 2001..2010, 3001..3010 twice each.
    let all = &r.combined[0].latency.summary;
    assert_eq!(all.count, 60);
    let mut h = crate::latency::histogram();
    for me in 1..=3u64 {
        for i in 1..=10 {
            h.record_n(me * 1000 + i, 2).unwrap();
        }
    }
    assert_eq!(all.at(50.0), Some(crate::latency::percentile::value_at_percentile(&h, 50.0)));
    assert_eq!(all.max_ns, h.max());
}

/// Three agents and a STAMP reflector (node 9, sharing agent 1's address) they all probe:
/// its column is measured, its row is empty and not held against it, and an unreachable
/// agent at its address is never matched to it. Its column all lost names it; one bad cell
/// of it is a path.
#[test]
fn a_stamp_reflector_has_a_column_and_no_row() {
    let router = || NodeRef { addr: "10.0.0.1:862".into(), name: Some("r9".into()), zone: None, stamp: true };
    let build = |lost_from: &[usize]| {
        let mut b = MatrixBuilder::new("agents");
        for me in 1..=3 {
            let mut cells: Vec<CellReport> =
                (1..=3).filter(|&p| p != me).map(|p| cell(p, Proto::Udp, &[1000; 10], 0)).collect();
            let (samples, lost) = if lost_from.contains(&me) { (vec![], 10) } else { (vec![2000; 10], 0) };
            cells.push(CellReport { peer: router(), ..cell(0, Proto::Udp, &samples, lost) });
            b.add_report(&report(me, cells)).unwrap();
        }
        b.add_unreachable(Some("10.0.0.1".parse().unwrap()), "http://10.0.0.1:9999", "timed out");
        b.finish(&Thresholds::default())
    };
    let r = build(&[]);
    let i = r.nodes.iter().position(|n| n.label() == "r9").unwrap();
    assert!(r.nodes[i].stamp && !r.nodes[i].reported && r.nodes[i].error.is_none());
    let column: Vec<&MeshCell> = r.cells.iter().filter(|c| c.dst == i).collect();
    assert_eq!(column.len(), 3);
    assert!(
        column.iter().all(|c| c.rtt.is_some_and(|t| t.p50_ns == 2000) && c.verdict == crate::report::CellJudged::Good)
    );
    assert!(!r.cells.iter().any(|c| c.src == i), "no row");
    // The unreachable agent is its own row, not the reflector's.
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(r.problems[0].summary.starts_with("agent http://10.0.0.1:9999 unreachable"), "{:?}", r.problems);
    let r = build(&[2]);
    assert!(r.problems.iter().any(|p| p.summary == "unicast path n2 -> r9"), "{:?}", r.problems);
    let r = build(&[1, 2, 3]);
    let p = r.problems.iter().find(|p| p.nodes == [i]).unwrap();
    assert_eq!(p.summary, "unicast stamp reflector r9: column bad (3/3), it answers none of its probers well");
    assert!(!r.problems.iter().any(|p| p.kind == "path"), "{:?}", r.problems);
}

#[test]
fn a_dead_agent_is_named_as_its_peers_know_it() {
    // The agent's URL is a name, not an address: matched to the node of that name.
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=3 {
        let cells = (1..=4).filter(|&p| p != me).map(|p| cell(p, Proto::Udp, &[1000], 0)).collect();
        b.add_report(&report(me, cells)).unwrap();
    }
    b.add_unreachable(None, "http://n4:9878/", "timed out");
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.nodes.iter().map(MeshNode::label).collect::<Vec<_>>(), ["n1", "n2", "n3", "n4"]);
    assert_eq!(r.nodes[3].error.as_deref(), Some("timed out"));
    // Two dead agents on one address (one host, two agents): each by its name.
    let mut b = MatrixBuilder::new("agents");
    let local = |i: usize| NodeRef { name: Some(format!("n{i}")), ..NodeRef::at(format!("127.0.0.1:{}", 7000 + i)) };
    let mut c = cell(2, Proto::Udp, &[1000], 0);
    c.peer = local(2);
    let mut d = cell(3, Proto::Udp, &[1000], 0);
    d.peer = local(3);
    b.add_report(&MatrixReport { agent: local(1), ..report(1, vec![c, d]) }).unwrap();
    b.add_unreachable(Some("127.0.0.1".parse().unwrap()), "http://n3:9878/", "refused");
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.nodes.len(), 3, "{:?}", r.nodes);
    assert_eq!(r.nodes.iter().find(|n| n.label() == "n3").and_then(|n| n.error.as_deref()), Some("refused"));
}

#[test]
fn no_agent_answering_is_no_matrix_not_no_problems() {
    // The only agent asked did not answer: that is no matrix, not "1 nodes, 0
    // reporting" with "verdict: no problems".
    let mut b = MatrixBuilder::new("agents");
    b.add_unreachable(Some("127.0.0.1".parse().unwrap()), "http://127.0.0.1:9/", "connection refused");
    let r = b.finish(&Thresholds::default());
    assert!(!r.has_rows());
    let named: Vec<(&str, &str, &str)> =
        r.problems.iter().map(|p| (p.scope.as_str(), p.kind.as_str(), p.summary.as_str())).collect();
    assert_eq!(
        named,
        [
            ("agents", "unreachable", "agent http://127.0.0.1:9/ unreachable: connection refused"),
            ("agents", "no_matrix", "no agent gave its row: no matrix to judge"),
        ]
    );
    assert_eq!(r.problems[0].nodes, [0]);
    // Prometheus with no series of any agent: nothing asked, nothing to judge.
    let r = MatrixBuilder::new("prometheus").finish(&Thresholds::default());
    assert!(r.nodes.is_empty() && !r.has_rows());
    assert_eq!(r.problems.len(), 1);
    assert_eq!(r.problems[0].summary, "Prometheus holds no current scrape of any agent: no matrix to judge");
}

#[test]
fn rows_with_no_judged_cell_are_not_judged_not_no_problems() {
    // Agents that answer before their first window closed (no window, no cells), or
    // whose cells all hold fewer than min_probes: before, "verdict: no problems".
    let not_judged = |b: MatrixBuilder| {
        let r = b.finish(&Thresholds::default());
        assert!(r.has_rows() && !r.judged());
        r.problems.iter().map(|p| (p.scope.clone(), p.kind.clone(), p.summary.clone())).collect::<Vec<_>>()
    };
    let want = [(
        "agents".to_owned(),
        "not_judged".to_owned(),
        "no cell judged yet: no closed window has 5 probes of a cell (just started? wait a window)".to_owned(),
    )];
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=2 {
        b.add_report(&MatrixReport { window: None, ..report(me, Vec::new()) }).unwrap();
    }
    assert_eq!(not_judged(b), want);
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 4], 0)])).unwrap();
    assert_eq!(not_judged(b), want);
    let mut b = MatrixBuilder::new("prometheus");
    b.add_cell(&node(1), &node(2), Proto::Udp, 0, 0, None);
    assert_eq!(not_judged(b), want);
    // One judged cell (here bad: nothing answered) is a verdict.
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 4], 0), cell(3, Proto::Tcp, &[], 5)])).unwrap();
    let r = b.finish(&Thresholds::default());
    assert!(r.judged());
    assert_eq!(r.problems.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(), ["path"]);
}

#[test]
fn an_unreachable_agent_whose_node_answers_is_named_and_a_dead_node_once() {
    // n4's agent API is down, but n4 still answers every probe: no node problem, and the
    // agent is still named (before: "no problems").
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=3 {
        let cells = (1..=4).filter(|&p| p != me).map(|p| cell(p, Proto::Udp, &[100; 10], 0)).collect();
        b.add_report(&report(me, cells)).unwrap();
    }
    b.add_unreachable(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", "HTTP 503");
    let r = b.finish(&Thresholds::default());
    assert!(r.has_rows());
    assert_eq!(named(&r), ["agent n4 unreachable: HTTP 503"]);
    // A dead node (nobody reaches it either) is named once, as the node down.
    let r = fleet().finish(&Thresholds::default());
    assert_eq!(named(&r), ["unicast node n4: agent unreachable and column bad (3/3)"]);
    // A node only known as a peer (its agent not asked) is not an unreachable agent.
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 10], 0)])).unwrap();
    assert!(b.finish(&Thresholds::default()).problems.is_empty());
}

#[test]
fn an_unreachable_agent_sharing_an_address_is_the_one_without_a_row() {
    // Three agents on one host: 127.0.0.1:1, :2 and :3; the one on :3 is down.
    let at = |p: u16| NodeRef::at(format!("127.0.0.1:{p}"));
    let mut b = MatrixBuilder::new("agents");
    for me in [1u16, 2] {
        let cells = [1u16, 2, 3]
            .into_iter()
            .filter(|&p| p != me)
            .map(|p| CellReport { peer: at(p), ..cell(0, Proto::Udp, &[100], 0) })
            .collect();
        b.add_report(&MatrixReport { agent: at(me), ..report(0, cells) }).unwrap();
    }
    b.add_unreachable(Some("127.0.0.1".parse().unwrap()), "http://127.0.0.1:9003", "refused");
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.nodes.len(), 3);
    assert_eq!((r.nodes[2].addr.as_str(), r.nodes[2].error.as_deref()), ("127.0.0.1:3", Some("refused")));
}

#[test]
fn nodes_sharing_a_name_are_shown_by_address() {
    let mut b = MatrixBuilder::new("agents");
    let same = |p: u16| NodeRef { name: Some("vm".into()), ..NodeRef::at(format!("127.0.0.1:{p}")) };
    b.add_report(&MatrixReport {
        agent: same(1),
        ..report(0, vec![CellReport { peer: same(2), ..cell(0, Proto::Udp, &[9], 0) }])
    })
    .unwrap();
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.nodes.iter().map(MeshNode::label).collect::<Vec<_>>(), ["127.0.0.1:1", "127.0.0.1:2"]);
}

#[test]
fn reports_that_do_not_add_up_are_refused_whole() {
    let mut b = MatrixBuilder::new("agents");
    let mut c = cell(2, Proto::Tcp, &[5, 6, 7], 0);
    c.sent = 4;
    assert!(b.add_report(&report(1, vec![c])).unwrap_err().to_string().contains("received + lost"));
    let mut c = cell(2, Proto::Tcp, &[5, 6, 7], 0);
    c.histogram = Some(encode_histogram(&histogram_of(&[5, 6])));
    assert!(b.add_report(&report(1, vec![c])).unwrap_err().to_string().contains("histogram disagrees"));
    let mut wide = Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 5).unwrap();
    wide.record(5).unwrap();
    let mut c = cell(2, Proto::Tcp, &[5], 0);
    c.histogram = Some(encode_histogram(&wide));
    assert!(b.add_report(&report(1, vec![c])).unwrap_err().to_string().contains("wider or finer"));
    let mut bad_peer = cell(2, Proto::Udp, &[5], 0);
    bad_peer.peer.addr = "not an address".into();
    assert!(b.add_report(&report(1, vec![bad_peer])).is_err());
    let mut r = report(1, vec![]);
    r.api_version = 9;
    assert!(b.add_report(&r).is_err());
    assert!(b.finish(&Thresholds::default()).nodes.is_empty(), "nothing of the refused reports kept");
}

#[test]
fn a_slow_pair_is_a_path_and_multicast_is_judged_apart() {
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=3 {
        let mut cells = Vec::new();
        for peer in (1..=3).filter(|&p| p != me) {
            let slow = me == 1 && peer == 2;
            let samples: Vec<u32> = (0..10).map(|_| if slow { 50_000_000 } else { 20_000 }).collect();
            cells.push(cell(peer, Proto::Udp, &samples, 0));
            // n3 neither hears the group nor is heard on it.
            if me == 3 || peer == 3 {
                cells.push(cell(peer, Proto::Multicast, &[], 10));
            } else {
                cells.push(cell(peer, Proto::Multicast, &samples, 0));
            }
        }
        b.add_report(&report(me, cells)).unwrap();
    }
    let r = b.finish(&Thresholds::default());
    let summaries: Vec<&str> = r.problems.iter().map(|p| p.summary.as_str()).collect();
    assert_eq!(
        summaries,
        [
            "unicast path n1 -> n2",
            "multicast node n3: row and column bad (row 2/2, column 2/2)",
            "multicast path n1 -> n2",
        ]
    );
}

#[test]
fn the_budget_refuses_whole_rows_past_it_and_they_are_named_skipped() {
    // Four rows of one shape: agent 10.0.0.i, one cell to its own peer 10.0.0.1i.
    let row = |i: usize| report(i, vec![cell(10 + i, Proto::Udp, &[100; 10], 0)]);
    let text = row(1).cells[0].histogram.as_ref().unwrap().len();
    let one = (NODE_BYTES + 2 * "10.0.0.1:7878".len() + "n1".len())
        + (NODE_BYTES + 2 * "10.0.0.11:7878".len() + "n11".len())
        + CELL_BYTES
        + text;
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&row(1)).unwrap();
    assert_eq!(b.held(), one, "the cost, by hand");
    let mut b = MatrixBuilder::new("agents").with_budget(3 * one + one / 2);
    for i in 1..=3 {
        b.add_report(&row(i)).unwrap();
    }
    assert_eq!(b.held(), 3 * one);
    let refused = b.add_report(&row(4)).unwrap_err();
    assert_eq!(refused, Refused::Budget { budget: 3 * one + one / 2, held: 3 * one });
    assert_eq!(b.held(), 3 * one, "a refused row holds nothing");
    b.add_skipped(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", &format!("not kept: {refused}"));
    let r = b.finish(&Thresholds::default());
    let named: Vec<(&str, &str)> = r.problems.iter().map(|p| (p.kind.as_str(), p.summary.as_str())).collect();
    let why = format!(
        "agent http://10.0.0.4:9878 skipped: not kept: the matrix holds {} of its {} bytes: this row would pass them",
        3 * one,
        3 * one + one / 2
    );
    assert_eq!(named, [("skipped", why.as_str())]);
    assert_eq!(r.nodes.iter().filter(|n| n.reported).count(), 3);
}

/// A cell as a real agent sends it: the histogram in plain V2, not compressed.
fn plain_cell(peer: usize, proto: Proto, samples: &[u32]) -> CellReport {
    let h = histogram_of(samples);
    CellReport { histogram: Some(crate::report::encode_histogram_plain(&h)), ..cell(peer, proto, samples, 0) }
}

#[test]
fn plain_histograms_as_agents_send_them_are_read_checked_and_merged() {
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, vec![plain_cell(2, Proto::Udp, &[1_000; 10])])).unwrap();
    b.add_report(&report(2, vec![plain_cell(1, Proto::Udp, &[3_000; 10])])).unwrap();
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.cells.iter().map(|c| c.verdict.as_str()).collect::<Vec<_>>(), ["good", "good"]);
    let all = &r.combined[0].latency.summary;
    assert_eq!((all.count, all.min_ns), (20, 1_000));
    assert!(crate::latency::histogram().equivalent(all.max_ns, 3_000), "{}", all.max_ns);
    // The checks hold for the plain form too: a histogram that disagrees with its counts,
    // one wider than a mesh histogram, and a header cut short are refused.
    let mut b = MatrixBuilder::new("agents");
    let mut c = plain_cell(2, Proto::Tcp, &[5, 6, 7]);
    c.histogram = Some(crate::report::encode_histogram_plain(&histogram_of(&[5, 6])));
    let e = b.add_report(&report(1, vec![c])).unwrap_err().to_string();
    assert!(e.contains("histogram disagrees"), "{e}");
    let mut wide = Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 3).unwrap();
    wide.record(5).unwrap();
    let mut c = plain_cell(2, Proto::Tcp, &[5]);
    c.histogram = Some(crate::report::encode_histogram_plain(&wide));
    let e = b.add_report(&report(1, vec![c])).unwrap_err().to_string();
    assert_eq!(e, "cell to 10.0.0.2:7878 (tcp): histogram: wider or finer than a mesh histogram");
    let text = crate::report::encode_histogram_plain(&histogram_of(&[5]));
    let raw = base64::engine::general_purpose::STANDARD.decode(&text).unwrap();
    let mut c = plain_cell(2, Proto::Tcp, &[5]);
    c.histogram = Some(base64::engine::general_purpose::STANDARD.encode(&raw[..39]));
    let e = b.add_report(&report(1, vec![c])).unwrap_err().to_string();
    assert_eq!(e, "cell to 10.0.0.2:7878 (tcp): histogram: truncated");
    let mut c = plain_cell(2, Proto::Tcp, &[5]);
    c.histogram = Some(base64::engine::general_purpose::STANDARD.encode([0u8; 40]));
    let e = b.add_report(&report(1, vec![c])).unwrap_err().to_string();
    assert_eq!(e, "cell to 10.0.0.2:7878 (tcp): histogram: not an HdrHistogram V2 encoding");
    assert!(b.finish(&Thresholds::default()).nodes.is_empty());
}

#[test]
fn a_report_given_again_replaces_its_cells_and_a_cell_to_itself_is_dropped() {
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 10], 0)])).unwrap();
    let once = b.held();
    // again, with a cell to itself: the same cells, the same bytes held
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 10], 0), cell(1, Proto::Udp, &[100; 10], 0)])).unwrap();
    assert_eq!(b.held(), once);
    // the same row, now lossy: the newer cell is the one judged
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 5], 5)])).unwrap();
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.cells.len(), 1);
    assert_eq!((r.cells[0].sent, r.cells[0].lost, r.cells[0].verdict.as_str()), (10, 5, "bad"));
}

#[test]
fn an_agents_own_name_and_zone_win_over_its_peers_labels() {
    let mut b = MatrixBuilder::new("agents");
    let known_as = NodeRef { addr: node(2).addr, name: Some("other".into()), zone: Some("z9".into()), stamp: false };
    b.add_report(&report(1, vec![CellReport { peer: known_as, ..cell(2, Proto::Udp, &[100; 10], 0) }])).unwrap();
    let me = NodeRef { zone: Some("z2".into()), ..node(2) };
    b.add_report(&MatrixReport { agent: me, ..report(2, vec![cell(1, Proto::Udp, &[100; 10], 0)]) }).unwrap();
    let r = b.finish(&Thresholds::default());
    let got: Vec<(&str, Option<&str>)> = r.nodes.iter().map(|n| (n.label(), n.zone.as_deref())).collect();
    // sorted by zone: no zone first
    assert_eq!(got, [("n1", None), ("n2", Some("z2"))]);
}

#[test]
fn one_bad_transport_makes_the_pair_bad() {
    // udp good, tcp lossy, on the same pair both ways: the unicast grid holds the worse
    let mut b = MatrixBuilder::new("agents");
    for (me, peer) in [(1, 2), (2, 1)] {
        let cells = vec![cell(peer, Proto::Udp, &[100; 10], 0), cell(peer, Proto::Tcp, &[100; 5], 5)];
        b.add_report(&report(me, cells)).unwrap();
    }
    let r = b.finish(&Thresholds::default());
    assert_eq!(named(&r), ["unicast path n1 <-> n2"]);
    // in either order the tcp cell comes first
    let mut b = MatrixBuilder::new("agents");
    for (me, peer) in [(1, 2), (2, 1)] {
        let cells = vec![cell(peer, Proto::Tcp, &[100; 5], 5), cell(peer, Proto::Udp, &[100; 10], 0)];
        b.add_report(&report(me, cells)).unwrap();
    }
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.problems.iter().map(|p| p.summary.as_str()).collect::<Vec<_>>(), ["unicast path n1 <-> n2"]);
}

#[test]
fn prometheus_cells_rows_and_window_are_kept() {
    let mut b = MatrixBuilder::new("prometheus");
    b.set_window(10_000_000_000);
    let rtt = |ns| Some(RttSummary { count: 10, min_ns: ns, p50_ns: ns, p99_ns: ns, max_ns: ns });
    b.add_cell(&node(1), &node(2), Proto::Udp, 10, 0, rtt(100));
    assert_eq!(b.held(), CELL_BYTES + 2 * (NODE_BYTES + 2 * "10.0.0.1:7878".len() + 2));
    let held = b.held();
    // the same cell again (a later sample) replaces it; a cell to itself is dropped
    b.add_cell(&node(1), &node(2), Proto::Udp, 10, 20, rtt(100));
    b.add_cell(&node(1), &node(1), Proto::Udp, 10, 0, rtt(100));
    assert_eq!(b.held(), held);
    b.add_cell(&node(2), &node(1), Proto::Udp, 10, 0, rtt(50_000_000));
    // n3's scrape worked but it exports no cell yet; n4's agent is down
    b.mark_reported(&node(3));
    b.add_unreachable(None, "10.0.0.4:7878", "down");
    let r = b.finish(&Thresholds::default());
    assert_eq!((r.source.as_str(), r.window_ns, r.window_start_unix_ns), ("prometheus", Some(10_000_000_000), None));
    let cells: Vec<(usize, usize, u64, u64, &str)> =
        r.cells.iter().map(|c| (c.src, c.dst, c.sent, c.lost, c.verdict.as_str())).collect();
    // lost is at most sent; the slow cell is bad on its p99
    // (sorted by label: the agent known only by its address first)
    assert_eq!(cells, [(1, 2, 10, 10, "bad"), (2, 1, 10, 0, "bad")]);
    let reported: Vec<(&str, bool, Option<&str>)> =
        r.nodes.iter().map(|n| (n.label(), n.reported, n.error.as_deref())).collect();
    assert_eq!(
        reported,
        [("10.0.0.4:7878", false, Some("down")), ("n1", true, None), ("n2", true, None), ("n3", true, None)]
    );
    assert_eq!(named(&r), ["agent 10.0.0.4:7878 unreachable: down", "unicast path n1 <-> n2"]);
    // a node marked reported after a failure is no longer in error
    let mut b = MatrixBuilder::new("prometheus");
    b.add_unreachable(None, "10.0.0.3:7878", "scrape failed");
    b.mark_reported(&NodeRef { addr: "10.0.0.3:7878".into(), name: None, zone: None, stamp: false });
    let r = b.finish(&Thresholds::default());
    assert_eq!((r.nodes[0].reported, r.nodes[0].error.as_deref()), (true, None));
}

#[test]
fn prometheus_unread_is_named_as_prometheus() {
    let mut b = MatrixBuilder::new("prometheus");
    b.add_skipped(None, "http://prom:9090", "answer past the budget");
    let r = b.finish(&Thresholds::default());
    let named: Vec<(&str, &str)> = r.problems.iter().map(|p| (p.kind.as_str(), p.summary.as_str())).collect();
    assert_eq!(
        named,
        [
            ("skipped", "Prometheus http://prom:9090 skipped: answer past the budget"),
            ("no_matrix", "no agent's row read from Prometheus: no matrix to judge"),
        ]
    );
}

#[test]
fn a_histogram_text_or_header_past_a_mesh_histogram_is_refused() {
    let refused = |text: String| {
        let mut c = cell(2, Proto::Udp, &[5], 0);
        c.histogram = Some(text);
        MatrixBuilder::new("agents").add_report(&report(1, vec![c])).unwrap_err().to_string()
    };
    let why = |e: &str| format!("cell to 10.0.0.2:7878 (udp): {e}");
    // 64 KiB of text is read (here: zeros, not a histogram); a byte more is not
    assert_eq!(refused("A".repeat(64 << 10)), why("histogram: not an HdrHistogram V2 encoding"));
    assert_eq!(refused("A".repeat((64 << 10) + 1)), why("histogram text too long"));
    // 4 significant digits, or a range past twice the longest timeout, either alone
    let with = |high: u64, sigfig: u8| {
        let mut h = Histogram::<u64>::new_with_bounds(1, high, sigfig).unwrap();
        h.record(5).unwrap();
        crate::report::encode_histogram_plain(&h)
    };
    let wide = why("histogram: wider or finer than a mesh histogram");
    assert_eq!(refused(with(1_000, 4)), wide);
    assert_eq!(refused(with(2 * MAX_TIMEOUT_NS + 1, 3)), wide);
    let mut b = MatrixBuilder::new("agents");
    let mut c = cell(2, Proto::Udp, &[5], 0);
    c.histogram = Some(with(2 * MAX_TIMEOUT_NS, 3));
    b.add_report(&report(1, vec![c])).unwrap();
}

#[test]
fn a_summary_that_disagrees_is_refused() {
    let refused = |c: CellReport| MatrixBuilder::new("agents").add_report(&report(1, vec![c])).unwrap_err().to_string();
    let rtt = RttSummary { count: 3, min_ns: 5, p50_ns: 6, p99_ns: 7, max_ns: 7 };
    let base = CellReport { histogram: None, rtt: Some(rtt), ..cell(2, Proto::Udp, &[5, 6, 7], 0) };
    let summary = "cell to 10.0.0.2:7878 (udp): round-trip summary disagrees with itself or the counts";
    for bad in [
        RttSummary { count: 2, ..rtt },
        RttSummary { min_ns: 7, ..rtt },
        RttSummary { p50_ns: 8, ..rtt },
        RttSummary { p99_ns: 8, ..rtt },
        RttSummary { max_ns: 6, ..rtt },
    ] {
        assert_eq!(refused(CellReport { rtt: Some(bad), ..base.clone() }), summary, "{bad:?}");
    }
    MatrixBuilder::new("agents").add_report(&report(1, vec![base])).unwrap();
    // a histogram of as many samples whose figures are not the summary's
    let mut c = cell(2, Proto::Udp, &[5, 6, 7], 0);
    c.histogram = Some(encode_histogram(&histogram_of(&[5, 6, 9])));
    assert_eq!(refused(c), "cell to 10.0.0.2:7878 (udp): histogram disagrees with the counts");
}

#[test]
fn at_most_max_cells_per_report_and_a_budget_met_exactly_is_kept() {
    let many = |n: usize| report(1, (0..n).map(|_| cell(2, Proto::Udp, &[], 0)).collect());
    MatrixBuilder::new("agents").add_report(&many(MAX_CELLS)).unwrap();
    let e = MatrixBuilder::new("agents").add_report(&many(MAX_CELLS + 1)).unwrap_err().to_string();
    assert_eq!(e, format!("{} cells (at most {MAX_CELLS})", MAX_CELLS + 1));
    let row = report(1, vec![cell(2, Proto::Udp, &[100; 10], 0)]);
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&row).unwrap();
    let one = b.held();
    let mut b = MatrixBuilder::new("agents").with_budget(one);
    b.add_report(&row).unwrap();
    assert_eq!(b.held(), one);
    let mut b = MatrixBuilder::new("agents").with_budget(one - 1);
    assert_eq!(b.add_report(&row), Err(Refused::Budget { budget: one - 1, held: 0 }));
}

#[test]
fn zones_are_named_as_zones_and_the_window_is_kept() {
    // n1, n2 in zone a; n3, n4 in zone b: everything between a and b bad
    let zoned = |i: usize| NodeRef { zone: Some(if i <= 2 { "a" } else { "b" }.into()), ..node(i) };
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=4 {
        let cells = (1..=4)
            .filter(|&p| p != me)
            .map(|p| {
                let across = (me <= 2) != (p <= 2);
                let c = if across { cell(p, Proto::Udp, &[100; 5], 5) } else { cell(p, Proto::Udp, &[100; 10], 0) };
                CellReport { peer: zoned(p), ..c }
            })
            .collect();
        b.add_report(&MatrixReport { agent: zoned(me), ..report(me, cells) }).unwrap();
    }
    let r = b.finish(&Thresholds::default());
    assert_eq!(r.window_ns, Some(10_000_000_000));
    let named: Vec<(&str, &str, Vec<&str>)> = r
        .problems
        .iter()
        .map(|p| (p.kind.as_str(), p.summary.as_str(), p.zones.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(named, [("zone", "unicast zones a <-> b: paths between them bad", vec!["a", "b"])]);
    // and inside zone a only (n1 to n3: a zone of two is never judged within itself, as
    // without either node nothing is left of it)
    let zoned = |i: usize| NodeRef { zone: Some(if i <= 3 { "a" } else { "b" }.into()), ..node(i) };
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=5 {
        let cells = (1..=5)
            .filter(|&p| p != me)
            .map(|p| {
                let inside_a = me <= 3 && p <= 3;
                let c = if inside_a { cell(p, Proto::Udp, &[100; 5], 5) } else { cell(p, Proto::Udp, &[100; 10], 0) };
                CellReport { peer: zoned(p), ..c }
            })
            .collect();
        b.add_report(&MatrixReport { agent: zoned(me), ..report(me, cells) }).unwrap();
    }
    let r = b.finish(&Thresholds::default());
    let named: Vec<(&str, Vec<&str>)> =
        r.problems.iter().map(|p| (p.summary.as_str(), p.zones.iter().map(String::as_str).collect())).collect();
    assert_eq!(named, [("unicast zone a: paths inside it bad", vec!["a"])]);
}

#[test]
fn a_node_costs_its_address_twice_its_name_and_its_zone() {
    let me =
        NodeRef { addr: "10.0.0.1:7878".into(), name: Some("n1".into()), zone: Some("zone-a".into()), stamp: false };
    let mut b = MatrixBuilder::new("agents");
    b.node(&me);
    assert_eq!(b.held(), NODE_BYTES + 2 * "10.0.0.1:7878".len() + "n1".len() + "zone-a".len());
    b.node(&me);
    assert_eq!(b.held(), NODE_BYTES + 2 * "10.0.0.1:7878".len() + "n1".len() + "zone-a".len(), "once");
}

#[test]
fn a_name_matches_only_a_node_without_a_row_or_an_error() {
    // n1 gave its row; n2 is known only as its peer
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, vec![cell(2, Proto::Udp, &[100; 10], 0)])).unwrap();
    b.add_unreachable(None, "http://n1:9878/", "gone");
    b.add_unreachable(None, "http://n2:9878/", "first");
    b.add_unreachable(None, "http://n2:9999/", "second");
    let r = b.finish(&Thresholds::default());
    let got: Vec<(&str, Option<&str>)> = r.nodes.iter().map(|n| (n.label(), n.error.as_deref())).collect();
    assert_eq!(
        got,
        [("http://n1:9878/", Some("gone")), ("http://n2:9999/", Some("second")), ("n1", None), ("n2", Some("first")),]
    );
}

#[test]
fn an_agent_probing_the_most_peers_on_every_transport_is_kept() {
    // MAX_PEERS peers (10.0.x.y, distinct), each on udp, tcp and multicast, nothing heard:
    // the largest row a full peer list makes is not refused as too many cells.
    let peer = |i: usize| NodeRef::at(format!("10.0.{}.{}:7878", i / 250, 1 + i % 250));
    let cells: Vec<CellReport> = (0..crate::mesh::peer::MAX_PEERS)
        .flat_map(|i| Proto::ALL.map(|proto| CellReport { peer: peer(i), ..cell(0, proto, &[], 1) }))
        .collect();
    assert_eq!(cells.len(), MAX_CELLS);
    MatrixBuilder::new("agents").add_report(&report(1, cells)).unwrap();
}

#[test]
fn a_dead_node_is_named_down_on_multicast_too() {
    // As fleet(), on multicast: n4's agent is down and nobody hears it on the group.
    let mut b = node_4_unheard(4, &[Proto::Multicast]);
    b.add_unreachable(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", "connection refused");
    let r = b.finish(&Thresholds::default());
    assert_eq!(named(&r), ["multicast node n4: agent unreachable and column bad (3/3)"]);
}

#[test]
fn a_node_half_bad_counts_its_good_cells_too() {
    // Five agents; n5's cells to and from n1 and n2 are lossy, to and from n3 and n4 good:
    // its row and column are half bad, and the counts say of how many judged cells.
    let mut b = MatrixBuilder::new("agents");
    for me in 1..=5 {
        let cells = (1..=5)
            .filter(|&p| p != me)
            .map(|p| {
                let lossy = (me == 5 && p <= 2) || (p == 5 && me <= 2);
                if lossy { cell(p, Proto::Udp, &[100; 5], 5) } else { cell(p, Proto::Udp, &[100; 10], 0) }
            })
            .collect();
        b.add_report(&report(me, cells)).unwrap();
    }
    let r = b.finish(&Thresholds::default());
    assert_eq!(named(&r), ["unicast node n5: row and column bad (row 2/4, column 2/4)"]);
}

#[test]
fn a_dead_node_does_not_hide_another_unreachable_agent() {
    // n4 is dead (named down); n5's agent API is down but n5 answers every probe: its
    // agent is still named unreachable.
    let mut b = node_4_unheard(5, &[Proto::Udp]);
    b.add_unreachable(Some("10.0.0.4".parse().unwrap()), "http://10.0.0.4:9878", "connection refused");
    b.add_unreachable(Some("10.0.0.5".parse().unwrap()), "http://10.0.0.5:9878", "HTTP 503");
    let r = b.finish(&Thresholds::default());
    assert_eq!(
        named(&r),
        ["agent n5 unreachable: HTTP 503", "unicast node n4: agent unreachable and column bad (3/3)"]
    );
}

#[test]
fn several_nodes_at_the_address_take_a_name_only_among_them() {
    // Two rowless nodes on 127.0.0.1 and n5 elsewhere: an agent at 127.0.0.1 given as
    // http://n5/ is neither of the two nor n5 (at another address): it is listed by URL.
    let local = |p: u16| NodeRef { name: Some(format!("l{p}")), ..NodeRef::at(format!("127.0.0.1:{p}")) };
    let cells = vec![
        CellReport { peer: local(2), ..cell(0, Proto::Udp, &[100], 0) },
        CellReport { peer: local(3), ..cell(0, Proto::Udp, &[100], 0) },
        cell(5, Proto::Udp, &[100], 0),
    ];
    let mut b = MatrixBuilder::new("agents");
    b.add_report(&report(1, cells)).unwrap();
    b.add_unreachable(Some("127.0.0.1".parse().unwrap()), "http://n5:9878/", "refused");
    let r = b.finish(&Thresholds::default());
    let errors: Vec<(&str, Option<&str>)> = r.nodes.iter().map(|n| (n.label(), n.error.as_deref())).collect();
    assert_eq!(errors, [("http://n5:9878/", Some("refused")), ("l2", None), ("l3", None), ("n1", None), ("n5", None)]);
}

#[test]
fn a_node_that_gave_an_empty_row_is_not_named_down() {
    // n4's agent answers with no cells yet while nobody reaches n4, on unicast and on
    // multicast: its agent is not unreachable, so n4 is no dead node, and its empty row
    // is no bad row: each cell to it is a bad path.
    let mut b = node_4_unheard(4, &[Proto::Udp, Proto::Multicast]);
    b.add_report(&MatrixReport { window: None, ..report(4, Vec::new()) }).unwrap();
    let r = b.finish(&Thresholds::default());
    assert!(r.problems.iter().all(|p| !p.down), "{:?}", r.problems);
    let want: Vec<String> = ["unicast", "multicast"]
        .iter()
        .flat_map(|scope| (1..=3).map(move |s| format!("{scope} path n{s} -> n4")))
        .collect();
    assert_eq!(named(&r), want);
}
