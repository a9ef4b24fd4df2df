//! Shared helpers: an in-process serve, in-process CLI runs, and the report schema.

use std::path::PathBuf;

use wirebench::Shutdown;
use wirebench::serve::{self, Server};

/// A serve on 127.0.0.1 with an ephemeral port; stopped (and its counters returned) by
/// `stop`, or on drop.
pub(crate) fn serve() -> Server {
    Server::start(&serve::Config::loopback(), Shutdown::new()).expect("serve starts on loopback")
}

/// What an in-process CLI run printed and returned.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: u8,
    pub(crate) out: String,
    pub(crate) err: String,
}

/// Runs `wirebench ARGS...` in-process.
pub(crate) fn wirebench(args: &[&str]) -> Run {
    wirebench_with(args, Shutdown::new())
}

/// Same, with a stop signal the test controls.
pub(crate) fn wirebench_with(args: &[&str], shutdown: Shutdown) -> Run {
    let argv = std::iter::once("wirebench").chain(args.iter().copied()).map(str::to_owned).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = wirebench::main_with(argv, shutdown, &mut out, &mut err);
    Run { code, out: String::from_utf8_lossy(&out).into_owned(), err: String::from_utf8_lossy(&err).into_owned() }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Validates `report` against docs/schema/report-v1.json.
pub(crate) fn assert_valid_report(report: &serde_json::Value) {
    let path = repo_root().join("docs/schema/report-v1.json");
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    let idx = compiler.compile(path.to_str().expect("utf-8 path"), &mut schemas).expect("the schema compiles");
    if let Err(e) = schemas.validate(report, idx) {
        panic!("report does not match the schema: {e:#}");
    }
}

/// Reads and parses a JSON file.
pub(crate) fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file exists")).expect("valid JSON")
}
