//! STAMP as flags give it (RFC 8762): the reflector's flags and validated config, shared by
//! `serve` and `mesh agent`; key files and the host's own error estimate, shared with the
//! senders in `ping` and the mesh prober.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use wirebench_core::reflect::Prefix;
use wirebench_core::units::MsgRate;
use wirebench_core::wire::stamp::{self, ErrorEstimate, Key, TsFormat};
use wirebench_net::clock::wall_sync;

use crate::error::UsageError;

/// Default cap on the packets answered per second for one source address.
pub const STAMP_MAX_RATE: &str = "100k/s";

/// Timestamp format, as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FormatArg {
    /// NTP 64-bit (the default; Z bit 0).
    #[default]
    Ntp,
    /// Truncated PTPv2 (Z bit 1).
    Ptp,
}

impl From<FormatArg> for TsFormat {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Ntp => Self::Ntp,
            FormatArg::Ptp => Self::Ptp,
        }
    }
}

/// `--stamp-max-rate`: `max` (no cap) or a packet rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateCap(pub Option<MsgRate>);

impl std::str::FromStr for RateCap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("max") {
            return Ok(Self(None));
        }
        s.parse::<MsgRate>().map(|r| Self(Some(r))).map_err(|e| e.to_string())
    }
}

impl Default for RateCap {
    fn default() -> Self {
        Self(STAMP_MAX_RATE.parse().ok())
    }
}

/// The reflector's flags, shared by `serve` and `mesh agent`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "STAMP reflector")]
pub struct StampArgs {
    /// Answer STAMP (RFC 8762) and TWAMP-Light test packets on [ADDR:]PORT; alone, port 862
    /// on the listening address.
    #[arg(long, value_name = "[ADDR:]PORT", num_args = 0..=1, default_missing_value = "862")]
    pub stamp: Option<String>,
    /// Authenticated mode with this HMAC-SHA-256 key, hex, at least 16 bytes (as
    /// stamp-suite's --hmac-key); unauthenticated packets are then dropped.
    #[arg(long, env = "WIREBENCH_STAMP_KEY", hide_env_values = true, conflicts_with = "stamp_key_file")]
    pub stamp_key: Option<String>,
    /// The key from a file (hex).
    #[arg(long, value_name = "FILE")]
    pub stamp_key_file: Option<PathBuf>,
    /// Stateful: the reflector counts its own sequence per session (RFC 8762 §4.3), so the
    /// sender can tell loss out from loss back. Default: stateless (echo the sender's).
    #[arg(long)]
    pub stamp_stateful: bool,
    /// The format of the reflector's timestamps (stated by its own Z bit).
    #[arg(long, value_enum, default_value = "ntp")]
    pub stamp_format: FormatArg,
    /// Answer only sources in this prefix or address (repeatable) [default: any source].
    #[arg(long, value_name = "PREFIX")]
    pub stamp_allow: Vec<Prefix>,
    /// Packets answered per second for one source address, or max: a cap on where forged
    /// sources can aim the replies.
    #[arg(long, value_name = "RATE", default_value = STAMP_MAX_RATE)]
    pub stamp_max_rate: RateCap,
}

/// A validated reflector configuration.
#[derive(Debug, Clone)]
pub struct StampConfig {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Authenticated mode's key.
    pub key: Option<Key>,
    /// Stateful sequence numbers.
    pub stateful: bool,
    /// Timestamp format.
    pub format: TsFormat,
    /// Sources answered (empty: all).
    pub allow: Vec<Prefix>,
    /// Per-source cap, packets/s.
    pub max_rate: Option<f64>,
}

impl StampArgs {
    /// The reflector's config, `None` without `--stamp`; `listen_ip` is the address a bare
    /// port binds to.
    pub fn config(&self, listen_ip: IpAddr) -> Result<Option<StampConfig>, UsageError> {
        let Some(spec) = self.stamp.as_deref() else {
            if self.stamp_key.is_some()
                || self.stamp_key_file.is_some()
                || !self.stamp_allow.is_empty()
                || self.stamp_stateful
            {
                return Err(UsageError("the --stamp-* flags need --stamp (the reflector's address)".into()));
            }
            return Ok(None);
        };
        let addr = stamp_addr(spec, listen_ip)?;
        let key = key_of(self.stamp_key.as_deref(), self.stamp_key_file.as_deref(), "stamp-key")?;
        Ok(Some(StampConfig {
            addr,
            key,
            stateful: self.stamp_stateful,
            format: self.stamp_format.into(),
            allow: self.stamp_allow.clone(),
            max_rate: self.stamp_max_rate.0.map(MsgRate::per_sec),
        }))
    }
}

