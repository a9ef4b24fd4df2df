//! `--shard K/N` and `--start-at TIME`: which part of the scenario this process runs
//! (`wirebench_core::load::shard`: whole rooms, the scenario's client numbering), and when
//! its ramp starts, so that the shards' seconds line up and their reports merge
//! (`wirebench report --merge`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wirebench_core::load::shard::{Part, Shard, ShardSpec, part};
use wirebench_core::report::LoadShard;

use super::Args;
use crate::error::UsageError;
use crate::shutdown::Shutdown;

/// The furthest ahead `--start-at` may be: a typo (a wrong day) should not park the
/// generator for days.
pub const MAX_AHEAD: Duration = Duration::from_secs(24 * 3600);
/// How far in the past `--start-at` may be and still start at once (a process started a
/// moment late); further back is an error, since its ramp would not line up with the others.
pub const LATE_OK: Duration = Duration::from_secs(1);

/// The environment variable `--shard auto/N` reads (Kubernetes Indexed Jobs set it, 0-based).
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// This process's part of the scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharding {
    /// `None`: the whole scenario.
    pub shard: Option<Shard>,
    /// Its rooms and clients (all of them without `--shard`).
    pub part: Part,
    /// When the ramp starts (`None`: at once).
    pub start_at: Option<SystemTime>,
}

impl Sharding {
    /// From the flags, for a scenario of `clients` in rooms of `room_size`.
    pub fn from_args(a: &Args, clients: u64, room_size: u64) -> Result<Self, UsageError> {
        let shard = match &a.shard {
            None => None,
            Some(s) => {
                let spec: ShardSpec =
                    s.parse().map_err(|e: wirebench_core::load::shard::ShardError| UsageError(e.to_string()))?;
                let env = std::env::var(INDEX_ENV).ok();
                Some(spec.resolve(env.as_deref()).map_err(|e| UsageError(e.to_string()))?)
            }
        };
        let part = match shard {
            None => Part { rooms: 0..clients.div_ceil(room_size.max(1)), clients: 0..clients },
            Some(s) => part(s, clients, room_size).map_err(|e| UsageError(e.to_string()))?,
        };
        let start_at = a.start_at.as_deref().map(parse_start_at).transpose()?;
        Ok(Self { shard, part, start_at })
    }

    /// What the report records (`None` without `--shard`).
    pub fn record(&self) -> Option<LoadShard> {
        self.shard.map(|s| LoadShard {
            index: s.index,
            count: s.count,
            first_room: self.part.rooms.start,
            end_room: self.part.rooms.end,
            first_client: self.part.clients.start,
            end_client: self.part.clients.end,
        })
    }
}

/// `--start-at`: RFC 3339 in UTC (`2026-11-23T04:00:00Z`, fractions allowed) or unix seconds
/// (`1795406400`, fractions allowed).
pub fn parse_start_at(s: &str) -> Result<SystemTime, UsageError> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t.parse().map_err(|_| UsageError(format!("--start-at '{s}' is not a number of seconds")))?;
        if !secs.is_finite() || secs > 1e11 {
            return Err(UsageError(format!("--start-at '{s}': out of range")));
        }
        return Ok(UNIX_EPOCH + Duration::from_secs_f64(secs));
    }
    humantime::parse_rfc3339(t).map_err(|e| {
        UsageError(format!("--start-at '{s}': {e} (use RFC 3339 in UTC, e.g. 2026-11-23T04:00:00Z, or unix seconds)"))
    })
}

/// How long to wait from `now` for `at`: refused when it is more than [`MAX_AHEAD`] ahead or
/// more than [`LATE_OK`] past.
pub fn wait_for(at: SystemTime, now: SystemTime) -> Result<Duration, UsageError> {
    match at.duration_since(now) {
        Ok(d) if d > MAX_AHEAD => Err(UsageError(format!(
            "--start-at is {} s ahead (at most {} s): check the date",
            d.as_secs(),
            MAX_AHEAD.as_secs()
        ))),
        Ok(d) => Ok(d),
        Err(e) if e.duration() <= LATE_OK => Ok(Duration::ZERO),
        Err(e) => Err(UsageError(format!(
            "--start-at was {:.1} s ago: the shards would not start together (give a time ahead of every shard's start)",
            e.duration().as_secs_f64()
        ))),
    }
}

/// Waits until `at` (bounded by [`wait_for`]); Ctrl-C ends the wait with an error.
pub fn wait_until(at: SystemTime, shutdown: &Shutdown) -> anyhow::Result<()> {
    let mut left = wait_for(at, SystemTime::now())?;
    while !left.is_zero() {
        if shutdown.is_set() {
            anyhow::bail!("stopped by Ctrl-C while waiting for --start-at: nothing measured");
        }
        // a short step, so Ctrl-C is seen within 50 ms; the clock is read again each time
        std::thread::sleep(left.min(Duration::from_millis(50)));
        left = at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_at_reads_rfc3339_utc_and_unix_seconds() {
        let t = parse_start_at("2026-11-23T04:00:00Z").unwrap();
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().as_secs(), 1_795_406_400);
        assert_eq!(parse_start_at("1795406400").unwrap(), t);
        assert_eq!(parse_start_at("1795406400.5").unwrap(), t + Duration::from_millis(500));
        assert!(parse_start_at("2026-11-23T04:00:00+01:00").is_err(), "UTC only");
        assert!(parse_start_at("tomorrow").unwrap_err().0.starts_with("--start-at 'tomorrow': "));
        assert!(parse_start_at("1e400").is_err());
    }

    #[test]
    fn the_wait_is_bounded_and_a_past_time_is_refused() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(wait_for(now + Duration::from_secs(30), now).unwrap(), Duration::from_secs(30));
        assert_eq!(wait_for(now - Duration::from_millis(500), now).unwrap(), Duration::ZERO);
        assert!(wait_for(now - Duration::from_secs(5), now).unwrap_err().0.starts_with("--start-at was 5.0 s ago"));
        assert!(wait_for(now + MAX_AHEAD + Duration::from_secs(1), now).is_err());
    }
}
