//! Sharding a load scenario over several processes (`wirebench load --shard K/N`): rooms
//! are the unit, so every room's members live in one process and every delay is measured on
//! one clock. Client ids stay the scenario's (client `i` is in room `i / room_size` in every
//! shard), so the shards' reports merge into the report of the whole scenario.
//!
//! Division: `R` rooms over `N` shards, in contiguous blocks; the first `R mod N` shards take
//! one room more than the rest (`R = 10, N = 3`: rooms 0..4, 4..7, 7..10). The last room may
//! be short (clients not a multiple of the room size); its shard then has fewer clients.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

/// The K-th (1-based) of N shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// K, 1..=N.
    pub index: u64,
    /// N.
    pub count: u64,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `--shard` as given: `K/N`, or `auto/N` (K from a 0-based index such as Kubernetes'
/// `JOB_COMPLETION_INDEX`, plus one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    /// `K/N`.
    Fixed(Shard),
    /// `auto/N`.
    Auto {
        /// N.
        count: u64,
    },
}

/// Why a shard is not usable: one line for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not `K/N` or `auto/N`.
    #[error("--shard '{0}' is not K/N (e.g. 2/4) or auto/N")]
    Syntax(String),
    /// N = 0.
    #[error("--shard: N must be at least 1")]
    NoShards,
    /// K = 0 or K > N.
    #[error("--shard {0}/{1}: K must be 1 to {1}")]
    OutOfRange(u64, u64),
    /// More shards than rooms: a shard would run nothing.
    #[error(
        "--shard {shard}: {rooms} rooms cannot be split {n} ways (rooms are never split): use at most {rooms} shards"
    )]
    TooMany {
        /// The shard asked for.
        shard: Shard,
        /// N.
        n: u64,
        /// Rooms in the scenario.
        rooms: u64,
    },
    /// `auto/N` without a usable index.
    #[error("--shard auto/{count}: {why}")]
    Auto {
        /// N.
        count: u64,
        /// What is wrong with the index.
        why: String,
    },
}

impl FromStr for ShardSpec {
    type Err = ShardError;
    fn from_str(s: &str) -> Result<Self, ShardError> {
        let syntax = || ShardError::Syntax(s.to_owned());
        let (k, n) = s.trim().split_once('/').ok_or_else(syntax)?;
        let count: u64 = n.trim().parse().map_err(|_| syntax())?;
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if k.trim() == "auto" {
            return Ok(Self::Auto { count });
        }
        let index: u64 = k.trim().parse().map_err(|_| syntax())?;
        if index == 0 || index > count {
            return Err(ShardError::OutOfRange(index, count));
        }
        Ok(Self::Fixed(Shard { index, count }))
    }
}

impl ShardSpec {
    /// The shard, `auto` taking `env_index` (0-based, as `JOB_COMPLETION_INDEX`).
    pub fn resolve(self, env_index: Option<&str>) -> Result<Shard, ShardError> {
        match self {
            Self::Fixed(s) => Ok(s),
            Self::Auto { count } => {
                let bad = |why: String| ShardError::Auto { count, why };
                let text = env_index.ok_or_else(|| bad("JOB_COMPLETION_INDEX is not set".into()))?;
                let i: u64 =
                    text.trim().parse().map_err(|_| bad(format!("JOB_COMPLETION_INDEX '{text}' is not a number")))?;
                if i >= count {
                    return Err(bad(format!("JOB_COMPLETION_INDEX {i} is not below {count}")));
                }
                Ok(Shard { index: i + 1, count })
            }
        }
    }
}

/// What one shard runs: a contiguous block of rooms and their members' ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Room numbers.
    pub rooms: Range<u64>,
    /// Client ids (the scenario's numbering).
    pub clients: Range<u64>,
}

impl Part {
    /// Clients in this part.
    pub const fn len(&self) -> u64 {
        self.clients.end - self.clients.start
    }

