//! The network-namespace harness (feature `netns-tests`, root and iproute2): namespaces,
//! veth pairs and wirebench processes that are removed on drop, failure included. Names
//! carry the process id and the test's tag, so tests can run in parallel.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_wirebench");

/// Held by the tests that run many processes at once (the mesh's six agents and Prometheus,
/// the Kubernetes API server), so they do not also run at the same time as each other.
pub(crate) fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Namespaces and processes that are removed on drop, failure included.
pub(crate) struct Lab {
    tag: String,
    namespaces: Vec<String>,
    children: Vec<Child>,
    root_links: Vec<String>,
}

/// A counter of the root qdisc on `dev` in `ns` as `tc -s qdisc` prints it: the number after
/// `label` (`Sent`: bytes, `dropped`: packets).
pub(crate) fn qdisc_counter(ns: &str, dev: &str, label: &str) -> u64 {
    let out = Command::new("ip").args(["netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find(&format!("{label} ")).unwrap_or_else(|| panic!("no {label} counter: {text}"));
    text[at + label.len() + 1..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

pub(crate) fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().expect("iproute2 is installed");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Lab {
    pub(crate) fn new(test: &str) -> Self {
        Self {
            tag: format!("wb{}{test}", std::process::id()),
            namespaces: Vec::new(),
            children: Vec::new(),
            root_links: Vec::new(),
        }
    }

    /// Creates namespace `name` (prefixed) with loopback up; returns its full name.
    pub(crate) fn ns(&mut self, name: &str) -> String {
        let full = format!("{}-{name}", self.tag);
        let _ = Command::new("ip").args(["netns", "del", &full]).output();
        sh(&["ip", "netns", "add", &full]);
        self.namespaces.push(full.clone());
        sh(&["ip", "-n", &full, "link", "set", "lo", "up"]);
        full
    }

    /// A veth pair between two namespaces, addressed and up.
    pub(crate) fn link(a: &str, a_if: &str, a_ip: &str, b: &str, b_if: &str, b_ip: Option<&str>) {
        sh(&["ip", "link", "add", a_if, "netns", a, "type", "veth", "peer", "name", b_if, "netns", b]);
        sh(&["ip", "-n", a, "addr", "add", a_ip, "dev", a_if]);
        sh(&["ip", "-n", a, "link", "set", a_if, "up"]);
        if let Some(ip) = b_ip {
            sh(&["ip", "-n", b, "addr", "add", ip, "dev", b_if]);
        }
        sh(&["ip", "-n", b, "link", "set", b_if, "up"]);
        Self::wait_up(a, a_if);
        Self::wait_up(b, b_if);
    }

    /// Waits (bounded) until `dev` in `ns` is operationally up. Until the kernel's link
    /// watcher has seen the carrier, a new veth still has the noop qdisc and drops what is
    /// sent; on a busy host that lasted past a ping's 1 s discovery.
    pub(crate) fn wait_up(ns: &str, dev: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let out = Command::new("ip").args(["-n", ns, "-o", "link", "show", "dev", dev]).output().expect("ip link");
            let line = String::from_utf8_lossy(&out.stdout);
            if line.contains("state UP") {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{dev} in {ns} is not up within 10 s: {line}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// `n` hosts `h1..hN`, each with `eth0` at `PREFIX.i/24`, on one bridge in a switch
    /// namespace; returns the hosts' namespaces.
    pub(crate) fn bridged_hosts(&mut self, n: usize, prefix: &str) -> Vec<String> {
        let sw = self.ns("sw");
        let hosts: Vec<String> = (1..=n).map(|i| self.ns(&format!("h{i}"))).collect();
        sh(&["ip", "-n", &sw, "link", "add", "br0", "type", "bridge"]);
        sh(&["ip", "-n", &sw, "link", "set", "br0", "up"]);
        for (i, h) in hosts.iter().enumerate() {
            let port = format!("p{i}");
            Self::link(h, "eth0", &format!("{prefix}.{}/24", i + 1), &sw, &port, None);
            sh(&["ip", "-n", &sw, "link", "set", &port, "master", "br0"]);
        }
        hosts
    }

    /// Sets the MTU of `dev` in `ns`.
    pub(crate) fn mtu(ns: &str, dev: &str, mtu: &str) {
        sh(&["ip", "-n", ns, "link", "set", dev, "mtu", mtu]);
    }

    /// Starts `wirebench ARGS` in `ns` and waits for its "listening" line.
    pub(crate) fn serve(&mut self, ns: &str, args: &[&str]) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, BIN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert!(line.contains("listening"), "serve in {ns} did not start: {line:?}");
        self.children.push(child);
    }

    /// The full name of namespace `name` of this lab.
    pub(crate) fn name(&self, name: &str) -> String {
        format!("{}-{name}", self.tag)
    }

    /// Gives the test process (the root namespace) an address on `sw`'s bridge `br0`, so it
    /// reaches the hosts directly; the veth goes with the switch namespace.
    pub(crate) fn attach_root(&mut self, sw: &str, cidr: &str) {
        // One name per attachment: tests of one process run in parallel.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root_if = format!("wb{}r{n}", std::process::id());
        let _ = Command::new("ip").args(["link", "del", &root_if]).output();
        sh(&["ip", "link", "add", &root_if, "type", "veth", "peer", "name", "root0", "netns", sw]);
        sh(&["ip", "-n", sw, "link", "set", "root0", "master", "br0"]);
        sh(&["ip", "-n", sw, "link", "set", "root0", "up"]);
        sh(&["ip", "addr", "add", cidr, "dev", &root_if]);
        sh(&["ip", "link", "set", &root_if, "up"]);
        self.root_links.push(root_if);
    }

    /// Starts any program in `ns` (output discarded); returns its index for [`Self::kill`].
    pub(crate) fn spawn(&mut self, ns: &str, program: &str, args: &[&str]) -> usize {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Kills process `idx` (from [`Self::spawn`], or the last [`Self::serve`]).
    pub(crate) fn kill(&mut self, idx: usize) {
        let _ = self.children[idx].kill();
        let _ = self.children[idx].wait();
    }

    /// The process id of process `idx` (`ip netns exec` execs the program: its own pid).
    pub(crate) fn pid(&self, idx: usize) -> u32 {
        self.children[idx].id()
    }

    /// The index the next [`Self::serve`] or [`Self::spawn`] will get.
    pub(crate) fn next_index(&self) -> usize {
        self.children.len()
    }

    /// Runs `wirebench ARGS` in `ns` to completion.
    pub(crate) fn run(ns: &str, args: &[&str]) -> std::process::Output {
        Command::new("ip").args(["netns", "exec", ns, BIN]).args(args).output().expect("run wirebench")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for l in &self.root_links {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
