//! `wirebench mesh status`: pulls the latest window from every agent (or from Prometheus),
//! merges it into the N x N matrix, prints the heatmap and the verdicts, and saves it as a
//! report (`--json`) that `wirebench report --html` draws.
//!
//! Agents are asked [`IN_FLIGHT`] at a time, each bounded by `--timeout` and the stop
//! signal, into a matrix of at most `--max-matrix` bytes; one that does not answer, or
//! answers something that does not add up, has no row, says why, and is named in the
//! verdict (unreachable), as is one past the budget or not asked when it was spent, or not
//! answered before Ctrl-C (skipped). Exit codes, so a script or an alert can act on them: 1 when no agent gave its
//! row (no matrix: every agent unreachable, or Prometheus unreachable or holding no agent's
//! series) or when rows came but no cell in them is judged yet (no window closed since the
//! agents started, or every cell below `--min-probes`: "not judged", never "no problems"),
//! 3 when the verdict names a problem (an unreachable agent among them), else 0. The matrix
//! is printed and saved before either.

use std::cell::Cell;
use std::io::IsTerminal as _;
use std::time::SystemTime;
use wirebench_core::units::nanos;

use futures_util::{Stream, StreamExt as _};
use hyper::Uri;
use wirebench_core::mesh::api::MatrixReport;
use wirebench_core::mesh::matrix::{MatrixBuilder, Refused};
use wirebench_core::report::{MeshResults, Outcome, Report, Results, SCHEMA_VERSION};
use wirebench_core::units::ByteSize;

use super::config::{StatusArgs, StatusConfig};
use crate::ctx::Ctx;
use crate::http_client::HttpClient;
use crate::shutdown::Shutdown;

/// Largest `/v1/matrix` read from one agent.
const MAX_MATRIX_BYTES: usize = 64 << 20;
/// Agents asked at once: at most this many answers are being read (each at most
/// [`MAX_MATRIX_BYTES`]: 1 GiB in all at worst), whatever the number of agents.
pub const IN_FLIGHT: usize = 16;

fn endpoint(base: &Uri, path: &str) -> Uri {
    format!("{}{path}", base.to_string().trim_end_matches('/')).parse().unwrap_or_else(|_| base.clone())
}

/// What became of one agent.
enum Pull {
    /// Its answer, unread as yet.
    Body(bytes::Bytes),
    /// No answer: why.
    Failed(String),
    /// Not asked: the budget was spent before its turn.
    NotAsked,
}

/// One agent's `/v1/matrix`, within `--timeout`.
async fn pull(client: &HttpClient, base: &Uri, token: Option<&str>, timeout: std::time::Duration) -> Pull {
    match client.get(&endpoint(base, "/v1/matrix"), token, MAX_MATRIX_BYTES, timeout).await {
        Ok((200, body)) => Pull::Body(body),
        Ok((401, _)) => Pull::Failed("HTTP 401: the agent wants a token (--token)".to_owned()),
        Ok((status, _)) => Pull::Failed(format!("HTTP {status}")),
        Err(e) => Pull::Failed(format!("{e:#}")),
    }
}

/// Agent `0..n`'s pulls, at most [`IN_FLIGHT`] at a time, in the order they finish; an
/// agent whose turn comes once `spent` is set is not asked.
fn pulls<'a, F, Fut>(n: usize, spent: &'a Cell<bool>, pull: F) -> impl Stream<Item = (usize, Pull)> + Unpin + 'a
where
    F: Fn(usize) -> Fut + 'a,
    Fut: Future<Output = Pull> + 'a,
{
    // `map` runs when a slot is free, right before the pull would start.
    let each = move |i| {
        let started = (!spent.get()).then(|| pull(i));
        async move {
            match started {
                Some(p) => (i, p.await),
                None => (i, Pull::NotAsked),
            }
        }
    };
    Box::pin(futures_util::stream::iter(0..n).map(each).buffer_unordered(IN_FLIGHT))
}

/// Pulls `/v1/matrix` from every agent, [`IN_FLIGHT`] at a time, each within `--timeout`,
/// into a matrix of at most `--max-matrix` bytes. Answers are read one at a time as they
/// come; once one does not fit, the agents not asked yet are not asked. Every agent is
/// either a row or named: unreachable (no answer, or one that does not add up) or skipped
/// (not kept past the budget, not asked after it, or not answered before a stop).
async fn from_agents(cfg: &StatusConfig, stop: &Shutdown) -> (MatrixBuilder, bool) {
    let client = HttpClient::plain();
    let token = cfg.token.as_deref();
    let spent = Cell::new(false);
    let mut pulls = pulls(cfg.agents.len(), &spent, |i| pull(&client, &cfg.agents[i], token, cfg.timeout));
    let mut b = MatrixBuilder::new("agents").with_budget(cfg.max_matrix);
    let mut failed: Vec<Option<(String, bool)>> = vec![None; cfg.agents.len()];
    let mut done = vec![false; cfg.agents.len()];
    let budget = format!("{} is spent", budget_words(cfg.max_matrix));
    let mut stopped = false;
    loop {
        let next = tokio::select! {
            next = pulls.next() => next,
            () = stop.stopped() => {
                stopped = true;
                break;
            }
        };
        let Some((i, got)) = next else { break };
        done[i] = true;
        let why = match got {
            Pull::Body(body) => match serde_json::from_slice::<MatrixReport>(&body) {
                Err(e) => Some((format!("not a matrix: {e}"), false)),
                Ok(m) => match b.add_report(&m) {
                    Ok(()) => None,
                    Err(e @ Refused::Budget { .. }) => {
                        spent.set(true);
                        Some((format!("not kept: {e}"), true))
                    }
                    Err(e) => Some((format!("refused: {e}"), false)),
                },
            },
            Pull::Failed(e) => Some((e, false)),
            Pull::NotAsked => Some((format!("not asked: {budget}"), true)),
        };
        failed[i] = why;
    }
    for (i, base) in cfg.agents.iter().enumerate() {
        let ip = base.host().and_then(|h| h.trim_matches(['[', ']']).parse().ok());
        match (&failed[i], done[i]) {
            (Some((why, false)), _) => b.add_unreachable(ip, &base.to_string(), why),
            (Some((why, true)), _) => b.add_skipped(ip, &base.to_string(), why),
            (None, false) => b.add_skipped(ip, &base.to_string(), "stopped before it answered"),
            (None, true) => {}
        }
    }
    (b, stopped)
}

