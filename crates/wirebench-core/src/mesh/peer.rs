//! Peers: who an agent (or a relay) talks to, with the node name and zone labels a source
//! knows, and the plain-text peer list format.
//!
//! A list has one peer a line: `HOST[:PORT] [name=NAME] [zone=ZONE]`; `#` starts a comment;
//! blank lines are ignored. `stamp:HOST[:PORT]` (same labels) is a STAMP reflector (RFC 8762,
//! port 862 by default): a router or another tool's reflector, probed with STAMP test
//! packets, a member of the matrix that probes nobody itself. `HOST` is an IPv4/IPv6 address or a DNS name (resolved by the
//! caller), `[v6]:port` for IPv6 with a port. Names and zones are label values: at most
//! [`MAX_LABEL`] bytes of `A-Za-z0-9._-`, so they are safe in Prometheus labels, file
//! names and terminals.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Longest node name or zone accepted.
pub const MAX_LABEL: usize = 63;
/// Most peers one source may give (a larger list is refused, not truncated).
pub const MAX_PEERS: usize = 20_000;

/// A peer that discovery found: where its agent answers probes, and what it is called.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Peer {
    /// Its probe address (the agent's serve port).
    pub addr: SocketAddr,
    /// Node name (Kubernetes `nodeName`, a `name=` in a list), if known.
    pub name: Option<String>,
    /// Zone or rack label, if known.
    pub zone: Option<String>,
    /// A STAMP reflector (`stamp:` entries), not an agent: probed with STAMP test packets
    /// over UDP only, and it probes nobody.
    pub stamp: bool,
}

impl Peer {
    /// An agent with no labels.
    pub const fn at(addr: SocketAddr) -> Self {
        Self { addr, name: None, zone: None, stamp: false }
    }

    /// What to call it: its name, or its address.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.addr.to_string())
    }
}

/// One line of a peer list before its host is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerLine {
    /// Address or DNS name.
    pub host: String,
    /// Port (the default when the line has none).
    pub port: u16,
    /// `name=`.
    pub name: Option<String>,
    /// `zone=`.
    pub zone: Option<String>,
    /// A `stamp:` entry: a STAMP reflector.
    pub stamp: bool,
}

impl PeerLine {
    /// The address, when the host is a literal IP.
    pub fn literal(&self) -> Option<SocketAddr> {
        self.host.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, self.port))
    }
}

/// Why a peer list or entry was refused: the line and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("peer list line {line}: {problem}")]
pub struct PeerError {
    /// 1-based line number (1 for a single entry).
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

/// Checks a name or zone label.
pub fn check_label(what: &str, v: &str) -> Result<String, String> {
    if v.is_empty() || v.len() > MAX_LABEL {
        return Err(format!("{what} must be 1 to {MAX_LABEL} characters"));
    }
    if !v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return Err(format!("{what} '{v}' may only hold letters, digits, '.', '_' and '-'"));
    }
    Ok(v.to_owned())
}

/// Splits `HOST[:PORT]` (IPv6 as `[addr]:port` or bare) into host and port.
pub fn split_host_port(s: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad_port = |p: &str| format!("'{p}' is not a port");
    if let Some(rest) = s.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(|| format!("'{s}': missing ']'"))?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad_port(p))?,
            None if tail.is_empty() => default_port,
            None => return Err(format!("'{s}': junk after ']'")),
        };
        return Ok((host.to_owned(), port));
    }
    if s.parse::<IpAddr>().is_ok() {
        return Ok((s.to_owned(), default_port)); // a bare IPv6 address has colons
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_owned(), p.parse().map_err(|_| bad_port(p))?)),
        None => Ok((s.to_owned(), default_port)),
    }
}

fn check_host(h: &str) -> Result<(), String> {
    let ok = !h.is_empty()
        && h.len() <= 253
        && (h.parse::<IpAddr>().is_ok() || h.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')));
    if ok { Ok(()) } else { Err(format!("'{h}' is not an address or host name")) }
}

/// Parses one entry (`HOST[:PORT] [name=N] [zone=Z]`, or `stamp:HOST[:PORT] ...`, whose
/// port is STAMP's, 862, when none is given).
pub fn parse_entry(entry: &str, default_port: u16) -> Result<PeerLine, String> {
    let mut words = entry.split_whitespace();
    let first = words.next().ok_or("empty entry")?;
    let (first, stamp, default_port) = match first.strip_prefix("stamp:") {
        Some("") => return Err("'stamp:' needs a reflector's HOST[:PORT], e.g. stamp:10.0.0.1:862".into()),
        Some(rest) => (rest, true, crate::wire::stamp::PORT),
        None => (first, false, default_port),
    };
    let (host, port) = split_host_port(first, default_port)?;
    check_host(&host)?;
    if port == 0 {
        return Err(format!("'{first}': port 0"));
    }
    let (mut name, mut zone) = (None, None);
    for w in words {
        match w.split_once('=') {
            Some(("name", v)) => name = Some(check_label("name", v)?),
            Some(("zone", v)) => zone = Some(check_label("zone", v)?),
            _ => return Err(format!("'{w}': expected name=NAME or zone=ZONE")),
        }
    }
    Ok(PeerLine { host, port, name, zone, stamp })
}

/// Parses a whole list (a file's text).
pub fn parse_list(text: &str, default_port: u16) -> Result<Vec<PeerLine>, PeerError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if out.len() == MAX_PEERS {
            return Err(PeerError { line: i + 1, problem: format!("more than {MAX_PEERS} peers") });
        }
        out.push(parse_entry(line, default_port).map_err(|problem| PeerError { line: i + 1, problem })?);
    }
    Ok(out)
}

