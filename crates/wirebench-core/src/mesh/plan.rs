//! Whom an agent probes, and how often: Pingmesh's levels (Guo et al., "Pingmesh: A
//! Large-Scale System for Data Center Network Latency Measurement and Analysis", SIGCOMM
//! 2015, section 3.3) under a probe budget.
//!
//! - Up to `full_mesh_max` nodes: everyone probes everyone (level `full`).
//! - Past that, with zone (or rack) labels: every peer in the agent's own zone (`zone`, a
//!   sample of `full_mesh_max - 1` if the zone alone is larger), and `inter_zone` peers in
//!   each other zone (`inter_zone`). Without labels: a sample of `full_mesh_max - 1` peers
//!   (`sampled`).
//! - Samples use rendezvous hashing on (agent, peer): stable across restarts, and different
//!   agents pick different peers, so the pairs between two zones are spread over their nodes
//!   rather than all landing on the same few.
//! - Each chosen peer is probed at `rate` per transport, unless that would pass the budget:
//!   then at `budget / (peers x transports)`. The budget is what the agent sends; by
//!   symmetry it answers about as many.

use std::collections::BTreeMap;

/// Planning settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanConfig {
    /// Probes per second per peer per transport, before the budget.
    pub rate: f64,
    /// Most probes per second the agent sends, all transports together.
    pub budget: f64,
    /// Unicast transports probed per peer (UDP, TCP).
    pub transports: u32,
    /// Up to this many nodes (the agent included) the mesh is full.
    pub full_mesh_max: usize,
    /// Past that, peers probed in each other zone.
    pub inter_zone: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self { rate: 2.0, budget: 100.0, transports: 2, full_mesh_max: 200, inter_zone: 3 }
    }
}

/// Why a peer was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// A mesh small enough to be full.
    Full,
    /// In the agent's zone.
    Zone,
    /// A sampled peer in another zone.
    InterZone,
    /// A sampled peer, no zone labels.
    Sampled,
}

impl Level {
    /// The name in the API and docs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Zone => "zone",
            Self::InterZone => "inter_zone",
            Self::Sampled => "sampled",
        }
    }
}

/// A peer as planning sees it: a stable key (its address) and its zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// Stable identity, the same on every agent (the probe address).
    pub key: &'a str,
    /// Zone or rack label.
    pub zone: Option<&'a str>,
}

/// The plan: chosen peers (indices into the candidates, ascending) and the rate each gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `(index, level)` for every peer probed.
    pub chosen: Vec<(usize, Level)>,
    /// Probes per second per chosen peer per transport.
    pub rate: f64,
    /// Probes per second the plan sends in total (never above the budget).
    pub total: f64,
}

