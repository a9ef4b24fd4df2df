//! Peers from Kubernetes EndpointSlices (`discovery.k8s.io/v1`): the fields discovery reads
//! from a list or a watch event, and the peers a slice names.
//!
//! Every endpoint that is not terminating is a peer (a Service with
//! `publishNotReadyAddresses: true` keeps an agent that is not ready in the list, so a
//! crashed agent shows as unreachable in the matrix instead of vanishing); its node name is
//! `nodeName` (else the target Pod's name), its zone the endpoint's `zone`.

use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;

use super::peer::{MAX_LABEL, MAX_PEERS, Peer, check_label};

/// Which port of the slice is the probe port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSel {
    /// The port with this name.
    Name(String),
    /// This number, whatever the slice says.
    Number(u16),
    /// The slice's only port, or one named `probe`, or the default.
    Auto,
}

/// Object metadata.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Resource version (for watches).
    #[serde(default)]
    pub resource_version: String,
    /// List continuation token.
    #[serde(default, rename = "continue")]
    pub continue_token: Option<String>,
}

/// An EndpointSlice, the parts discovery reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    /// Metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// `IPv4`, `IPv6` or `FQDN` (skipped).
    #[serde(default)]
    pub address_type: String,
    /// Ports.
    #[serde(default)]
    pub ports: Option<Vec<SlicePort>>,
    /// Endpoints.
    #[serde(default)]
    pub endpoints: Option<Vec<Endpoint>>,
}

/// A slice port.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SlicePort {
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// Number.
    #[serde(default)]
    pub port: Option<u16>,
}

/// An endpoint.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Addresses (Kubernetes uses the first).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Conditions.
    #[serde(default)]
    pub conditions: Conditions,
    /// Node.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// The Pod behind it.
    #[serde(default)]
    pub target_ref: Option<TargetRef>,
}

/// Endpoint conditions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Conditions {
    /// Being deleted.
    #[serde(default)]
    pub terminating: Option<bool>,
}

/// A reference to the object behind an endpoint.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TargetRef {
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A list of slices.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SliceList {
    /// Metadata (resource version, continuation).
    #[serde(default)]
    pub metadata: Meta,
    /// The slices.
    #[serde(default)]
    pub items: Vec<EndpointSlice>,
}

/// One line of a watch.
#[derive(Debug, Clone, Deserialize)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The object (a slice; a `Status` for `ERROR`).
    pub object: serde_json::Value,
}

fn label(v: Option<&String>) -> Option<String> {
    v.filter(|s| s.len() <= MAX_LABEL).and_then(|s| check_label("label", s).ok())
}

/// The probe port `sel` picks in `slice`.
fn port_of(slice: &EndpointSlice, sel: &PortSel, default_port: u16) -> Option<u16> {
    let ports = slice.ports.as_deref().unwrap_or_default();
    match sel {
        PortSel::Number(n) => Some(*n),
        PortSel::Name(name) => ports.iter().find(|p| p.name.as_deref() == Some(name)).and_then(|p| p.port),
        PortSel::Auto => match ports {
            [only] => only.port,
            _ => ports.iter().find(|p| p.name.as_deref() == Some("probe")).and_then(|p| p.port).or(Some(default_port)),
        },
    }
}

