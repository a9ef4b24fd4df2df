//! Peers from a Kubernetes Service's EndpointSlices: list, then watch from the list's
//! resource version (bookmarks on), re-watching when the server ends a watch and
//! re-listing when it says the version is gone (410). Authenticated with a ServiceAccount
//! token read from its file before every list (projected tokens rotate), over TLS checked
//! against the cluster's CA. The RBAC it needs: `get`, `list`, `watch` on
//! `discovery.k8s.io/endpointslices` (deploy/kubernetes/rbac.yaml).
//!
//! Bounds: a list at most 64 MiB a page, one watch line at most 4 MiB (split as it comes,
//! each byte looked at once: core `mesh::lines`), at most 20,000 slices and 20,000 peers held
//! whatever the pages or events (`within_bounds`), a watch silent for more than 5 minutes is dropped (the
//! server ends its own after 4), back-off from 1 s to 30 s.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use http_body_util::BodyExt as _;
use hyper::Uri;
use wirebench_core::mesh::endpoints::{EndpointSlice, PortSel, SliceList, WatchEvent, peers_of};
use wirebench_core::mesh::lines::Lines;
use wirebench_core::mesh::peer::{MAX_PEERS, Peer};

use super::{Board, Log, sleep_or_stop};
use crate::error::UsageError;
use crate::http_client::HttpClient;
use crate::shutdown::Shutdown;

const MAX_LIST_BYTES: usize = 64 << 20;
const MAX_LINE_BYTES: usize = 4 << 20;
const WATCH_SECONDS: u64 = 240;
const WATCH_SILENCE: Duration = Duration::from_secs(300);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Where a pod finds its ServiceAccount.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// `k8s:NAMESPACE/SERVICE[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Namespace.
    pub namespace: String,
    /// Service name (the slices' `kubernetes.io/service-name` label).
    pub service: String,
    /// Which slice port is the probe port.
    pub port: PortSel,
}

fn dns_label(what: &str, v: &str) -> Result<String, String> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if ok { Ok(v.to_owned()) } else { Err(format!("'{v}' is not a Kubernetes {what} name")) }
}

impl Spec {
    /// Parses `NAMESPACE/SERVICE[:PORT]` (PORT a name or a number).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (ns, rest) = s.split_once('/').ok_or("expected k8s:NAMESPACE/SERVICE[:PORT]")?;
        let (svc, port) = match rest.split_once(':') {
            Some((svc, p)) => (
                svc,
                match p.parse::<u16>() {
                    Ok(0) => return Err("port 0".into()),
                    Ok(n) => PortSel::Number(n),
                    Err(_) => PortSel::Name(dns_label("port", p)?),
                },
            ),
            None => (rest, PortSel::Auto),
        };
        Ok(Self { namespace: dns_label("namespace", ns)?, service: dns_label("service", svc)?, port })
    }
}

/// The flags that say how to reach the API server for `k8s:` peers (`mesh agent`, `relay`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Flags {
    /// Kubernetes API for k8s: peers [default: in-cluster].
    #[arg(long, env = "WIREBENCH_K8S_API")]
    pub k8s_api: Option<String>,
    /// ServiceAccount token file [default: in-cluster].
    #[arg(long, env = "WIREBENCH_K8S_TOKEN_FILE")]
    pub k8s_token_file: Option<PathBuf>,
    /// The API's CA bundle [default: in-cluster].
    #[arg(long, env = "WIREBENCH_K8S_CA_FILE")]
    pub k8s_ca_file: Option<PathBuf>,
}

impl Flags {
    /// The access these flags give (in a pod, what the pod has).
    pub fn access(&self) -> Result<Access, UsageError> {
        Access::from_flags(self.k8s_api.as_deref(), self.k8s_token_file.clone(), self.k8s_ca_file.clone())
    }
}

/// How to reach the API server.
#[derive(Debug, Clone)]
pub struct Access {
    /// `https://host:port`.
    pub api: Uri,
    /// The bearer token's file.
    pub token_file: PathBuf,
    /// The CA bundle (PEM).
    pub ca_pem: Vec<u8>,
}