/// 64-bit FNV-1a, then SplitMix64's finaliser: a stable hash (the standard library's is
/// seeded per process, so agents would disagree).
fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// The `k` candidates (by index) with the lowest rendezvous score for `me`.
fn lowest(me: &str, peers: &[Candidate<'_>], among: &[usize], k: usize) -> Vec<usize> {
    let mut scored: Vec<(u64, usize)> =
        among.iter().map(|&i| (stable_hash(&[me.as_bytes(), peers[i].key.as_bytes()]), i)).collect();
    scored.sort_unstable();
    scored.into_iter().take(k).map(|(_, i)| i).collect()
}

/// Chooses whom `me` (in `my_zone`) probes among `peers` (itself not included).
pub fn select(me: &str, my_zone: Option<&str>, peers: &[Candidate<'_>], cfg: &PlanConfig) -> Plan {
    let all: Vec<usize> = (0..peers.len()).collect();
    let cap = cfg.full_mesh_max.saturating_sub(1).max(1);
    let mut chosen: Vec<(usize, Level)> = if peers.len() < cfg.full_mesh_max {
        all.iter().map(|&i| (i, Level::Full)).collect()
    } else if let Some(zone) = my_zone.filter(|_| peers.iter().any(|p| p.zone.is_some())) {
        let mut zones: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
        for (i, p) in peers.iter().enumerate() {
            zones.entry(p.zone).or_default().push(i);
        }
        let mut out = Vec::new();
        for (z, members) in &zones {
            if *z == Some(zone) {
                out.extend(lowest(me, peers, members, cap).into_iter().map(|i| (i, Level::Zone)));
            } else {
                out.extend(lowest(me, peers, members, cfg.inter_zone).into_iter().map(|i| (i, Level::InterZone)));
            }
        }
        out
    } else {
        lowest(me, peers, &all, cap).into_iter().map(|i| (i, Level::Sampled)).collect()
    };
    chosen.sort_unstable();
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
    let targets = chosen.len() as f64 * f64::from(cfg.transports.max(1));
    let rate = if targets > 0.0 { cfg.rate.min(cfg.budget / targets) } else { cfg.rate };
    Plan { total: rate * targets, rate, chosen }
}

/// Series an agent exports no matter how many peers it has, with UDP and TCP and one
/// discovery source and the stall meter's 3 (the binary's `mesh::metrics` lists them; a test
/// counts a real scrape).
pub const SERIES_PER_AGENT: u64 = 61;
/// Series an agent exports per probed peer, per unicast transport.
pub const SERIES_PER_PEER_TRANSPORT: u64 = 8;
/// Series per probed peer whatever the transports (its info series).
pub const SERIES_PER_PEER: u64 = 1;
/// Series a multicast group adds per agent (its round-trip histogram: 16 buckets, `+Inf`,
/// `_sum`, `_count`); each peer then has the multicast transport's 8 as well.
pub const SERIES_MULTICAST: u64 = 19;

/// What a fleet costs, for the docs' table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Nodes.
    pub nodes: u64,
    /// Peers each agent probes.
    pub peers: u64,
    /// Probes per second per peer per transport.
    pub rate: f64,
    /// Probes per second each agent sends (and, on average, answers).
    pub probes_per_s: f64,
    /// Prometheus series one agent exports.
    pub series_per_agent: u64,
    /// Series of the whole fleet.
    pub series_total: u64,
}

/// The cost of `nodes` agents in zones of `zone_size` (the last zone may be smaller).
pub fn cost(nodes: u64, zone_size: u64, cfg: &PlanConfig) -> Cost {
    let zone_size = zone_size.clamp(1, nodes.max(1));
    let full = cfg.full_mesh_max as u64;
    let peers = if nodes <= full {
        nodes.saturating_sub(1)
    } else {
        let zones = nodes.div_ceil(zone_size);
        (zone_size - 1).min(full - 1) + (zones - 1) * (cfg.inter_zone as u64).min(zone_size)
    };
    let t = u64::from(cfg.transports.max(1));
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
    let targets = (peers * t) as f64;
    let rate = if targets > 0.0 { cfg.rate.min(cfg.budget / targets) } else { cfg.rate };
    let series_per_agent = SERIES_PER_AGENT + peers * (SERIES_PER_PEER + t * SERIES_PER_PEER_TRANSPORT);
    Cost { nodes, peers, rate, probes_per_s: rate * targets, series_per_agent, series_total: series_per_agent * nodes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(n: usize, zone_size: usize) -> (Vec<String>, Vec<String>) {
        let keys = (0..n).map(|i| format!("10.{}.{}.{}:7878", i >> 16, (i >> 8) & 255, i & 255)).collect();
        let zones = (0..n).map(|i| format!("z{}", i / zone_size)).collect();
        (keys, zones)
    }

    fn plan_for(me: usize, keys: &[String], zones: Option<&[String]>, cfg: &PlanConfig) -> (Vec<usize>, Plan) {
        let idx: Vec<usize> = (0..keys.len()).filter(|&i| i != me).collect();
        let cands: Vec<Candidate<'_>> =
            idx.iter().map(|&i| Candidate { key: &keys[i], zone: zones.map(|z| z[i].as_str()) }).collect();
        let p = select(&keys[me], zones.map(|z| z[me].as_str()), &cands, cfg);
        (idx, p)
    }

    #[test]
    fn small_meshes_are_full_at_the_configured_rate() {
        let (keys, _) = fleet(6, 6);
        let (_, p) = plan_for(0, &keys, None, &PlanConfig::default());
        assert_eq!(p.chosen.len(), 5);
        assert!(p.chosen.iter().all(|&(_, l)| l == Level::Full));
        assert!((p.rate - 2.0).abs() < 1e-12 && (p.total - 20.0).abs() < 1e-12);
    }

    #[test]
    fn the_budget_caps_the_rate() {
        let (keys, _) = fleet(150, 150);
        let (_, p) = plan_for(3, &keys, None, &PlanConfig::default());
        assert_eq!(p.chosen.len(), 149);
        // 100 probes/s over 149 peers x 2 transports.
        assert!((p.rate - 100.0 / 298.0).abs() < 1e-12);
        assert!((p.total - 100.0).abs() < 1e-9);
    }

    #[test]
    fn zones_past_the_full_mesh_limit() {
        let cfg = PlanConfig { full_mesh_max: 50, inter_zone: 3, ..PlanConfig::default() };
        let (keys, zones) = fleet(400, 40); // 10 zones of 40
        let (idx, p) = plan_for(45, &keys, Some(&zones), &cfg);
        let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
        for &(i, level) in &p.chosen {
            let z = zones[idx[i]].as_str();
            *per_zone.entry(z).or_default() += 1;
            assert_eq!(level == Level::Zone, z == "z1");
        }
        assert_eq!(per_zone["z1"], 39, "the whole own zone");
        assert!(per_zone.iter().filter(|(z, _)| **z != "z1").all(|(_, &n)| n == 3), "{per_zone:?}");
        assert_eq!(p.chosen.len(), 39 + 9 * 3);
        assert_eq!(p.chosen.len() as u64, cost(400, 40, &cfg).peers, "the docs' arithmetic agrees");
    }

    #[test]
    fn samples_are_stable_and_spread_over_the_other_zone() {
        let cfg = PlanConfig { full_mesh_max: 20, inter_zone: 2, ..PlanConfig::default() };
        let (keys, zones) = fleet(100, 50); // two zones of 50
        let (idx, a) = plan_for(0, &keys, Some(&zones), &cfg);
        let (_, again) = plan_for(0, &keys, Some(&zones), &cfg);
        assert_eq!(a, again, "same inputs, same choice");
        // Own zone of 50 > 19: a sample of 19; 2 in the other zone.
        assert_eq!(a.chosen.iter().filter(|c| c.1 == Level::Zone).count(), 19);
        assert_eq!(a.chosen.iter().filter(|c| c.1 == Level::InterZone).count(), 2);
        assert!(a.chosen.iter().all(|&(i, _)| idx[i] != 0));
        // Every agent of zone 0 picks 2 of zone 1: how many distinct targets? Rendezvous
        // hashing spreads 50 x 2 picks over most of the 50 (a fixed pick would hit 2).
        let mut hit = std::collections::BTreeSet::new();
        for me in 0..50 {
            let (idx, p) = plan_for(me, &keys, Some(&zones), &cfg);
            hit.extend(p.chosen.iter().filter(|c| c.1 == Level::InterZone).map(|&(i, _)| idx[i]));
        }
        assert!(hit.len() > 35, "{} of 50 nodes in zone 1 probed from zone 0", hit.len());
    }

    #[test]
    fn without_labels_a_large_fleet_is_sampled() {
        let cfg = PlanConfig { full_mesh_max: 10, ..PlanConfig::default() };
        let (keys, _) = fleet(30, 30);
        let (_, p) = plan_for(7, &keys, None, &cfg);
        assert_eq!(p.chosen.len(), 9);
        assert!(p.chosen.iter().all(|c| c.1 == Level::Sampled));
        let empty = select("me", None, &[], &cfg);
        assert!(empty.chosen.is_empty() && empty.total == 0.0);
    }

    /// Agents of different builds must pick the same peers: the hash is pinned to values
    /// worked out apart from this code (FNV-1a over each part then 0xff, SplitMix64's
    /// finaliser; a Python rendering of those steps).
    #[test]
    fn the_rendezvous_hash_is_pinned() {
        assert_eq!(stable_hash(&[]), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(stable_hash(&[b"a", b"b"]), 0xb912_458b_53ec_5105);
        assert_eq!(stable_hash(&[b"10.0.0.1:7878", b"10.0.0.2:7878"]), 0xbed3_0a70_c7cc_3a03);
    }

    /// `full_mesh_max` counts the agent: that many nodes are a full mesh, one more is not.
    #[test]
    fn the_full_mesh_ends_at_full_mesh_max_nodes() {
        let cfg = PlanConfig { full_mesh_max: 10, ..PlanConfig::default() };
        let (keys, _) = fleet(11, 11);
        let (_, p) = plan_for(0, &keys[..10], None, &cfg);
        assert_eq!((p.chosen.len(), p.chosen[0].1), (9, Level::Full));
        let (_, p) = plan_for(0, &keys, None, &cfg);
        assert_eq!((p.chosen.len(), p.chosen[0].1), (9, Level::Sampled));
    }

    /// The docs' arithmetic agrees with what agents choose at the edges: a fleet of exactly
    /// `full_mesh_max`, a zone larger than it, zones smaller than `inter_zone`.
    #[test]
    fn the_cost_counts_the_peers_select_chooses_at_the_edges() {
        let cfg = PlanConfig::default();
        for (nodes, zone) in [(200, 100), (1_000, 500), (300, 2)] {
            let (keys, zones) = fleet(nodes, zone);
            let (_, p) = plan_for(0, &keys, Some(&zones), &cfg);
            assert_eq!(
                p.chosen.len() as u64,
                cost(nodes as u64, zone as u64, &cfg).peers,
                "{nodes} in zones of {zone}"
            );
        }
    }

    #[test]
    fn levels_have_their_documented_names() {
        let names = [Level::Full, Level::Zone, Level::InterZone, Level::Sampled].map(Level::name);
        assert_eq!(names, ["full", "zone", "inter_zone", "sampled"]);
    }

    /// The table in docs/modes/mesh.md, computed by hand: defaults (2/s per peer per
    /// transport, budget 100/s, UDP + TCP, full mesh to 200 nodes, 3 peers per other zone),
    /// zones of 100 nodes.
    #[test]
    fn the_documented_table() {
        let cfg = PlanConfig::default();
        let rows: Vec<Cost> = [10, 100, 1_000, 10_000].iter().map(|&n| cost(n, 100, &cfg)).collect();
        // N = 10: 9 peers x 2 x 2/s = 36/s (under budget); series 61 + 9 x (1 + 2 x 8) = 214.
        assert_eq!((rows[0].peers, rows[0].series_per_agent, rows[0].series_total), (9, 214, 2_140));
        assert!((rows[0].probes_per_s - 36.0).abs() < 1e-9);
        // N = 100: 99 peers, 2 x 99 x 2 = 396/s > 100: rate 100/198 = 0.505/s.
        assert_eq!((rows[1].peers, rows[1].series_per_agent, rows[1].series_total), (99, 1_744, 174_400));
        assert!((rows[1].rate - 100.0 / 198.0).abs() < 1e-12 && (rows[1].probes_per_s - 100.0).abs() < 1e-9);
        // N = 1,000: 10 zones: 99 + 9 x 3 = 126 peers; rate 100 / 252.
        assert_eq!((rows[2].peers, rows[2].series_per_agent, rows[2].series_total), (126, 2_203, 2_203_000));
        assert!((rows[2].rate - 100.0 / 252.0).abs() < 1e-12);
        // N = 10,000: 100 zones: 99 + 99 x 3 = 396 peers; rate 100 / 792.
        assert_eq!((rows[3].peers, rows[3].series_per_agent, rows[3].series_total), (396, 6_793, 67_930_000));
        assert!((rows[3].probes_per_s - 100.0).abs() < 1e-9);
    }
}
