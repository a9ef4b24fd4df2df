//! The shared secret, one flag group for every command that gives or takes it (serve, stream,
//! mesh agent and status, relay), read and judged in one place. `wirebench token` makes a
//! good one.

use std::path::PathBuf;

use wirebench_core::auth::{MAX_SALT, MIN_TOKEN_BITS, token_bits};

use crate::error::UsageError;

/// `--token`, `--token-file`, `--weak-token`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TokenArgs {
    /// Shared secret (make one with `wirebench token`); never sent: each side proves it
    /// knows it with an HMAC keyed by a PBKDF2 derivation of it.
    #[arg(long, env = "WIREBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the token from this file (its first line) instead.
    #[arg(long, env = "WIREBENCH_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Take a token of under 128 bits of estimated entropy (a test lab).
    #[arg(long)]
    pub weak_token: bool,
}

impl TokenArgs {
    /// The token given, if any: one of `--token` and `--token-file`, 1 to 4,096 printable
    /// characters, and strong enough unless `--weak-token`.
    pub fn read(&self) -> Result<Option<String>, UsageError> {
        let t = read(self.token.as_ref(), self.token_file.as_ref())?;
        if let Some(t) = &t {
            strong_enough(t, self.weak_token)?;
        }
        Ok(t)
    }
}

/// One of `--token` and `--token-file` (its first line), 1 to 4,096 printable characters; no
/// judgement of its strength (`mesh status` also passes a token made elsewhere to Prometheus).
pub fn read(token: Option<&String>, file: Option<&PathBuf>) -> Result<Option<String>, UsageError> {
    let t = match (token, file) {
        (Some(_), Some(_)) => return Err(UsageError("give --token or --token-file, not both".into())),
        (Some(t), None) => t.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map_err(|e| UsageError(format!("--token-file {}: {e}", f.display())))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        (None, None) => return Ok(None),
    };
    if t.is_empty() {
        return Err(UsageError("--token is empty".into()));
    }
    if t.len() > 4096 || t.chars().any(char::is_control) {
        return Err(UsageError("the token must be 1 to 4096 printable characters".into()));
    }
    Ok(Some(t))
}

/// `--token-salt`: what the key of the token is derived with, so that a key (and a tag made
/// with it) learnt from one deployment is no use against another with the same token.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SaltArg {
    /// Salt of the token's key derivation [default: wirebench]; every member of one fleet or
    /// relay group gives the same one. Stream clients take serve's from its challenge.
    #[arg(long, env = "WIREBENCH_TOKEN_SALT", value_name = "SALT")]
    pub token_salt: Option<String>,
}

impl SaltArg {
    /// The salt: 1 to [`MAX_SALT`] printable ASCII characters, the default when none given.
    pub fn read(&self) -> Result<String, UsageError> {
        let Some(s) = &self.token_salt else { return Ok(wirebench_core::auth::DEFAULT_SALT.to_owned()) };
        if s.is_empty() || s.len() > MAX_SALT || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(UsageError(format!("--token-salt must be 1 to {MAX_SALT} printable ASCII characters")));
        }
        Ok(s.clone())
    }
}

/// Refuses a token a guesser could find (under [`MIN_TOKEN_BITS`] bits of estimated entropy)
/// unless `weak` (`--weak-token`).
fn strong_enough(token: &str, weak: bool) -> Result<(), UsageError> {
    let bits = token_bits(token);
    if weak || bits >= MIN_TOKEN_BITS {
        return Ok(());
    }
    Err(UsageError(format!(
        "the token has about {bits:.0} bits of entropy, under {MIN_TOKEN_BITS:.0}: make one with `wirebench token`, \
         or give --weak-token"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(token: Option<&str>, file: Option<PathBuf>, weak: bool) -> TokenArgs {
        TokenArgs { token: token.map(str::to_owned), token_file: file, weak_token: weak }
    }

    #[test]
    fn weak_empty_doubled_and_unprintable_tokens_are_refused() {
        let e = args(Some("hunter2"), None, false).read().unwrap_err().0;
        assert!(e.contains("bits of entropy, under 128") && e.contains("wirebench token"), "{e}");
        assert_eq!(args(Some("hunter2"), None, true).read().unwrap().as_deref(), Some("hunter2"));
        assert!(args(Some(""), None, true).read().unwrap_err().0.contains("empty"));
        assert!(args(Some("a\u{7}b"), None, true).read().unwrap_err().0.contains("printable"));
        assert!(args(Some("x"), Some("/etc/hostname".into()), true).read().unwrap_err().0.contains("not both"));
        assert_eq!(args(None, None, false).read().unwrap(), None);
    }

    #[test]
    fn a_token_file_gives_its_first_line() {
        let dir = std::env::temp_dir().join(format!("wirebench-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("token");
        std::fs::write(&f, "s3cret-line\r\nsecond\n").unwrap();
        assert_eq!(args(None, Some(f.clone()), true).read().unwrap().as_deref(), Some("s3cret-line"));
        std::fs::write(&f, "\n").unwrap();
        assert!(args(None, Some(f), true).read().unwrap_err().0.contains("empty"));
        let missing = args(None, Some(dir.join("none")), true).read().unwrap_err().0;
        assert!(missing.starts_with("--token-file "), "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn salts_default_and_are_bounded() {
        let s = |v: Option<&str>| SaltArg { token_salt: v.map(str::to_owned) }.read();
        assert_eq!(s(None).unwrap(), wirebench_core::auth::DEFAULT_SALT);
        assert_eq!(s(Some("prod-eu-1")).unwrap(), "prod-eu-1");
        for bad in ["", "has space", &"x".repeat(MAX_SALT + 1), "é"] {
            assert!(s(Some(bad)).unwrap_err().0.contains("--token-salt"), "{bad:?}");
        }
    }
}