impl Access {
    /// From flags, falling back to what a pod has (`KUBERNETES_SERVICE_HOST`/`_PORT` and its
    /// ServiceAccount directory).
    pub fn from_flags(
        api: Option<&str>,
        token_file: Option<PathBuf>,
        ca_file: Option<PathBuf>,
    ) -> Result<Self, UsageError> {
        let api = if let Some(a) = api {
            a.to_owned()
        } else {
            let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
                UsageError("k8s: peers need --k8s-api (or running in a pod: KUBERNETES_SERVICE_HOST)".into())
            })?;
            let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
            if host.contains(':') { format!("https://[{host}]:{port}") } else { format!("https://{host}:{port}") }
        };
        let api: Uri = api.parse().map_err(|_| UsageError(format!("--k8s-api '{api}' is not a URL")))?;
        if api.scheme_str() != Some("https") {
            return Err(UsageError(format!("--k8s-api '{api}': the API is https")));
        }
        let ca_file = ca_file.unwrap_or_else(|| PathBuf::from(SA_DIR).join("ca.crt"));
        let ca_pem = crate::tls::read_pem(&ca_file, "CA file")?;
        HttpClient::with_ca(&ca_pem).map_err(|e| UsageError(format!("{}: {e:#}", ca_file.display())))?;
        Ok(Self { api, token_file: token_file.unwrap_or_else(|| PathBuf::from(SA_DIR).join("token")), ca_pem })
    }

    fn token(&self) -> anyhow::Result<String> {
        let t = super::read_small(&self.token_file)?;
        let t = t.trim();
        anyhow::ensure!(!t.is_empty() && t.len() <= 64 << 10, "{}: no token", self.token_file.display());
        Ok(t.to_owned())
    }
}

fn url(a: &Access, spec: &Spec, query: &str) -> anyhow::Result<Uri> {
    format!(
        "{}apis/discovery.k8s.io/v1/namespaces/{}/endpointslices?labelSelector={}&{query}",
        a.api.to_string().trim_end_matches('/').to_owned() + "/",
        spec.namespace,
        crate::http_client::query_value(&format!("kubernetes.io/service-name={}", spec.service))
    )
    .parse()
    .context("API URL")
}

type Slices = BTreeMap<String, Vec<Peer>>;

/// A Service's slices and their peers are refused past [`MAX_PEERS`] each, as a list or a
/// file is: however many pages a list has or slices a watch adds, what discovery holds stays
/// bounded (the source then errs, keeps its last list, and lists again after a back-off).
fn within_bounds(slices: &Slices) -> anyhow::Result<()> {
    let peers: usize = slices.values().map(Vec::len).sum();
    anyhow::ensure!(
        slices.len() <= MAX_PEERS && peers <= MAX_PEERS,
        "{} slices with {peers} peers: more than {MAX_PEERS}",
        slices.len()
    );
    Ok(())
}

