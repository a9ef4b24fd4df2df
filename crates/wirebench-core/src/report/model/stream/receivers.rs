//! Which receivers a stream run owes its report, and which of them heard nothing. The
//! report's receiver part is printed from these, whatever rows the run came back with: a
//! receiver owed and missing, or one that heard nothing of what was sent, is said, and the
//! run exits 1.

use super::{ReceiverResult, StreamDirection, StreamResults};
use crate::report::{Report, Results};

/// The rows a stream run with a serve to ask owes its report, by receiver address: per
/// target, the serve's (`forward`: `TARGET`), this client's (`reverse`: `local<-TARGET`),
/// or both (`both`). A `listen` report and a run with no serve to ask (`--no-control`: the
/// receivers report for themselves) owe none.
pub fn owed_receivers(targets: &[String], direction: StreamDirection, no_control: bool) -> Vec<String> {
    if no_control {
        return Vec::new();
    }
    let (forward, reverse) = match direction {
        StreamDirection::Forward => (true, false),
        StreamDirection::Reverse => (false, true),
        StreamDirection::Both => (true, true),
        StreamDirection::Listen => (false, false),
    };
    let mut owed = Vec::new();
    for t in targets {
        if forward {
            owed.push(t.clone());
        }
        if reverse {
            owed.push(format!("local<-{t}"));
        }
    }
    owed
}

