//! The agent's stall samples: by default the prober's own send-slot wake-ups, so
//! an agent has no meter thread and no wake-ups of its own for them; a meter thread only
//! with `--hiccup-interval` (as before). The figures on `/metrics` from either source:
//! `mesh::the_agents_stall_samples_are_on_metrics_per_window_and_off_with_no_hiccup`.

use std::process::Child;
use std::time::Duration;

/// A `wirebench mesh agent` process, stopped by SIGTERM (or killed) when dropped.
struct AgentProcess(Child);

impl AgentProcess {
    /// Starts one on loopback (a peer that never answers) and waits for its first line:
    /// every thread of the agent is started before it is printed.
    fn start(extra: &[&str]) -> Self {
        let (child, line) = crate::mesh::agent_process(&[&crate::mesh::LONE_AGENT[..], extra].concat());
        let me = Self(child);
        assert!(line.contains("listening"), "{line}");
        me
    }

    /// Its threads' names (`/proc/PID/task/*/comm`), sorted, once each has its own: a new
    /// thread names itself when it first runs, so until then it shows the process's name,
    /// which only the main thread keeps (a bounded wait for that condition).
    fn threads(&self) -> Vec<String> {
        crate::mesh::wait_for(Duration::from_secs(10), "every thread named", || {
            let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", self.0.id()))
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
                .map(|s| s.trim_end().to_owned())
                .collect();
            names.sort();
            (names.iter().filter(|n| *n == "wirebench").count() == 1).then_some(names)
        })
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).unwrap());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        // Bounded: an agent exits within a second of SIGTERM (mesh::sigterm_stops_an_agent_within_a_second).
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::park_timeout(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl AgentProcess {
    /// A thread's voluntary context switches (`/proc/PID/task/TID/status`), by name.
    fn voluntary_switches(&self, name: &str) -> u64 {
        let task = format!("/proc/{}/task", self.0.id());
        let dir = std::fs::read_dir(&task)
            .unwrap()
            .filter_map(Result::ok)
            .find(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == name));
        let status = std::fs::read_to_string(dir.expect("the thread").path().join("status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a count")
    }
}

/// The prober sleeps to its slot timer: each wait blocks (a voluntary switch) until the
/// slot. A timer armed on the wrong clock (in the past) kept it readable, and the prober
/// spun through its waits without ever blocking (48 to 91 % of a core, `bench/mesh.sh`).
#[test]
fn the_prober_blocks_in_its_waits_for_the_slot_timer() {
    let agent = AgentProcess::start(&[]);
    let names = agent.threads();
    assert!(names.iter().any(|n| n == "mesh-prober"), "{names:?}");
    let before = agent.voluntary_switches("mesh-prober");
    // At least its 100 ms housekeeping ticks: 5 blocking waits within a bounded wait.
    crate::mesh::wait_for(Duration::from_secs(10), "the prober blocking in its waits", || {
        (agent.voluntary_switches("mesh-prober") >= before + 5).then_some(())
    });
}

#[test]
fn an_agent_by_default_has_no_stall_meter_thread_and_has_one_with_an_explicit_interval() {
    let names = AgentProcess::start(&[]).threads();
    assert!(names.iter().any(|n| n == "mesh-prober"), "{names:?}");
    assert!(!names.iter().any(|n| n == "hiccup"), "the prober's wake-ups are the samples: {names:?}");
    let names = AgentProcess::start(&["--hiccup-interval", "10ms"]).threads();
    assert_eq!(names.iter().filter(|n| *n == "hiccup").count(), 1, "{names:?}");
    let names = AgentProcess::start(&["--no-hiccup"]).threads();
    assert!(!names.iter().any(|n| n == "hiccup"), "{names:?}");
}