/// `the matrix budget (--max-matrix 1GiB)`.
pub(super) fn budget_words(max_matrix: usize) -> String {
    format!("the matrix budget (--max-matrix {})", ByteSize(u64::try_from(max_matrix).unwrap_or(u64::MAX)))
}

/// `wirebench mesh status`; returns the exit code ([`exit_code`]).
pub fn run(args: &StatusArgs, ctx: &mut Ctx<'_>) -> anyhow::Result<u8> {
    let cfg = StatusConfig::from_args(args)?;
    let started = SystemTime::now();
    let t0 = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (builder, stopped) = match &cfg.prometheus {
        Some(p) => rt.block_on(super::promql::matrix(
            &HttpClient::plain(),
            p,
            cfg.token.as_deref(),
            cfg.timeout,
            cfg.max_matrix,
            &ctx.shutdown,
        ))?,
        None => rt.block_on(from_agents(&cfg, &ctx.shutdown)),
    };
    let results = builder.finish(&cfg.thresholds);
    let code = exit_code(&results);
    let report = Report {
        schema_version: SCHEMA_VERSION,
        meta: crate::host::meta(&ctx.argv, started, nanos(t0.elapsed())),
        config: serde_json::json!({
            "agents": cfg.agents.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "prometheus": cfg.prometheus.as_ref().map(ToString::to_string),
            "max_loss": cfg.thresholds.max_loss,
            "max_p99_ns": cfg.thresholds.max_p99_ns,
            "min_probes": cfg.thresholds.min_probes,
            "max_matrix_bytes": cfg.max_matrix,
        }),
        outcome: if stopped { Outcome::Interrupted } else { Outcome::Completed },
        results: Results::Mesh(results),
        attribution: None,
    };
    let colour = cfg.color.unwrap_or_else(|| std::io::stdout().is_terminal());
    wirebench_report::text::mesh::mesh(ctx.out, &report, colour)?;
    if let Some(path) = &cfg.json {
        crate::output::write_json(path, &report)?;
    }
    Ok(code)
}

/// 1 without a matrix or without a judged cell in it (nothing to say about the fleet, even
/// with an agent named unreachable), 3 when the verdict names a problem, else 0.
fn exit_code(m: &MeshResults) -> u8 {
    if !m.has_rows() || !m.judged() {
        1
    } else if !m.problems.is_empty() {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    use tokio::sync::oneshot;

    use super::*;

    #[test]
    fn at_most_in_flight_pulls_at_once_and_none_asked_once_spent() {
        let n = 40;
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..n).map(|_| oneshot::channel::<()>()).unzip();
        let receivers = RefCell::new(receivers.into_iter().map(Some).collect::<Vec<_>>());
        let started = RefCell::new(Vec::new());
        let spent = Cell::new(false);
        let mut s = pulls(n, &spent, |i| {
            started.borrow_mut().push(i);
            let rx = receivers.borrow_mut()[i].take().expect("asked once");
            async move {
                let _ = rx.await;
                Pull::Failed(format!("answered {i}"))
            }
        });
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || match Pin::new(&mut s).poll_next(&mut cx) {
            Poll::Ready(Some((i, Pull::NotAsked))) => Some((i, false)),
            Poll::Ready(Some((i, _))) => Some((i, true)),
            Poll::Ready(None) => panic!("ended early"),
            Poll::Pending => None,
        };
        assert_eq!(poll(), None);
        assert_eq!(*started.borrow(), (0..IN_FLIGHT).collect::<Vec<_>>(), "the first IN_FLIGHT, no more");
        let mut senders: Vec<_> = senders.into_iter().map(Some).collect();
        let mut answer = |i: usize| senders[i].take().unwrap().send(()).unwrap();
        answer(3);
        assert_eq!(poll(), Some((3, true)));
        assert_eq!(poll(), None);
        assert_eq!(started.borrow().len(), IN_FLIGHT + 1, "one answered, one more asked");
        spent.set(true);
        answer(5);
        assert_eq!(poll(), Some((5, true)));
        // Every agent whose turn comes now is not asked.
        let mut not_asked = Vec::new();
        while let Some((i, asked)) = poll() {
            assert!(!asked);
            not_asked.push(i);
        }
        not_asked.sort_unstable();
        assert_eq!(not_asked, (IN_FLIGHT + 1..n).collect::<Vec<_>>());
        assert_eq!(started.borrow().len(), IN_FLIGHT + 1);
    }
}
