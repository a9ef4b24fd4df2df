//! Writing result files.
//!
//! - A regular file, or a path that does not exist yet, is written atomically: a temporary
//!   file in the same folder, then a rename, so a reader never sees half a report and a
//!   crash never leaves one. A symbolic link is followed (the link stays, its target is
//!   replaced).
//! - Anything else that exists (`/dev/null`, `/dev/full`, a FIFO, a terminal) is written
//!   directly: a rename would replace the device node with a regular file (as root, that
//!   destroys `/dev/null` for the whole host).
//! - `-` is standard output: the command's text then goes to standard error (iperf3's `-J`
//!   users pipe the JSON on). [`Capture`] collects it while the command runs.
//!
//! No folder is ever created here: a missing folder is bad input (exit 2), found by
//! [`check`] before a run starts. SIGINT, SIGTERM and SIGHUP only set the stop flag
//! (`shutdown`), so a write in progress finishes and removes its temporary file.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wirebench_core::report::Report;

use crate::error::UsageError;

/// The output path that means standard output.
pub const STDOUT: &str = "-";

/// Is `path` the standard output (`-`)?
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == STDOUT
}

thread_local! {
    static CAPTURED: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// While alive, files written to `-` on this thread are kept (the last write wins, as a
/// rewritten file would) instead of going to the process's standard output; `take` hands
/// them over. `main_with` installs one so in-process runs and the binary behave the same.
#[derive(Debug)]
pub struct Capture(());

impl Capture {
    /// Starts capturing on this thread.
    pub fn install() -> Self {
        CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
        Self(())
    }

    /// What was written to `-`, and stops capturing.
    pub fn take(self) -> Vec<u8> {
        CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        CAPTURED.with(|c| c.borrow_mut().take());
    }
}

/// Where a write goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Standard output.
    Stdout,
    /// An existing non-regular file (device, FIFO, socket): opened and written in place.
    Direct(PathBuf),
    /// A regular file (symlinks resolved) or a new path: temporary file, then rename.
    Atomic(PathBuf),
}

fn no_folder(dir: &Path) -> io::Error {
    io::Error::new(ErrorKind::NotFound, format!("no such folder {} (wirebench creates none)", dir.display()))
}

fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn target(path: &Path) -> io::Result<Target> {
    if is_stdout(path) {
        return Ok(Target::Stdout);
    }
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(io::Error::new(ErrorKind::IsADirectory, "is a folder")),
        Ok(m) if m.is_file() => Ok(Target::Atomic(fs::canonicalize(path)?)),
        Ok(_) => Ok(Target::Direct(path.to_path_buf())),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let dir = parent(path);
            if fs::symlink_metadata(path).is_ok() {
                return Err(io::Error::new(ErrorKind::NotFound, "a symbolic link to nothing"));
            }
            if !dir.is_dir() {
                return Err(no_folder(dir));
            }
            Ok(Target::Atomic(path.to_path_buf()))
        }
        Err(e) => Err(e),
    }
}

/// Errors that a different path fixes: bad input (exit 2), not a runtime failure.
fn is_usage(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::IsADirectory
            | ErrorKind::NotADirectory
            | ErrorKind::ReadOnlyFilesystem
    )
}

fn wrap(path: &Path, e: io::Error) -> anyhow::Error {
    let msg = format!("cannot write {}: {e}", path.display());
    if is_usage(&e) { UsageError(msg).into() } else { anyhow::Error::from(e).context(msg) }
}

/// Opens a device or FIFO for writing without blocking (a FIFO with no reader yet is fine).
fn can_open(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    match OpenOptions::new().write(true).custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits()).open(path) {
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENXIO as i32) => Ok(()),
        r => r.map(drop),
    }
}

/// Makes and removes the temporary file an atomic write of `path` would make.
fn can_create_beside(path: &Path) -> io::Result<()> {
    let tmp = temporary(path);
    OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    fs::remove_file(&tmp)
}

/// Checks, before a run, that `path` can be written (by trying what the write will do):
/// `-`, an existing device or FIFO that opens for writing, or a regular file or new name in
/// an existing folder where a file can be made. `flag` names it in the message.
pub fn check(flag: &str, path: &Path) -> Result<(), UsageError> {
    let found = target(path).and_then(|t| match t {
        Target::Stdout => Ok(()),
        Target::Direct(p) => can_open(&p),
        Target::Atomic(p) => can_create_beside(&p),
    });
    found.map_err(|e| UsageError(format!("{flag} {}: cannot write there: {e}", path.display())))
}

/// A name for the temporary file next to `path` that no other writer (thread or process)
/// picks.
fn temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    parent(path).join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