/// The targets and `no_control` a stream report's `config` holds (`wirebench stream`
/// writes both; none in a report of another kind).
pub fn owed_of(config: &serde_json::Value) -> (Vec<String>, bool) {
    let targets = config
        .get("targets")
        .and_then(serde_json::Value::as_array)
        .map(|t| t.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let no_control = config.get("no_control").and_then(serde_json::Value::as_bool).unwrap_or(false);
    (targets, no_control)
}

/// Whether a stream or listen report failed to hear a receiver: one owed and missing, one
/// that got nothing of what was sent, or a listen that heard nothing. Such a run exits 1.
pub fn receivers_failed(report: &Report) -> bool {
    let Results::Stream(s) = &report.results else { return false };
    let (targets, no_control) = owed_of(&report.config);
    s.listen_heard_nothing()
        || !s.missing_receivers(&targets, no_control).is_empty()
        || s.receivers.iter().any(ReceiverResult::nothing_arrived)
}

impl StreamResults {
    /// The receivers [`owed_receivers`] names that have no row: their results never came.
    pub fn missing_receivers(&self, targets: &[String], no_control: bool) -> Vec<String> {
        owed_receivers(targets, self.direction, no_control)
            .into_iter()
            .filter(|a| !self.receivers.iter().any(|r| r.addr == *a))
            .collect()
    }

    /// A `listen` run at which no stream message arrived.
    pub fn listen_heard_nothing(&self) -> bool {
        self.listen.is_some() && self.receivers.is_empty()
    }
}

impl ReceiverResult {
    /// Messages were sent to it and none arrived.
    pub const fn nothing_arrived(&self) -> bool {
        self.sent > 0 && self.total.received == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Transport;
    use crate::stream::StreamCounts;

    fn row(addr: &str, sent: u64, received: u64) -> ReceiverResult {
        ReceiverResult {
            addr: addr.into(),
            direction: StreamDirection::Forward,
            sent,
            total: StreamCounts { received, expected: sent, ..StreamCounts::default() },
            publishers: Vec::new(),
            intervals: Vec::new(),
            send_ns: 0,
            recv_ns: 0,
            foreign: 0,
            kernel: None,
            loss_split: None,
            wake: None,
        }
    }

    fn results(direction: StreamDirection, rows: Vec<ReceiverResult>) -> StreamResults {
        StreamResults {
            proto: Transport::Udp,
            direction,
            size: 100,
            publishers: 1,
            rate_per_s: None,
            sender: None,
            receivers: rows,
            search: None,
            sweep: Vec::new(),
            warnings: Vec::new(),
            listen: None,
            generator: None,
        }
    }

    /// A stream report as `wirebench stream` writes it (one target, forward), with `rows`.
    fn report(targets: serde_json::Value, no_control: bool, rows: Vec<ReceiverResult>) -> Report {
        let path = format!("{}/../../fuzz/seeds/report_load/report-stream-search.json", env!("CARGO_MANIFEST_DIR"));
        let mut r = crate::report::read_report(|| std::fs::File::open(&path)).unwrap();
        r.config["targets"] = targets;
        r.config["no_control"] = no_control.into();
        r.results = Results::Stream(results(StreamDirection::Forward, rows));
        r
    }

    #[test]
    fn a_report_owes_the_targets_its_config_names() {
        let config = serde_json::json!({ "targets": ["10.0.0.2:7878", 5, "10.0.0.3:7878"], "no_control": true });
        assert_eq!(owed_of(&config), (vec!["10.0.0.2:7878".to_owned(), "10.0.0.3:7878".to_owned()], true));
        let config = serde_json::json!({ "targets": "10.0.0.2:7878", "no_control": "yes" });
        assert_eq!(owed_of(&config), (Vec::new(), false), "not an array, not a bool: none");
        assert_eq!(owed_of(&serde_json::json!({ "count": 5 })), (Vec::new(), false), "another kind of report");
    }

    /// A run fails when a target owes a row it did not give, a receiver got nothing of what
    /// was sent to it, or a listen heard nothing; a report of another kind never does.
    #[test]
    fn a_run_that_did_not_hear_a_receiver_failed() {
        let t = serde_json::json!(["10.0.0.2:7878"]);
        assert!(!receivers_failed(&report(t.clone(), false, vec![row("10.0.0.2:7878", 10, 10)])));
        assert!(receivers_failed(&report(t.clone(), false, Vec::new())), "the target's row is missing");
        assert!(!receivers_failed(&report(t.clone(), true, Vec::new())), "--no-control: nothing owed");
        assert!(receivers_failed(&report(t.clone(), true, vec![row("10.0.0.9:7878", 10, 0)])), "nothing arrived");
        let mut listen = report(serde_json::json!([]), false, Vec::new());
        assert!(!receivers_failed(&listen), "nothing owed, nothing sent");
        if let Results::Stream(s) = &mut listen.results {
            s.listen = Some(crate::report::ListenTotals::default());
        }
        assert!(receivers_failed(&listen), "a listen that heard nothing");
        listen.results = Results::Hiccup;
        assert!(!receivers_failed(&listen));
    }

    #[test]
    fn every_target_owes_a_row_per_direction_its_data_goes() {
        let t = ["10.0.0.2:7878".to_owned(), "10.0.0.3:7878".to_owned()];
        assert_eq!(owed_receivers(&t, StreamDirection::Forward, false), ["10.0.0.2:7878", "10.0.0.3:7878"]);
        assert_eq!(owed_receivers(&t[..1], StreamDirection::Reverse, false), ["local<-10.0.0.2:7878"]);
        assert_eq!(owed_receivers(&t[..1], StreamDirection::Both, false), ["10.0.0.2:7878", "local<-10.0.0.2:7878"]);
        assert!(owed_receivers(&t, StreamDirection::Forward, true).is_empty(), "--no-control: the receivers report");
        assert!(owed_receivers(&t, StreamDirection::Listen, false).is_empty());
    }

    #[test]
    fn a_target_without_its_row_is_missing() {
        let t = ["10.0.0.2:7878".to_owned(), "10.0.0.3:7878".to_owned()];
        let s = results(StreamDirection::Forward, vec![row("10.0.0.3:7878", 10, 10)]);
        assert_eq!(s.missing_receivers(&t, false), ["10.0.0.2:7878"]);
        assert!(results(StreamDirection::Forward, Vec::new()).missing_receivers(&t, true).is_empty());
        let both = results(StreamDirection::Both, vec![row("10.0.0.2:7878", 1, 1), row("local<-10.0.0.2:7878", 1, 1)]);
        assert!(both.missing_receivers(&t[..1], false).is_empty());
    }

    #[test]
    fn nothing_arrived_is_some_sent_and_none_received() {
        assert!(row("a", 2000, 0).nothing_arrived());
        assert!(!row("a", 2000, 1).nothing_arrived());
        assert!(!row("a", 0, 0).nothing_arrived(), "nothing sent: nothing owed");
        let mut listen = results(StreamDirection::Listen, Vec::new());
        assert!(!listen.listen_heard_nothing(), "not a listen report");
        listen.listen = Some(crate::report::ListenTotals::default());
        assert!(listen.listen_heard_nothing());
    }
}
