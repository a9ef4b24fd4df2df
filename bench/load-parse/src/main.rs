//! What parsing a load message costs: the hand scanner `load/msg.rs` once had
//! (copied here as it was at c350fc6) against `wirebench_core::load::msg`, and the room's
//! byte match for `"req":true` against its serde check; ns per call, the median of 15 rounds
//! of 200,000. Not a workspace member (like fuzz/); run alone:
//!
//!     cd bench/load-parse && flock /tmp/bench.lock cargo run --release
use std::hint::black_box;
use std::time::Instant;
use wirebench_core::load::msg::{self, DEFAULT_TEMPLATE, Fields, Template};

fn find(b: &[u8], key: &[u8]) -> Option<usize> {
    b.windows(key.len()).position(|w| w == key).map(|i| i + key.len())
}
fn number_after(b: &[u8], key: &[u8]) -> Option<u64> {
    let at = find(b, key)?;
    let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 20 {
        return None;
    }
    b[at..at + digits].iter().try_fold(0u64, |v, &c| v.checked_mul(10)?.checked_add(u64::from(c - b'0')))
}
fn string_after<'a>(b: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = find(b, key)?;
    let len = b[at..].iter().position(|&c| c == b'"')?;
    std::str::from_utf8(&b[at..at + len]).ok()
}
fn old_parse(b: &[u8]) -> Option<(&str, u64, u64, Option<u64>)> {
    let kind = string_after(b, b"\"type\":\"")?;
    let ts = number_after(b, b"\"ts\":")?;
    Some((kind, number_after(b, b"\"sender\":").unwrap_or(u64::MAX), ts, number_after(b, b"\"it\":")))
}
fn old_is_request(b: &[u8]) -> bool {
    b.windows(10).any(|w| w == b"\"req\":true")
}

fn time(name: &str, n: u32, mut f: impl FnMut()) {
    let mut rounds: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    println!("{name:<28} {:>8.1} ns", rounds[7]);
}

fn main() {
    let t = Template::parse(DEFAULT_TEMPLATE).unwrap();
    let mut s = String::new();
    for size in [128usize, 1024] {
        t.render(
            &Fields {
                kind: "cursor",
                req: false,
                sender: 1234,
                room: 246,
                seq: 77,
                ts_us: 1_732_280_000_123_456,
                it_us: 1_732_280_000_123_400,
            },
            size,
            &mut s,
        );
        let b = s.as_bytes().to_vec();
        println!("message of {} bytes", b.len());
        time("load receive, old hand scan", 200_000, || {
            black_box(old_parse(black_box(&b)));
        });
        time("load receive, serde scan", 200_000, || {
            black_box(msg::parse(black_box(&b)));
        });
        time("room request, old bytes", 200_000, || {
            black_box(old_is_request(black_box(&b)));
        });
        time("room request, serde", 200_000, || {
            black_box(msg::is_request(black_box(&b)));
        });
    }
}