    /// True when it holds no client (never, for a valid shard).
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The rooms and clients of `shard` in a scenario of `clients` in rooms of `room_size`
/// (`room_size >= 1`).
pub fn part(shard: Shard, clients: u64, room_size: u64) -> Result<Part, ShardError> {
    let room_size = room_size.max(1);
    let rooms = clients.div_ceil(room_size);
    let Shard { index, count } = shard;
    if count == 0 {
        return Err(ShardError::NoShards);
    }
    if index == 0 || index > count {
        return Err(ShardError::OutOfRange(index, count));
    }
    if count > rooms {
        return Err(ShardError::TooMany { shard, n: count, rooms });
    }
    let (base, extra) = (rooms / count, rooms % count);
    let k = index - 1;
    let first = k * base + k.min(extra);
    let end = first + base + u64::from(k < extra);
    Ok(Part { rooms: first..end, clients: first * room_size..(end * room_size).min(clients) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(index: u64, count: u64) -> Shard {
        Shard { index, count }
    }

    #[test]
    fn uneven_rooms_go_to_the_first_shards() {
        // 48 clients in rooms of 5: 10 rooms (the last of 3), over 3 shards: 4, 3, 3 rooms.
        let parts: Vec<Part> = (1..=3).map(|k| part(sh(k, 3), 48, 5).unwrap()).collect();
        assert_eq!(parts[0], Part { rooms: 0..4, clients: 0..20 });
        assert_eq!(parts[1], Part { rooms: 4..7, clients: 20..35 });
        assert_eq!(parts[2], Part { rooms: 7..10, clients: 35..48 });
        assert_eq!(parts.iter().map(Part::len).collect::<Vec<_>>(), [20, 15, 13]);
    }

    #[test]
    fn every_client_and_room_is_in_exactly_one_shard() {
        for clients in 1..=60u64 {
            for room_size in 1..=7u64 {
                let rooms = clients.div_ceil(room_size);
                for n in 1..=rooms.min(9) {
                    let mut next_room = 0;
                    let mut next_client = 0;
                    for k in 1..=n {
                        let p = part(sh(k, n), clients, room_size).unwrap();
                        assert_eq!((p.rooms.start, p.clients.start), (next_room, next_client));
                        assert!(!p.is_empty() && !p.rooms.is_empty());
                        // a room is never split: every member's room is inside the part
                        assert!(p.clients.clone().all(|c| p.rooms.contains(&(c / room_size))));
                        let sizes = rooms / n;
                        assert!(p.rooms.end - p.rooms.start == sizes || p.rooms.end - p.rooms.start == sizes + 1);
                        next_room = p.rooms.end;
                        next_client = p.clients.end;
                    }
                    assert_eq!((next_room, next_client), (rooms, clients), "{clients} {room_size} {n}");
                }
            }
        }
    }

    #[test]
    fn bad_shards_are_one_line_errors() {
        let e = |s: &str| s.parse::<ShardSpec>().unwrap_err().to_string();
        assert_eq!(e("3/2"), "--shard 3/2: K must be 1 to 2");
        assert_eq!(e("0/2"), "--shard 0/2: K must be 1 to 2");
        assert_eq!(e("1/0"), "--shard: N must be at least 1");
        assert_eq!(e("auto/0"), "--shard: N must be at least 1");
        assert_eq!(e("2"), "--shard '2' is not K/N (e.g. 2/4) or auto/N");
        assert_eq!(e("a/b"), "--shard 'a/b' is not K/N (e.g. 2/4) or auto/N");
        assert_eq!(
            part(sh(1, 4), 15, 5).unwrap_err().to_string(),
            "--shard 1/4: 3 rooms cannot be split 4 ways (rooms are never split): use at most 3 shards"
        );
        assert_eq!("2/4".parse::<ShardSpec>().unwrap(), ShardSpec::Fixed(sh(2, 4)));
    }

    #[test]
    fn the_last_shard_is_in_range_and_part_refuses_what_parse_refuses() {
        assert_eq!("4/4".parse::<ShardSpec>().unwrap(), ShardSpec::Fixed(sh(4, 4)));
        assert_eq!("1/1".parse::<ShardSpec>().unwrap(), ShardSpec::Fixed(sh(1, 1)));
        assert_eq!(part(sh(1, 0), 10, 5), Err(ShardError::NoShards));
        assert_eq!(part(sh(0, 2), 10, 5), Err(ShardError::OutOfRange(0, 2)));
        assert_eq!(part(sh(3, 2), 10, 5), Err(ShardError::OutOfRange(3, 2)));
        assert_eq!(part(sh(2, 2), 10, 5), Ok(Part { rooms: 1..2, clients: 5..10 }));
        assert!(Part { rooms: 2..2, clients: 10..10 }.is_empty());
    }

    #[test]
    fn auto_takes_the_zero_based_index() {
        let auto: ShardSpec = "auto/3".parse().unwrap();
        assert_eq!(auto.resolve(Some("0")).unwrap(), sh(1, 3));
        assert_eq!(auto.resolve(Some("2")).unwrap(), sh(3, 3));
        assert_eq!(
            auto.resolve(Some("3")).unwrap_err().to_string(),
            "--shard auto/3: JOB_COMPLETION_INDEX 3 is not below 3"
        );
        assert_eq!(auto.resolve(None).unwrap_err().to_string(), "--shard auto/3: JOB_COMPLETION_INDEX is not set");
        assert!(auto.resolve(Some("x")).is_err());
        assert_eq!(ShardSpec::Fixed(sh(2, 3)).resolve(Some("0")).unwrap(), sh(2, 3), "a fixed shard ignores it");
    }
}