/// The union of several sources' peers: one entry per address, sorted by address; where two
/// sources know the same address, the first one's labels win and missing ones are filled
/// from the next; any source calling it a STAMP reflector makes it one.
pub fn merge(sources: &[Vec<Peer>]) -> Vec<Peer> {
    let mut all: std::collections::BTreeMap<SocketAddr, Peer> = std::collections::BTreeMap::new();
    for p in sources.iter().flatten() {
        let e = all.entry(p.addr).or_insert_with(|| Peer::at(p.addr));
        if e.name.is_none() {
            e.name.clone_from(&p.name);
        }
        if e.zone.is_none() {
            e.zone.clone_from(&p.zone);
        }
        e.stamp |= p.stamp;
    }
    all.into_values().collect()
}

/// What changed between two sorted peer sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// New addresses.
    pub added: Vec<SocketAddr>,
    /// Addresses gone.
    pub removed: Vec<SocketAddr>,
}

impl Diff {
    /// `new` against `old` (both as [`merge`] returns them).
    pub fn between(old: &[Peer], new: &[Peer]) -> Self {
        let olds: std::collections::BTreeSet<_> = old.iter().map(|p| p.addr).collect();
        let news: std::collections::BTreeSet<_> = new.iter().map(|p| p.addr).collect();
        Self { added: news.difference(&olds).copied().collect(), removed: olds.difference(&news).copied().collect() }
    }

    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{} -{}", self.added.len(), self.removed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(host: &str, port: u16, name: Option<&str>, zone: Option<&str>) -> PeerLine {
        PeerLine { host: host.into(), port, name: name.map(Into::into), zone: zone.map(Into::into), stamp: false }
    }

    #[test]
    fn parses_a_list_with_comments_labels_and_default_ports() {
        let text = "# fleet\n10.0.0.1:7000 name=a zone=z1\n\n10.0.0.2   # default port\nnode-3.example name=c\n[::1]:9 zone=v6\n::2\n";
        let got = parse_list(text, 7878).unwrap();
        assert_eq!(
            got,
            vec![
                line("10.0.0.1", 7000, Some("a"), Some("z1")),
                line("10.0.0.2", 7878, None, None),
                line("node-3.example", 7878, Some("c"), None),
                line("::1", 9, None, Some("v6")),
                line("::2", 7878, None, None),
            ]
        );
        assert_eq!(got[0].literal(), Some("10.0.0.1:7000".parse().unwrap()));
        assert_eq!(got[2].literal(), None, "a name is resolved by the caller");
    }

    #[test]
    fn refuses_bad_lines_with_their_number() {
        for (text, at) in [
            ("10.0.0.1\n10.0.0.2:x\n", 2),
            ("10.0.0.1:0\n", 1),
            ("a\nb\nc name=\n", 3),
            ("x zone=has space\n", 1),
            ("x colour=red\n", 1),
            ("bad_host!\n", 1),
            ("[::1\n", 1),
            (&format!("x name={}\n", "n".repeat(64)), 1),
        ] {
            let e = parse_list(text, 1).unwrap_err();
            assert_eq!(e.line, at, "{text:?}: {e}");
        }
    }

    #[test]
    fn stamp_entries_are_reflectors_on_port_862_unless_given_one() {
        let got = parse_list(
            "stamp:10.0.0.9\nstamp:10.0.0.9:8620 name=r1 zone=edge\nstamp:router.example name=r2\nstamp:[::1]:9 zone=v6\nstamp:::2\n",
            7878,
        )
        .unwrap();
        let stamp = |host: &str, port, name: Option<&str>, zone: Option<&str>| PeerLine {
            stamp: true,
            ..line(host, port, name, zone)
        };
        assert_eq!(
            got,
            vec![
                stamp("10.0.0.9", 862, None, None),
                stamp("10.0.0.9", 8620, Some("r1"), Some("edge")),
                stamp("router.example", 862, Some("r2"), None),
                stamp("::1", 9, None, Some("v6")),
                stamp("::2", 862, None, None),
            ]
        );
        assert!(!parse_entry("10.0.0.9", 7878).unwrap().stamp, "a plain entry is an agent");
        // A reflector and an agent at one address: any source calling it a reflector wins.
        let a: SocketAddr = "10.0.0.9:862".parse().unwrap();
        let m = merge(&[vec![Peer::at(a)], vec![Peer { stamp: true, ..Peer::at(a) }]]);
        assert!(m[0].stamp);
    }

    #[test]
    fn refuses_bad_stamp_entries_in_one_line() {
        for (entry, why) in [
            ("stamp:", "needs a reflector's HOST[:PORT]"),
            ("stamp: name=r1", "needs a reflector's HOST[:PORT]"),
            ("stamp:10.0.0.1:x", "is not a port"),
            ("stamp:10.0.0.1:0", "port 0"),
            ("stamp:bad_host!", "not an address"),
            ("stamp:10.0.0.1 colour=red", "expected name=NAME"),
            ("stamp:10.0.0.1 name=has/slash", "may only hold"),
            ("stamp:[::1", "missing ']'"),
        ] {
            let e = parse_entry(entry, 7878).unwrap_err();
            assert!(e.contains(why) && !e.contains('\n'), "{entry:?}: {e}");
        }
    }

    /// The longest label and host name accepted are; one byte more is refused, as is junk
    /// after an IPv6 address's `]` (nothing after it is the default port).
    #[test]
    fn the_longest_label_and_host_pass_and_one_more_byte_does_not() {
        let label = "n".repeat(MAX_LABEL);
        assert_eq!(check_label("name", &label), Ok(label.clone()));
        assert!(check_label("name", &format!("{label}n")).is_err());
        let host = format!("{}.example", "h".repeat(245));
        assert_eq!(parse_entry(&host, 1).unwrap().host.len(), 253);
        assert!(parse_entry(&format!("h{host}"), 1).is_err());
        assert!(parse_entry("[::1]x", 1).unwrap_err().contains("junk after ']'"));
        assert_eq!(parse_entry("[::1]", 7).unwrap().port, 7, "brackets without a port");
    }

    #[test]
    fn a_peer_is_labelled_by_its_name_else_its_address() {
        let a: SocketAddr = "10.0.0.1:7".parse().unwrap();
        assert_eq!(Peer::at(a).label(), "10.0.0.1:7");
        assert_eq!(Peer { name: Some("n1".into()), ..Peer::at(a) }.label(), "n1");
    }

    /// Two sources both calling an address a reflector keep it one.
    #[test]
    fn a_reflector_named_by_two_sources_stays_a_reflector() {
        let r = Peer { stamp: true, ..Peer::at("10.0.0.9:862".parse().unwrap()) };
        assert!(merge(&[vec![r.clone()], vec![r]])[0].stamp);
    }

    #[test]
    fn a_diff_with_only_additions_is_not_empty_and_shows_its_counts() {
        let p = vec![Peer::at("10.0.0.1:1".parse().unwrap()), Peer::at("10.0.0.2:1".parse().unwrap())];
        let d = Diff::between(&[], &p);
        assert!(!d.is_empty());
        assert_eq!(d.to_string(), "+2 -0");
        assert_eq!(Diff::between(&p, &p[1..]).to_string(), "+0 -1");
    }

    #[test]
    fn refuses_lists_past_the_cap() {
        let text = "10.0.0.1\n".repeat(MAX_PEERS + 1);
        assert!(parse_list(&text, 1).unwrap_err().problem.contains("more than"));
        // The error names the file line of the peer past the cap: a comment line before
        // the peers puts it one below the peer count.
        let text = format!("# fleet\n{text}");
        assert_eq!(parse_list(&text, 1).unwrap_err().line, MAX_PEERS + 2);
        assert_eq!(parse_list(&text[..text.len() - "10.0.0.1\n".len()], 1).unwrap().len(), MAX_PEERS);
    }

    #[test]
    fn merge_keeps_one_per_address_and_fills_labels() {
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:1".parse().unwrap();
        let first = vec![Peer { addr: b, name: Some("b".into()), zone: None, stamp: false }];
        let second =
            vec![Peer::at(a), Peer { addr: b, name: Some("other".into()), zone: Some("z".into()), stamp: false }];
        let m = merge(&[first, second]);
        assert_eq!(
            m,
            vec![Peer::at(a), Peer { addr: b, name: Some("b".into()), zone: Some("z".into()), stamp: false }]
        );
        let d = Diff::between(&m[..1], &m[1..]);
        assert_eq!((d.added, d.removed), (vec![b], vec![a]));
        assert!(Diff::between(&m, &m).is_empty());
    }
}
