//! Peer discovery against a real Kubernetes API server (kube-apiserver and etcd built from
//! the Go module proxy by deploy/kubernetes/test/apiserver.sh; minutes the first time, then
//! cached): the manifests in deploy/kubernetes pass server-side validation, the RBAC there
//! lets the agent's ServiceAccount watch EndpointSlices and nothing else, and an agent adds
//! and drops peers as EndpointSlices are created, changed and deleted by hand.
//!
//! EndpointSlice addresses may not be loopback, so the peers are agents in namespaces on a
//! bridge the test process is attached to (10.77.64.0/24).

#![cfg(feature = "netns-tests")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use wirebench::Shutdown;
use wirebench::mesh::agent::Agent;
use wirebench::mesh::{AgentArgs, AgentConfig};
use wirebench_core::mesh::api::{MatrixReport, PeersReport};

use crate::lab::Lab;
use crate::mesh::{get, wait_for};

const NET: &str = "10.77.64";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One API server for this test, stopped on drop.
struct ApiServer {
    run: tempfile::TempDir,
    port: u16,
    kubeconfig: PathBuf,
}

fn script() -> PathBuf {
    repo().join("deploy/kubernetes/test/apiserver.sh")
}

impl ApiServer {
    fn start() -> Self {
        let run = tempfile::tempdir().unwrap();
        let crds = Command::new(script()).arg("crds").output().expect("apiserver.sh runs");
        assert!(crds.status.success(), "fetching the PodMonitor CRD: {}", String::from_utf8_lossy(&crds.stderr));
        let crds = String::from_utf8_lossy(&crds.stdout).trim().to_owned();
        let port = free_port();
        let out = Command::new(script())
            .arg("start")
            .env("K8S_RUN", run.path())
            .env("APISERVER_PORT", port.to_string())
            .env("ETCD_PORT", free_port().to_string())
            .env("ETCD_PEER_PORT", free_port().to_string())
            .env("CRDS", crds)
            .output()
            .expect("apiserver.sh runs");
        let me = Self { kubeconfig: run.path().join("kubeconfig"), run, port };
        assert!(out.status.success(), "kube-apiserver did not start: {}", String::from_utf8_lossy(&out.stderr));
        me
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use std::io::Write as _;
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.kubectl(args, stdin);
        assert!(o.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").env("K8S_RUN", self.run.path()).output();
    }
}

fn slice(name: &str, endpoints: &[(&str, &str, &str)]) -> String {
    let eps = endpoints
        .iter()
        .map(|(ip, node, zone)| {
            format!(
                "  - addresses: [\"{ip}\"]\n    conditions: {{ready: true}}\n    nodeName: {node}\n    zone: {zone}\n"
            )
        })
        .collect::<Vec<_>>()
        .concat();
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: wirebench\n  labels:\n    kubernetes.io/service-name: wirebench-mesh\n    endpointslice.kubernetes.io/managed-by: wirebench-tests\naddressType: IPv4\nports:\n  - name: probe\n    port: 7878\n    protocol: TCP\n  - name: http\n    port: 9878\n    protocol: TCP\nendpoints:\n{eps}"
    )
}

fn peers(agent: &Agent) -> PeersReport {
    serde_json::from_str(&get(agent.http_addr(), "/v1/peers", None).1).unwrap()
}

