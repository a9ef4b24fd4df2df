//! Reading saved reports, with a one-line error naming the file and the problem (not JSON,
//! not a report, a newer schema, a histogram that does not decode). Text reads one file at a
//! time; what needs every report at once (merge, compare, HTML) reads at most
//! [`MAX_HELD_BYTES`] of files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use wirebench_core::report::{ReadError, Report, read_report, read_report_until};
use wirebench_core::units::ByteSize;

use crate::error::UsageError;
use crate::shutdown::Shutdown;

/// A report and the name it is shown under.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file's stem (`ping-udp`), or its path when two files share a stem.
    pub name: String,
    /// The report.
    pub report: Report,
}

/// Parses the text of a saved report; `name` is for the messages.
pub fn parse(name: &str, text: &str) -> Result<Report, UsageError> {
    read_report(|| Ok(text.as_bytes())).map_err(|e| UsageError(format!("{name}: {e}")))
}

/// Opens a saved report: only a regular file. Opened without blocking, so a FIFO with no
/// writer (which would hold `open` until one came, deaf to Ctrl-C) or a device is refused
/// at once; a regular file reads the same with or without `O_NONBLOCK`.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a pipe, device or directory): save the report to a file first",
        ));
    }
    Ok(f)
}

/// Reads one file, streamed and within the limits of `wirebench_core::report::read`; Ctrl-C
/// ends it at the next read of its bytes or the next histogram (a stop, exit 1; a bad file
/// is bad input, exit 2).
fn read(path: &Path, shutdown: &Shutdown) -> anyhow::Result<Report> {
    let shown = path.display();
    read_report_until(|| open_regular(path), shutdown.flag()).map_err(|e| match e {
        ReadError::Stopped => anyhow::anyhow!("{shown}: stopped by Ctrl-C while reading"),
        ReadError::Io(io) => UsageError(format!("cannot read {shown}: {io}")).into(),
        e => UsageError(format!("{shown}: {e}")).into(),
    })
}

/// The most bytes of files read into memory together (merge, compare, HTML): four reports
/// at the reader's own limit. A loaded report takes about 1.5 times its file's size.
pub const MAX_HELD_BYTES: u64 = 256 << 20;

/// Loads every file, in order, all held at once (at most [`MAX_HELD_BYTES`] of files); the
/// first bad one is the error. Ctrl-C between files stops.
pub fn load(files: &[PathBuf], shutdown: &Shutdown) -> anyhow::Result<Vec<Loaded>> {
    let total = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).fold(0, u64::saturating_add);
    if total > MAX_HELD_BYTES {
        return Err(UsageError(format!(
            "the reports are {} MiB together, over the {} read at once to merge, compare or draw them: give fewer",
            total.div_ceil(1 << 20),
            ByteSize(MAX_HELD_BYTES)
        ))
        .into());
    }
    let mut out = Vec::with_capacity(files.len());
    load_each(files, shutdown, |l| {
        out.push(l);
        Ok(())
    })?;
    Ok(out)
}

/// Loads the files one at a time, in order, handing each to `each` before the next is read;
/// the first bad one is the error. Ctrl-C between files stops.
pub fn load_each(
    files: &[PathBuf],
    shutdown: &Shutdown,
    mut each: impl FnMut(Loaded) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let stem =
        |p: &PathBuf| p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for f in files {
        *seen.entry(stem(f)).or_default() += 1;
    }
    for f in files {
        if shutdown.is_set() {
            anyhow::bail!("stopped by Ctrl-C while reading the reports");
        }
        let report = read(f, shutdown)?;
        let name = if seen[&stem(f)] > 1 { f.display().to_string() } else { stem(f) };
        each(Loaded { name, report })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO with no writer used to hang `report` in `open`, deaf to Ctrl-C.
    #[test]
    fn a_fifo_or_a_directory_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("r.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
        for p in [fifo.as_path(), dir.path()] {
            let t = std::time::Instant::now();
            let e = read(p, &Shutdown::new()).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
            assert!(t.elapsed() < std::time::Duration::from_secs(1));
        }
    }

    #[test]
    fn bad_input_is_one_line_naming_the_file() {
        let cases = [
            ("{", "f.json: not JSON (EOF while parsing an object at line 1 column 1)"),
            ("[1, 2]", "f.json: not a wirebench report (no schema_version)"),
            (r#"{"hello": 1}"#, "f.json: not a wirebench report (no schema_version)"),
            (
                r#"{"schema_version": 2}"#,
                "f.json: schema_version 2 is newer than this wirebench reads (1): use a newer wirebench",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse("f.json", text).unwrap_err().0, want);
        }
        let e = parse("f.json", r#"{"schema_version": 1, "meta": {}}"#).unwrap_err().0;
        assert!(e.starts_with("f.json: not a wirebench report (missing field"), "{e}");
        assert!(!e.contains('\n'));
    }

    /// A stop while a file loads is a stop (exit 1), not bad input (exit 2).
    #[test]
    fn ctrl_c_while_reading_is_a_stop_not_bad_input() {
        let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/report_json/report-ping-full.json");
        let stop = Shutdown::new();
        assert!(read(Path::new(seed), &stop).is_ok());
        stop.trigger();
        let e = read(Path::new(seed), &stop).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_none(), "{e}");
        assert!(e.to_string().ends_with("report-ping-full.json: stopped by Ctrl-C while reading"), "{e}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = load(&[PathBuf::from("/nonexistent/r.json")], &Shutdown::new()).unwrap_err().to_string();
        assert!(e.starts_with("cannot read /nonexistent/r.json: "), "{e}");
    }
}
