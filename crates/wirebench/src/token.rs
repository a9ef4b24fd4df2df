//! `wirebench token`: a new shared secret for `--token`, from the OS random source.

use crate::error::UsageError;

/// `wirebench token`: print a new token.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Random bytes in the token, 16 to 1024 (a size: 32, 32B).
    #[arg(long, default_value = "32")]
    pub bytes: wirebench_core::units::ByteSize,
}

/// Prints `bytes` bytes from the OS random source, base64 (URL-safe alphabet, no padding:
/// a token that needs no quoting in a shell, a YAML file or a URL).
pub fn run(a: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    if !(16..=1024).contains(&a.bytes.0) {
        return Err(UsageError(format!("--bytes {}: 16 to 1024 (under 16 is under 128 bits)", a.bytes)).into());
    }
    writeln!(out, "{}", new_token(usize::try_from(a.bytes.0).unwrap_or(32))?)?;
    Ok(())
}

fn new_token(bytes: usize) -> std::io::Result<String> {
    use base64::Engine as _;
    let mut raw = Vec::with_capacity(bytes);
    while raw.len() < bytes {
        raw.extend_from_slice(&crate::ctx::os_random::<32>()?);
    }
    raw.truncate(bytes);
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw))
}

#[cfg(test)]
mod tests {
    use wirebench_core::auth::{MIN_TOKEN_BITS, token_bits};

    use super::*;
    use crate::auth::TokenArgs;

    #[test]
    fn a_new_token_is_strong_fresh_and_shell_safe() {
        let a = new_token(32).unwrap();
        let b = new_token(32).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43, "32 bytes are 43 base64 characters without padding");
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{a}");
        assert!(token_bits(&a) >= MIN_TOKEN_BITS, "{a}: {} bits", token_bits(&a));
        assert_eq!(new_token(100).unwrap().len(), 134, "more than one draw of 32");
        let given = TokenArgs { token: Some(a), token_file: None, weak_token: false };
        assert!(given.read().is_ok());
    }
}
