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
/// a token that needs no quoting in a shell, a YAML file or a URL, and never starts with
/// `-`, which `--token` would read as a flag).
pub fn run(a: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    if !(16..=1024).contains(&a.bytes.0) {
        return Err(UsageError(format!("--bytes {}: 16 to 1024 (under 16 is under 128 bits)", a.bytes)).into());
    }
    writeln!(out, "{}", new_token(usize::try_from(a.bytes.0).unwrap_or(32))?)?;
    Ok(())
}

/// Draws until the token does not start with `-` (1 draw in 64 does): the redraw costs
/// under 0.03 bits and keeps every accepted token equally likely.
fn new_token(bytes: usize) -> std::io::Result<String> {
    loop {
        let mut raw = Vec::with_capacity(bytes);
        while raw.len() < bytes {
            raw.extend_from_slice(&crate::ctx::os_random::<32>()?);
        }
        raw.truncate(bytes);
        if let Some(t) = encode(&raw) {
            return Ok(t);
        }
    }
}

/// The token for `raw`, or None when it would start with `-` (a first byte of 0xf8 to 0xfb).
fn encode(raw: &[u8]) -> Option<String> {
    use base64::Engine as _;
    let t = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    (!t.starts_with('-')).then_some(t)
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

    #[test]
    fn a_token_never_starts_with_a_dash() {
        assert_eq!(encode(&[0xf8; 16]), None);
        assert_eq!(encode(&[0xfb; 16]), None);
        assert!(encode(&[0xfc; 16]).unwrap().starts_with('_'));
        assert!(encode(&[0xf7; 16]).unwrap().starts_with('9'));
        // One draw in 64 would start with '-': 5,000 draws all pass by chance once in e^78.
        let dashed = (0..5000).map(|_| new_token(16).unwrap()).filter(|t| t.starts_with('-')).count();
        assert_eq!(dashed, 0);
    }
}
