//! `/metrics` on loopback in its three formats: Prometheus text 0.0.4 when the scraper states
//! no preference, OpenMetrics and protobuf when asked; the same series in each; in protobuf,
//! per-peer native histograms holding each cell's round trips, bucket by bucket.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{MetricFamily, MetricType};
use prost::Message as _;
use wirebench::mesh::metrics::WINDOW_RTT;
use wirebench_core::mesh::native;
use wirebench_core::report::decode_histogram;

use crate::mesh::{Fleet, wait_for};

const PROTOBUF: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";

/// `GET /metrics` with an `Accept` header: (content type, body).
fn scrape(addr: SocketAddr, accept: Option<&str>) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("agent HTTP answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept.map_or_else(String::new, |a| format!("Accept: {a}\r\n"));
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{accept}\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let kind = head
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.trim().to_owned())
        })
        .expect("a content type");
    (kind, raw[end..].to_vec())
}

/// A text exposition's series: the sample lines without their values.
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').expect("name and value").0.to_owned())
        .collect()
}

/// The names a text exposition declares in its `# TYPE` lines.
fn declared(text: &str) -> BTreeSet<String> {
    text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next().map(str::to_owned)).collect()
}

#[test]
fn metrics_answer_in_the_format_asked_for_with_the_same_series_and_native_histograms_in_protobuf() {
    let fleet = Fleet::start(2, &[]);
    fleet.wait_full(1);
    let addr = fleet.agent(0).http_addr();
    // All three scrapes inside one window, so they show the same cells.
    let (m, text, om, pb) = wait_for(Duration::from_secs(20), "three scrapes inside one window", || {
        let m1 = fleet.matrix(0);
        let text = scrape(addr, None);
        let om = scrape(addr, Some("application/openmetrics-text; version=1.0.0"));
        let pb = scrape(addr, Some(PROTOBUF));
        (fleet.matrix(0) == m1).then_some((m1, text, om, pb))
    });

    assert_eq!(text.0, "text/plain; version=0.0.4; charset=utf-8");
    assert_eq!(om.0, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(pb.0.starts_with("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily"), "{}", pb.0);
    let (text, om) = (String::from_utf8(text.1).unwrap(), String::from_utf8(om.1).unwrap());
    assert!(om.ends_with("# EOF\n") && !text.contains("# EOF"), "{text}");
    // 0.0.4 has no info type and declares counters by their samples' names.
    assert!(text.contains("# TYPE wirebench_mesh_agent_info gauge\n"), "{text}");
    assert!(text.contains("# TYPE wirebench_mesh_peer_probes_sent_total counter\n"), "{text}");
    assert!(om.contains("# TYPE wirebench_mesh_agent info\n"), "{om}");
    assert_eq!(series(&text), series(&om), "the same series in both text formats");
    assert!(!text.contains(WINDOW_RTT), "the native histograms are protobuf's alone: {text}");

    // Protobuf: every family the text declares, plus the native histograms.
    let mut families = Vec::new();
    let mut buf = pb.1.as_slice();
    while !buf.is_empty() {
        families.push(MetricFamily::decode_length_delimited(&mut buf).expect("delimited MetricFamily"));
    }
    let names: BTreeSet<String> = families.iter().map(|f| f.name.clone()).collect();
    let mut want = declared(&text);
    want.insert(WINDOW_RTT.to_owned());
    assert_eq!(names, want);
    for f in families.iter().filter(|f| f.name != WINDOW_RTT && f.r#type != MetricType::Histogram as i32) {
        let in_text = series(&text).iter().filter(|s| s.split('{').next() == Some(f.name.as_str())).count();
        assert_eq!(f.metric.len(), in_text, "{}: one metric per text series", f.name);
    }

    // One native histogram per answered cell, holding exactly its round trips.
    let rtt = families.iter().find(|f| f.name == WINDOW_RTT).unwrap();
    assert_eq!(rtt.r#type, MetricType::GaugeHistogram as i32, "a window is not a running total");
    let answered: Vec<_> = m.cells.iter().filter(|c| c.histogram.is_some()).collect();
    assert_eq!(rtt.metric.len(), answered.len());
    assert_eq!(answered.len(), 2, "udp and tcp to the one peer");
    for c in answered {
        let label = |k: &str, mm: &&prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::Metric| {
            mm.label.iter().find(|l| l.name == k).map(|l| l.value.clone())
        };
        let metric = rtt
            .metric
            .iter()
            .find(|mm| {
                label("peer", mm).as_deref() == Some(c.peer.addr.as_str())
                    && label("proto", mm).as_deref() == Some(c.proto.name())
            })
            .expect("a histogram per cell");
        let h = metric.histogram.as_ref().unwrap();
        let hdr = decode_histogram(c.histogram.as_deref().unwrap()).unwrap();
        assert_eq!(h.sample_count, c.rtt.unwrap().count);
        assert_eq!(h.sample_count, hdr.len());
        assert_eq!(h.schema, i32::from(native::SCHEMA));
        assert!(h.negative_span.is_empty() && h.zero_count == 0, "round trips are positive");
        // Rebuild (index, count) from the spans and deltas.
        let mut buckets = Vec::new();
        let (mut index, mut count, mut deltas) = (0_i32, 0_i64, h.positive_delta.iter());
        for (k, span) in h.positive_span.iter().enumerate() {
            index += span.offset + i32::from(k > 0);
            for j in 0..span.length {
                count += deltas.next().expect("a delta per bucket");
                buckets.push((index + i32::try_from(j).unwrap(), u64::try_from(count).unwrap()));
            }
            index += i32::try_from(span.length).unwrap() - 1;
        }
        assert!(deltas.next().is_none());
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), h.sample_count, "counts preserved");
        // Each round trip in the bucket of its value, checked against the bounds.
        for v in hdr.iter_recorded() {
            let s = v.value_iterated_to() as f64 / 1e9;
            let (i, _) = buckets
                .iter()
                .find(|&&(i, _)| {
                    let (lo, hi) = native::bucket_bounds(native::SCHEMA, i);
                    lo < s && s <= hi
                })
                .unwrap_or_else(|| panic!("{s} s in no bucket of {buckets:?}"));
            assert!(buckets.iter().any(|b| b.0 == *i));
        }
        // The classic buckets beside them: cumulative, ending at the count.
        assert!(h.bucket.last().unwrap().upper_bound.is_infinite());
        assert_eq!(h.bucket.last().unwrap().cumulative_count, h.sample_count);
        assert!(h.bucket.windows(2).all(|w| w[0].cumulative_count <= w[1].cumulative_count));
        assert!((h.sample_sum / h.sample_count as f64 - hdr.mean() / 1e9).abs() < 1e-12);
    }
}
