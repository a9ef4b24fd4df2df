//! The run context every command gets from `lib.rs` (the stop signal, the command line,
//! where to print), and the randomness runs draw from the OS: session ids, nonces, secrets.

use std::io::Write;

use crate::shutdown::Shutdown;

/// What every mode gets: the stop signal, the command line (for the report) and where to
/// print.
pub struct Ctx<'a> {
    /// Set by Ctrl-C.
    pub shutdown: Shutdown,
    /// The full command line.
    pub argv: Vec<String>,
    /// Terminal output.
    pub out: &'a mut dyn Write,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("argv", &self.argv).finish_non_exhaustive()
    }
}

/// A run's session id, which nobody else will pick: 64 bits from the OS RNG (`getrandom`).
pub(crate) fn session_id() -> u64 {
    u64::from_be_bytes(os_random().unwrap_or_else(|_| {
        // No OS RNG (a sandbox without getrandom(2) or /dev/urandom): time and pid, which
        // still keep concurrent runs apart; nothing secret depends on a session id.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        #[expect(clippy::cast_possible_truncation, reason = "mixing bits")]
        let x = (t as u64) ^ (u64::from(std::process::id()) << 40);
        x.to_be_bytes()
    }))
}

/// `N` bytes from the OS RNG, for nonces, session secrets and seeds.
pub(crate) fn os_random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(format!("the OS random generator failed: {e}")))?;
    Ok(b)
}
