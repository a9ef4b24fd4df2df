//! Records the git commit this binary is built from (`WIREBENCH_GIT_COMMIT`), so reports
//! say which code measured them. Outside a git checkout (a crate tarball, no git installed)
//! nothing is set and the build goes on.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    // Without git's answer (no checkout, or git failed once on a busy machine) nothing is
    // printed, so cargo's default applies: this script runs again when any file of the
    // package changes, instead of keeping an empty commit until build.rs itself changes.
    let Some(commit) = git(&["rev-parse", "HEAD"]) else { return };
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=WIREBENCH_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it names (a commit) and
    // packed-refs. In a worktree HEAD lives in its own git dir, the branches in the common one.
    // A missing file would make cargo rerun this script (and rebuild the crate) every time,
    // so only existing files are named.
    let mut watch = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch.push(abs(&dir).join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        watch.push(abs(&common).join("packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(abs(&common).join(branch));
        }
    }
    for path in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn abs(dir: &str) -> PathBuf {
    let p = PathBuf::from(dir);
    if p.is_absolute() { p } else { PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p) }
}