/// A STAMP key from `--FLAG HEX` or, without it, `--FLAG-file FILE` (hex); `None` without
/// either. Every STAMP key flag (`serve`, `ping`, `mesh agent`) reads through here.
pub fn key_of(hex: Option<&str>, file: Option<&Path>, flag: &str) -> Result<Option<Key>, UsageError> {
    let text = match (hex, file) {
        (Some(k), _) => k.to_owned(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| UsageError(format!("--{flag}-file {}: {e}", f.display())))?
        }
        (None, None) => return Ok(None),
    };
    Key::from_hex(&text).map(Some).map_err(|e| UsageError(format!("--{flag}: {e}")))
}

/// This host's error estimate for STAMP timestamps in `format`, from the kernel's view of the
/// wall clock: S set when a daemon disciplines it, the error its estimate (at least 1 µs: a
/// timestamp is read before the send system call; 1 s when the kernel does not say).
pub fn own_error(format: TsFormat) -> ErrorEstimate {
    let s = wall_sync();
    let synced = s.is_some_and(|s| s.synced);
    let error_ns = s.map_or(1_000_000_000, |s| s.error_ns).max(1_000);
    ErrorEstimate::new(synced, format, error_ns)
}

/// `862`, `10.0.0.1`, `10.0.0.1:8620` or `[::1]:862`.
fn stamp_addr(spec: &str, listen_ip: IpAddr) -> Result<SocketAddr, UsageError> {
    let s = spec.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(listen_ip, port));
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, stamp::PORT));
    }
    crate::addr::resolve(s)
        .map_err(|_| UsageError(format!("--stamp '{spec}': expected [ADDR:]PORT, e.g. 862 or 10.0.0.1:862")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> StampArgs {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: StampArgs,
        }
        <P as clap::Parser>::try_parse_from(std::iter::once("x").chain(a.iter().copied())).unwrap().s
    }

    #[test]
    fn the_address_defaults_to_port_862_on_the_listening_address() {
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        let c = |a: &[&str]| args(a).config(any).map(|c| c.map(|c| c.addr.to_string()));
        assert_eq!(c(&[]).unwrap(), None);
        assert_eq!(c(&["--stamp"]).unwrap().unwrap(), "0.0.0.0:862");
        assert_eq!(c(&["--stamp", "8620"]).unwrap().unwrap(), "0.0.0.0:8620");
        assert_eq!(c(&["--stamp", "127.0.0.1"]).unwrap().unwrap(), "127.0.0.1:862");
        assert_eq!(c(&["--stamp", "127.0.0.1:9"]).unwrap().unwrap(), "127.0.0.1:9");
        assert!(c(&["--stamp", "x:y:z"]).unwrap_err().0.contains("expected [ADDR:]PORT"));
        assert!(c(&["--stamp-stateful"]).unwrap_err().0.contains("need --stamp"));
    }

    #[test]
    fn keys_rates_and_formats_are_read() {
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        let c = args(&["--stamp", "--stamp-key", "00112233445566778899aabbccddeeff", "--stamp-format", "ptp"])
            .config(any)
            .unwrap()
            .unwrap();
        assert!(c.key.is_some() && c.format == TsFormat::Ptp && !c.stateful);
        assert_eq!(c.max_rate, Some(100_000.0));
        let short = args(&["--stamp", "--stamp-key", "0011"]).config(any).unwrap_err();
        assert!(short.0.contains("at least 16 bytes"), "{}", short.0);
        let open =
            args(&["--stamp", "--stamp-max-rate", "max", "--stamp-allow", "10.0.0.0/8"]).config(any).unwrap().unwrap();
        assert_eq!((open.max_rate, open.allow.len()), (None, 1));
    }
}