fn atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let tmp = temporary(path);
    let result = (|| {
        let file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Ok(m) = fs::metadata(path) {
            // Replacing a file keeps its permissions (a 0600 report stays private).
            file.set_permissions(m.permissions())?;
        }
        let mut w = BufWriter::new(file);
        fill(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn direct(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    // No truncate and no create: the file exists and is not a regular file.
    let mut w = BufWriter::new(OpenOptions::new().write(true).open(path)?);
    fill(&mut w)?;
    w.flush()
}

fn stdout(fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut buf = Vec::new();
    fill(&mut buf)?;
    let kept = CAPTURED.with(|c| c.borrow_mut().as_mut().map(|v| *v = std::mem::take(&mut buf)).is_some());
    if kept {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()
}

/// Writes what `fill` produces to `path`: atomically for a regular file or a new path,
/// directly for a device or FIFO, to standard output for `-`.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let result = target(path).and_then(|t| match t {
        Target::Stdout => stdout(fill),
        Target::Direct(p) => direct(&p, fill),
        Target::Atomic(p) => atomic(&p, fill),
    });
    result.map_err(|e| wrap(path, e))
}

/// Writes `report` as pretty JSON to `path` (see [`write_atomic`]).
pub fn write_json(path: &Path, report: &Report) -> anyhow::Result<()> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, report).map_err(io::Error::other)?;
        w.write_all(b"\n")
    })
}

/// Opens `path` for a file written as a run goes (a TSV log): created or truncated when it
/// is a regular file or new, opened in place when it is a device or FIFO. No folder is
/// created.
pub fn create(path: &Path) -> anyhow::Result<File> {
    let open = target(path).and_then(|t| match t {
        Target::Stdout => Err(io::Error::new(ErrorKind::Unsupported, "a log cannot go to standard output")),
        Target::Direct(p) => OpenOptions::new().write(true).open(p),
        Target::Atomic(p) => File::create(p),
    });
    open.map_err(|e| wrap(path, e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};

    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_whole_files_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_atomic(&p, |w| w.write_all(b"one")).unwrap();
        write_atomic(&p, |w| w.write_all(b"two")).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let failed = write_atomic(&p, |_| Err(io::Error::other("boom")));
        assert!(failed.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "two", "a failed write keeps the old file");
        assert_eq!(names(dir.path()), ["r.json"]);
    }

    #[test]
    fn creates_no_folder_and_says_so_as_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/r.json");
        let e = write_atomic(&p, |w| w.write_all(b"x")).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some(), "exit 2: {e:#}");
        assert!(e.to_string().contains("no such folder"), "{e}");
        assert!(!dir.path().join("sub").exists(), "no folder was made");
        assert!(check("--json", &p).unwrap_err().0.contains("no such folder"));
        assert!(check("--json", dir.path()).unwrap_err().0.contains("is a folder"));
        assert_eq!(check("--json", &dir.path().join("new.json")), Ok(()));
        assert_eq!(check("--json", Path::new("-")), Ok(()));
    }

    /// Copies of /dev/null (1:3) and /dev/full (1:7) made in a temporary folder (root), so
    /// the code before the fix, which renamed a regular file over them, cannot harm the host.
    #[test]
    fn devices_are_written_in_place_not_replaced() {
        use nix::sys::stat::{Mode, SFlag, makedev, mknod};
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (null, full) = (dir.path().join("null"), dir.path().join("full"));
        let mode = Mode::from_bits_truncate(0o666);
        if mknod(&null, SFlag::S_IFCHR, mode, makedev(1, 3)).is_err() {
            eprintln!("skipped: mknod needs root");
            return;
        }
        mknod(&full, SFlag::S_IFCHR, mode, makedev(1, 7)).unwrap();
        let before = fs::metadata(&null).unwrap().ino();
        write_atomic(&null, |w| w.write_all(b"{}\n")).unwrap();
        let after = fs::metadata(&null).unwrap();
        assert!(after.file_type().is_char_device(), "still a device");
        assert_eq!(after.ino(), before, "the same node");
        // /dev/full takes the open and refuses the bytes: a runtime failure, and still a device.
        let e = write_atomic(&full, |w| w.write_all(&vec![b'x'; 100_000])).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_none(), "disk full is not bad input: {e:#}");
        assert!(fs::metadata(&full).unwrap().file_type().is_char_device());
        assert_eq!(names(dir.path()), ["full", "null"], "no temporary left");
    }

    #[test]
    fn a_fifo_gets_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
        };
        write_atomic(&fifo, |w| w.write_all(b"through the pipe")).unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");
        assert_eq!(names(dir.path()), ["pipe"]);
    }

    #[test]
    fn a_symlink_stays_and_its_target_is_replaced_keeping_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.json");
        symlink(&real, &link).unwrap();
        write_atomic(&link, |w| w.write_all(b"new")).unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(names(dir.path()), ["link.json", "real.json"]);
    }

    #[test]
    fn stdout_is_captured_on_this_thread_and_the_last_write_wins() {
        let c = Capture::install();
        write_atomic(Path::new("-"), |w| w.write_all(b"first")).unwrap();
        write_atomic(Path::new("-"), |w| w.write_all(b"second")).unwrap();
        assert_eq!(c.take(), b"second");
    }
}