fn names(p: &PeersReport) -> Vec<String> {
    p.peers
        .iter()
        .map(|p| format!("{}@{}", p.peer.name.clone().unwrap_or_default(), p.peer.zone.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn endpointslices_add_and_drop_peers_with_the_rbac_we_ship() {
    let _alone = crate::lab::heavy();
    let api = ApiServer::start();
    let deploy = repo().join("deploy/kubernetes");
    // The manifests: the namespace for real, then everything through server-side validation
    // (the PodMonitor against prometheus-operator's CRD); a broken one is refused.
    api.ok(&["apply", "-f", deploy.join("00-namespace.yaml").to_str().unwrap()], None);
    let dry = api.ok(&["apply", "--dry-run=server", "-f", deploy.to_str().unwrap()], None);
    for kind in ["serviceaccount", "role", "rolebinding", "service", "daemonset", "podmonitor", "job"] {
        assert!(dry.contains(&format!("{kind}.")) || dry.contains(&format!("{kind}/")), "{kind} in {dry}");
    }
    let broken = std::fs::read_to_string(deploy.join("30-daemonset.yaml"))
        .unwrap()
        .replace("containerPort: 9878", "containerPort: 99999");
    assert!(!api.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&broken)).status.success());
    // The load Job (load-job.yaml, in the directory above): an Indexed Job; a wrong
    // completion mode is refused by the server, so the dry run does validate it.
    assert!(dry.contains("job.batch/wirebench-load"), "{dry}");
    let job = std::fs::read_to_string(deploy.join("load-job.yaml")).unwrap();
    let broken = job.replace("completionMode: Indexed", "completionMode: Sideways");
    let refused = api.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&broken));
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("completionMode"));
    for f in ["10-rbac.yaml", "20-service.yaml"] {
        api.ok(&["apply", "-f", deploy.join(f).to_str().unwrap()], None);
    }
    // The agent's credentials: a ServiceAccount token, good for slices and nothing else.
    let token = api.ok(&["-n", "wirebench", "create", "token", "wirebench-mesh", "--duration", "1h"], None);
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token.trim()).unwrap();
    let as_agent = |verb: &str, what: &str| {
        api.ok(
            &["auth", "can-i", verb, what, "-n", "wirebench", "--as", "system:serviceaccount:wirebench:wirebench-mesh"],
            None,
        )
    };
    assert_eq!(as_agent("watch", "endpointslices.discovery.k8s.io").trim(), "yes");
    let denied = api.kubectl(
        &["auth", "can-i", "list", "pods", "-n", "wirebench", "--as", "system:serviceaccount:wirebench:wirebench-mesh"],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&denied.stdout).trim(), "no");

    // Two real agents in namespaces, one agent under test in this process.
    let mut lab = Lab::new("k8s");
    let hosts = lab.bridged_hosts(2, NET);
    lab.attach_root(&lab.name("sw"), &format!("{NET}.254/24"));
    let all = format!("{NET}.1:7878,{NET}.2:7878,{NET}.254:7878");
    for (i, h) in hosts.iter().enumerate() {
        let ip = format!("{NET}.{}", i + 1);
        lab.serve(
            h,
            &[
                "mesh",
                "agent",
                "--listen",
                &format!("{ip}:7878"),
                "--http",
                &format!("{ip}:9878"),
                "--peers",
                &all,
                "--window",
                "1s",
                "--timeout",
                "300ms",
            ],
        );
    }
    let ca = api.run.path().join("pki/ca.crt");
    let args = wirebench::flags::parse_mode::<AgentArgs>(
        "agent",
        &[
            "--listen",
            &format!("{NET}.254:7878"),
            "--http",
            "127.0.0.1:0",
            "--name",
            "tester",
            "--peers",
            "k8s:wirebench/wirebench-mesh:probe",
            "--k8s-api",
            &format!("https://127.0.0.1:{}", api.port),
            "--k8s-token-file",
            token_file.to_str().unwrap(),
            "--k8s-ca-file",
            ca.to_str().unwrap(),
            "--window",
            "1s",
            "--timeout",
            "300ms",
            "--rate",
            "20/s",
        ],
    )
    .unwrap();
    let log: wirebench::discovery::Log = Arc::new(|l| eprintln!("agent: {l}"));
    let agent = Agent::start(&AgentConfig::from_args(&args).unwrap(), Shutdown::new(), &log).unwrap();

    // A slice with h1 and the agent itself (left out of its own peers).
    api.ok(
        &["apply", "-f", "-"],
        Some(&slice(
            "manual-a",
            &[(&format!("{NET}.1"), "node-h1", "za"), (&format!("{NET}.254"), "node-tester", "za")],
        )),
    );
    let p = wait_for(Duration::from_secs(30), "h1 from the first slice", || {
        Some(peers(&agent)).filter(|p| p.peers.len() == 1)
    });
    assert_eq!(names(&p), ["node-h1@za"]);
    assert_eq!(p.agent.zone.as_deref(), Some("za"), "the agent takes its own zone from the slice");
    // A second slice adds h2; a change to the first renames h1's zone.
    api.ok(&["apply", "-f", "-"], Some(&slice("manual-b", &[(&format!("{NET}.2"), "node-h2", "zb")])));
    api.ok(
        &["apply", "-f", "-"],
        Some(&slice(
            "manual-a",
            &[(&format!("{NET}.1"), "node-h1", "zc"), (&format!("{NET}.254"), "node-tester", "za")],
        )),
    );
    wait_for(Duration::from_secs(30), "h1 moved and h2 added", || {
        (names(&peers(&agent)) == ["node-h1@zc", "node-h2@zb"]).then_some(())
    });
    // Probing them for real: a window with replies from both.
    wait_for(Duration::from_secs(30), "replies from both", || {
        let m: MatrixReport = serde_json::from_str(&get(agent.http_addr(), "/v1/matrix", None).1).unwrap();
        (m.cells.len() == 4 && m.cells.iter().all(|c| c.received > 0)).then_some(())
    });
    // Deleting a slice drops its peers, without a restart.
    api.ok(&["-n", "wirebench", "delete", "endpointslice", "manual-a"], None);
    wait_for(Duration::from_secs(30), "h1 dropped", || (names(&peers(&agent)) == ["node-h2@zb"]).then_some(()));
    let (_, metrics) = get(agent.http_addr(), "/metrics", None);
    assert!(
        metrics.contains("wirebench_mesh_discovery_errors_total{source=\"k8s:wirebench/wirebench-mesh\"} 0"),
        "{metrics}"
    );
    agent.stop();
    assert_path_exists(&api.kubeconfig);
}

fn assert_path_exists(p: &Path) {
    assert!(p.exists(), "{}", p.display());
}
