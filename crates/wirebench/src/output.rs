//! Writing result files: atomically (a temporary file in the same folder, then a rename),
//! so a reader never sees half a report and a crash never leaves one.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::Context as _;
use wirebench_core::report::Report;

/// Writes what `fill` produces to `path`, atomically.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        fill(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `report` as pretty JSON to `path`, atomically.
pub fn write_json(path: &Path, report: &Report) -> anyhow::Result<()> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, report).map_err(io::Error::other)?;
        w.write_all(b"\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_files_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/r.json");
        write_atomic(&p, |w| w.write_all(b"one")).unwrap();
        write_atomic(&p, |w| w.write_all(b"two")).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let failed = write_atomic(&p, |_| Err(io::Error::other("boom")));
        assert!(failed.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "two", "a failed write keeps the old file");
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }
}