/// Lists every slice (paging by 500); returns them and the list's resource version.
async fn list(
    client: &HttpClient,
    access: &Access,
    spec: &Spec,
    token: &str,
    port: u16,
) -> anyhow::Result<(Slices, String)> {
    let mut slices = Slices::new();
    let mut cont: Option<String> = None;
    loop {
        let query = cont.as_deref().map_or_else(
            || "limit=500".to_owned(),
            |t| format!("limit=500&continue={}", crate::http_client::query_value(t)),
        );
        let (status, body) =
            client.get(&url(access, spec, &query)?, Some(token), MAX_LIST_BYTES, REQUEST_TIMEOUT).await?;
        if status != 200 {
            bail!("list endpointslices: HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
        }
        let list: SliceList = serde_json::from_slice(&body).context("list endpointslices: bad JSON")?;
        for s in &list.items {
            slices.insert(s.metadata.name.clone(), peers_of(s, &spec.port, port));
        }
        within_bounds(&slices)?;
        match list.metadata.continue_token.filter(|t| !t.is_empty()) {
            Some(t) => cont = Some(t),
            None => return Ok((slices, list.metadata.resource_version)),
        }
    }
}

/// How a watch ended.
enum End {
    /// The server closed it (its timeout): watch again from the last version.
    Closed,
    /// 410: the version is gone: list again.
    Gone,
    /// Shutdown.
    Stopped,
}

fn publish(board: &Board, i: usize, slices: &Slices, log: &Log, what: &str) {
    let diff = board.publish(i, slices.values().flatten().cloned().collect());
    if !diff.is_empty() {
        log(format!("peers {diff} from {what}"));
    }
}

#[expect(clippy::too_many_arguments, reason = "one watch's context")]
async fn watch(
    client: &HttpClient,
    access: &Access,
    spec: &Spec,
    token: &str,
    port: u16,
    rv: &mut String,
    slices: &mut Slices,
    ctx: (&Board, usize, &Shutdown, &Log),
) -> anyhow::Result<End> {
    let (board, idx, shutdown, log) = ctx;
    let query = format!(
        "watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&resourceVersion={}",
        crate::http_client::query_value(rv)
    );
    let resp = client.open(&url(access, spec, &query)?, Some(token), REQUEST_TIMEOUT).await?;
    if resp.status() == 410 {
        return Ok(End::Gone);
    }
    if resp.status() != 200 {
        bail!("watch endpointslices: HTTP {}", resp.status());
    }
    let mut body = resp.into_body();
    let mut lines = Lines::new(MAX_LINE_BYTES);
    let what = format!("k8s:{}/{}", spec.namespace, spec.service);
    loop {
        // Each frame restarts the silence deadline; the stop wakes the wait itself.
        let frame = tokio::select! {
            f = body.frame() => f,
            () = shutdown.stopped() => return Ok(End::Stopped),
            () = tokio::time::sleep(WATCH_SILENCE) => bail!("watch silent for 5 minutes"),
        };
        let Some(frame) = frame else { return Ok(End::Closed) };
        let Ok(data) = frame.map_err(|e| anyhow!("watch: {e}"))?.into_data() else { continue };
        lines.push(&data);
        while let Some(one) = lines.next_line().map_err(|_| anyhow!("watch: an event longer than 4 MiB"))? {
            if one.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let ev: WatchEvent = serde_json::from_slice(one).context("watch: bad event")?;
            match ev.kind.as_str() {
                "ADDED" | "MODIFIED" | "DELETED" => {
                    let s: EndpointSlice = serde_json::from_value(ev.object).context("watch: bad slice")?;
                    rv.clone_from(&s.metadata.resource_version);
                    if ev.kind == "DELETED" {
                        slices.remove(&s.metadata.name);
                    } else {
                        slices.insert(s.metadata.name.clone(), peers_of(&s, &spec.port, port));
                        within_bounds(slices)?;
                    }
                    publish(board, idx, slices, log, &what);
                }
                "BOOKMARK" => {
                    if let Some(v) = ev.object.pointer("/metadata/resourceVersion").and_then(|v| v.as_str()) {
                        v.clone_into(rv);
                    }
                }
                "ERROR" => {
                    if ev.object.get("code").and_then(serde_json::Value::as_u64) == Some(410) {
                        return Ok(End::Gone);
                    }
                    bail!("watch error: {}", ev.object);
                }
                other => bail!("watch: unknown event type {other}"),
            }
        }
    }
}

/// Lists and watches until `shutdown`.
pub(super) async fn run(
    spec: &Spec,
    access: Option<&Access>,
    port: u16,
    board: &Board,
    i: usize,
    shutdown: &Shutdown,
    log: &Log,
) {
    let what = format!("k8s:{}/{}", spec.namespace, spec.service);
    let client = access.map(|a| (a, HttpClient::with_ca(&a.ca_pem)));
    let Some((a, Ok(c))) = client else {
        board.error(i);
        log(format!("discovery {what}: no usable Kubernetes API access"));
        return;
    };
    let mut backoff = Duration::from_secs(1);
    let mut last_error = String::new();
    loop {
        let result: anyhow::Result<bool> = async {
            let token = a.token()?;
            let (mut slices, mut rv) = list(&c, a, spec, &token, port).await?;
            publish(board, i, &slices, log, &what);
            loop {
                match watch(&c, a, spec, &token, port, &mut rv, &mut slices, (board, i, shutdown, log)).await? {
                    End::Closed => {}
                    End::Gone => return Ok(false),
                    End::Stopped => return Ok(true),
                }
            }
        }
        .await;
        match result {
            Ok(true) => return,
            Ok(false) => backoff = Duration::from_secs(1),
            Err(e) => {
                board.error(i);
                let e = format!("{e:#}");
                if e != last_error {
                    log(format!("discovery {what}: {e} (keeping the last list; retrying)"));
                    last_error = e;
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
        if !sleep_or_stop(backoff, shutdown).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let s = Spec::parse("wirebench/agents:probe").unwrap();
        assert_eq!(
            (s.namespace.as_str(), s.service.as_str(), s.port),
            ("wirebench", "agents", PortSel::Name("probe".into()))
        );
        assert_eq!(Spec::parse("a/b:7878").unwrap().port, PortSel::Number(7878));
        assert_eq!(Spec::parse("a/b").unwrap().port, PortSel::Auto);
        for bad in ["ab", "A/b", "a/-b", "a/b:0", "a/b:Bad_Name", "/b"] {
            assert!(Spec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slices_and_peers_are_bounded() {
        let ip = |i: usize| std::net::Ipv4Addr::from(0x0a00_0000 + u32::try_from(i).unwrap());
        let peer = |i: usize| Peer::at(std::net::SocketAddr::from((ip(i), 7878)));
        let mut slices = Slices::new();
        slices.insert("a".into(), (0..MAX_PEERS / 2).map(peer).collect());
        slices.insert("b".into(), (0..MAX_PEERS / 2).map(peer).collect());
        assert!(within_bounds(&slices).is_ok(), "20,000 peers: at the cap");
        slices.insert("c".into(), vec![peer(1)]);
        assert!(within_bounds(&slices).is_err(), "one more peer");
        let empty: Slices = (0..=MAX_PEERS).map(|i| (format!("s{i}"), Vec::new())).collect();
        assert!(within_bounds(&empty).is_err(), "20,001 empty slices");
    }
}
