//! The binary's error classes: a `UsageError` (exit 2) is bad input the user can fix by
//! changing the command; everything else is a runtime failure (exit 1).

/// Bad input: a one-line message naming the problem; exits 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The process exit code for a run's error.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() { 2 } else { 1 }
}
