//! `serde_json::from_str::<Report>` (how saved reports are loaded) on arbitrary UTF-8: it must
//! never panic, and whatever it accepts must serialise and load back to the same report.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wirebench_core::report::Report;

fuzz_target!(|data: &[u8]| {
    // Only valid UTF-8: the loader reads the file into a String first.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(report) = serde_json::from_str::<Report>(text) else {
        return;
    };
    let json = serde_json::to_string(&report).expect("a loaded report serialises");
    let back = serde_json::from_str::<Report>(&json).expect("a written report loads");
    let (a, b) = (serde_json::to_value(&report).unwrap(), serde_json::to_value(&back).unwrap());
    assert!(same(&a, &b), "write then load changed the report:\n{a}\n{b}");
});

/// Equality, except that floats may differ by a few ulps: serde_json's default float parser
/// is best-effort (exact round trips need its `float_roundtrip` feature, which wirebench
/// does not enable), and that is not what this target looks for.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 4.0 * f64::EPSILON
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        _ => a == b,
    }
}
