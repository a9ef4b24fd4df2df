//! `wirebench mesh status`: pulls the latest window from every agent (or from Prometheus),
//! merges it into the N x N matrix, prints the heatmap and the verdicts, and saves it as a
//! report (`--json`) that `wirebench report --html` draws.
//!
//! Agents are asked at once, each bounded by `--timeout`; one that does not answer, or
//! answers something that does not add up, has no row, says why, and is named in the
//! verdict. Exit codes, so a script or an alert can act on them: 1 when no agent gave its
//! row (no matrix: every agent unreachable, or Prometheus unreachable or holding no agent's
//! series) or when rows came but no cell in them is judged yet (no window closed since the
//! agents started, or every cell below `--min-probes`: "not judged", never "no problems"),
//! 3 when the verdict names a problem (an unreachable agent among them), else 0. The matrix
//! is printed and saved before either.

use std::io::IsTerminal as _;
use std::time::SystemTime;

use hyper::Uri;
use wirebench_core::mesh::api::MatrixReport;
use wirebench_core::mesh::matrix::MatrixBuilder;
use wirebench_core::report::{MeshResults, Outcome, Report, Results, SCHEMA_VERSION};

use super::config::{StatusArgs, StatusConfig};
use crate::Ctx;
use crate::http_client::HttpClient;

/// Largest `/v1/matrix` read from one agent.
const MAX_MATRIX_BYTES: usize = 64 << 20;

fn endpoint(base: &Uri, path: &str) -> Uri {
    format!("{}{path}", base.to_string().trim_end_matches('/')).parse().unwrap_or_else(|_| base.clone())
}

/// Pulls `/v1/matrix` from every agent.
async fn from_agents(cfg: &StatusConfig) -> MatrixBuilder {
    let client = HttpClient::plain();
    let token = cfg.token.as_deref();
    let pulls = cfg.agents.iter().map(|base| {
        let client = client.clone();
        async move {
            let url = endpoint(base, "/v1/matrix");
            let got = match client.get(&url, token, MAX_MATRIX_BYTES, cfg.timeout).await {
                Ok((200, body)) => {
                    serde_json::from_slice::<MatrixReport>(&body).map_err(|e| format!("not a matrix: {e}"))
                }
                Ok((401, _)) => Err("HTTP 401: the agent wants a token (--token)".to_owned()),
                Ok((status, _)) => Err(format!("HTTP {status}")),
                Err(e) => Err(format!("{e:#}")),
            };
            (base, got)
        }
    });
    let results = futures_util::future::join_all(pulls).await;
    let mut b = MatrixBuilder::new("agents");
    let mut failed = Vec::new();
    for (base, got) in results {
        match got.and_then(|m| b.add_report(&m).map_err(|e| format!("refused: {e}"))) {
            Ok(()) => {}
            Err(e) => failed.push((base, e)),
        }
    }
    for (base, e) in failed {
        let ip = base.host().and_then(|h| h.trim_matches(['[', ']']).parse().ok());
        b.add_unreachable(ip, &base.to_string(), &e);
    }
    b
}

/// `wirebench mesh status`; returns the exit code ([`exit_code`]).
pub fn run(args: &StatusArgs, ctx: &mut Ctx<'_>) -> anyhow::Result<u8> {
    let cfg = StatusConfig::from_args(args)?;
    let started = SystemTime::now();
    let t0 = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let builder = match &cfg.prometheus {
        Some(p) => rt.block_on(super::promql::matrix(&HttpClient::plain(), p, cfg.token.as_deref(), cfg.timeout))?,
        None => rt.block_on(from_agents(&cfg)),
    };
    let results = builder.finish(&cfg.thresholds);
    let code = exit_code(&results);
    let report = Report {
        schema_version: SCHEMA_VERSION,
        meta: crate::host::meta(&ctx.argv, started, u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)),
        config: serde_json::json!({
            "agents": cfg.agents.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "prometheus": cfg.prometheus.as_ref().map(ToString::to_string),
            "max_loss": cfg.thresholds.max_loss,
            "max_p99_ns": cfg.thresholds.max_p99_ns,
            "min_probes": cfg.thresholds.min_probes,
        }),
        outcome: Outcome::Completed,
        results: Results::Mesh(results),
        attribution: None,
    };
    let colour = cfg.color.unwrap_or_else(|| std::io::stdout().is_terminal());
    wirebench_report::mesh::mesh(ctx.out, &report, colour)?;
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