/// The peers `slice` names (at most [`MAX_PEERS`]); a slice whose port cannot be found
/// names none.
pub fn peers_of(slice: &EndpointSlice, sel: &PortSel, default_port: u16) -> Vec<Peer> {
    if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
        return Vec::new();
    }
    let Some(port) = port_of(slice, sel, default_port).filter(|&p| p != 0) else { return Vec::new() };
    let mut out = Vec::new();
    for e in slice.endpoints.as_deref().unwrap_or_default() {
        if e.conditions.terminating == Some(true) {
            continue;
        }
        let Some(ip) = e.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) else { continue };
        let name = label(e.node_name.as_ref()).or_else(|| label(e.target_ref.as_ref().and_then(|t| t.name.as_ref())));
        out.push(Peer { addr: SocketAddr::new(ip, port), name, zone: label(e.zone.as_ref()), stamp: false });
        if out.len() == MAX_PEERS {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLICE: &str = r#"{
      "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
      "metadata": {"name": "agents-abc", "resourceVersion": "42"},
      "addressType": "IPv4",
      "ports": [{"name": "probe", "port": 7878, "protocol": "UDP"}, {"name": "http", "port": 9878}],
      "endpoints": [
        {"addresses": ["10.1.0.11"], "conditions": {"ready": true}, "nodeName": "node-a", "zone": "z1"},
        {"addresses": ["10.1.0.12"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "agent-b"}},
        {"addresses": ["10.1.0.13"], "conditions": {"terminating": true}, "nodeName": "node-c"},
        {"addresses": ["not-an-ip"], "nodeName": "node-d"},
        {"addresses": ["10.1.0.15"], "nodeName": "bad name!"}
      ]
    }"#;

    #[test]
    fn peers_from_a_slice() {
        let s: EndpointSlice = serde_json::from_str(SLICE).unwrap();
        assert_eq!(s.metadata.resource_version, "42");
        let p = peers_of(&s, &PortSel::Auto, 1);
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        assert_eq!(
            p,
            vec![
                Peer { addr: at("10.1.0.11:7878"), name: Some("node-a".into()), zone: Some("z1".into()), stamp: false },
                Peer { addr: at("10.1.0.12:7878"), name: Some("agent-b".into()), zone: None, stamp: false },
                Peer::at(at("10.1.0.15:7878")),
            ]
        );
        assert_eq!(peers_of(&s, &PortSel::Name("http".into()), 1)[0].addr, at("10.1.0.11:9878"));
        assert!(peers_of(&s, &PortSel::Name("nope".into()), 1).is_empty());
        assert_eq!(peers_of(&s, &PortSel::Number(5), 1)[0].addr.port(), 5);
    }

    /// A slice's only port is the probe port whatever its name, and a label of the longest
    /// length accepted is kept (one more byte and it is dropped).
    #[test]
    fn an_only_port_and_the_longest_label() {
        let long = "n".repeat(MAX_LABEL);
        let json = format!(
            r#"{{"addressType": "IPv6", "ports": [{{"name": "http", "port": 9}}],
                 "endpoints": [{{"addresses": ["::1"], "nodeName": "{long}", "zone": "{long}x"}}]}}"#
        );
        let s: EndpointSlice = serde_json::from_str(&json).unwrap();
        let p = peers_of(&s, &PortSel::Auto, 7878);
        assert_eq!(p, vec![Peer { addr: "[::1]:9".parse().unwrap(), name: Some(long), zone: None, stamp: false }]);
    }

    #[test]
    fn fqdn_slices_and_empty_ones_name_nobody() {
        let s: EndpointSlice =
            serde_json::from_str(r#"{"addressType": "FQDN", "endpoints": [{"addresses": ["a.b"]}]}"#).unwrap();
        assert!(peers_of(&s, &PortSel::Auto, 7878).is_empty());
        let s: EndpointSlice = serde_json::from_str(r#"{"addressType": "IPv4", "endpoints": null}"#).unwrap();
        assert!(peers_of(&s, &PortSel::Auto, 7878).is_empty());
    }

    #[test]
    fn watch_events_and_lists_parse() {
        let e: WatchEvent = serde_json::from_str(&format!(r#"{{"type": "MODIFIED", "object": {SLICE}}}"#)).unwrap();
        assert_eq!(e.kind, "MODIFIED");
        let s: EndpointSlice = serde_json::from_value(e.object).unwrap();
        assert_eq!(s.metadata.name, "agents-abc");
        let l: SliceList =
            serde_json::from_str(r#"{"metadata": {"resourceVersion": "7", "continue": "x"}, "items": []}"#).unwrap();
        assert_eq!((l.metadata.resource_version.as_str(), l.metadata.continue_token.as_deref()), ("7", Some("x")));
    }
}
