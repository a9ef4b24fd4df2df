//! `wirebench proxy` flags: a table. Each impairment has a symmetric flag and an `--up-*`
//! and a `--down-*` override (up is client to upstream).

use wirebench_core::impair::spec::Delay;
use wirebench_core::impair::{Jitter, LossBurst, Percent, Reorder};
use wirebench_core::units::{BitRate, Span};

use crate::addr::Proto;

/// `wirebench proxy` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Impairment (each also as --up-* and --down-*)")]
#[command(
    mut_arg("json", |a| a.help("Write the JSON report (also on Ctrl-C)").help_heading("Run")),
    mut_arg("quiet", |a| a.help("No interval lines, only one line at the end").help_heading("Run")),
    mut_arg("verbose", |a| a.help("Every interval line whole, idle ones too, and every figure of the final report").help_heading("Run"))
)]
pub struct Args {
    /// Where clients connect (host:port; port 0 picks one).
    #[arg(long, help_heading = "Proxy")]
    pub listen: String,
    /// Where the traffic goes (host:port).
    #[arg(long, help_heading = "Proxy")]
    pub upstream: String,
    /// Transport: UDP (one upstream socket per client flow) or TCP (one upstream
    /// connection per accepted connection).
    #[arg(long, value_enum, default_value = "udp", help_heading = "Proxy")]
    pub proto: Proto,

    /// Added delay, both directions (e.g. 10ms).
    #[arg(long, allow_hyphen_values = true)]
    pub delay: Option<Delay>,
    /// Delay variation: 2ms[:normal|uniform|pareto] (normal: the standard deviation;
    /// uniform: ± the value; pareto: heavy tail with that standard deviation).
    #[arg(long, allow_hyphen_values = true)]
    pub jitter: Option<Jitter>,
    /// Random loss (e.g. 1%).
    #[arg(long, allow_hyphen_values = true)]
    pub loss: Option<Percent>,
    /// Bursty loss, Gilbert-Elliott P,R: good to bad with P, back with R (e.g. 1%,25%:
    /// mean loss P/(P+R), mean burst 1/R).
    #[arg(long, value_name = "P,R", allow_hyphen_values = true)]
    pub loss_burst: Option<LossBurst>,
    /// Hold back this share of packets by an extra gap: 0.5%[:1ms].
    #[arg(long, allow_hyphen_values = true)]
    pub reorder: Option<Reorder>,
    /// Send this share of packets twice (e.g. 0.1%).
    #[arg(long, allow_hyphen_values = true)]
    pub duplicate: Option<Percent>,
    /// Token-bucket rate (60.76mbit, 1gbit, 100Mbps, 100MB/s; a bare 100M is bits, as
    /// iperf3's -b).
    #[arg(long, short = 'b')]
    pub rate: Option<BitRate>,
    /// Drop a packet that would wait longer than this in the rate queue [default: 100ms].
    #[arg(long)]
    pub queue_limit: Option<Span>,

    /// Client to upstream: delay.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub up_delay: Option<Delay>,
    /// Client to upstream: jitter.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub up_jitter: Option<Jitter>,
    /// Client to upstream: random loss.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub up_loss: Option<Percent>,
    /// Client to upstream: bursty loss.
    #[arg(long, value_name = "P,R", allow_hyphen_values = true, hide_short_help = true)]
    pub up_loss_burst: Option<LossBurst>,
    /// Client to upstream: reorder.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub up_reorder: Option<Reorder>,
    /// Client to upstream: duplicate.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub up_duplicate: Option<Percent>,
    /// Client to upstream: rate.
    #[arg(long, hide_short_help = true)]
    pub up_rate: Option<BitRate>,
    /// Client to upstream: queue limit.
    #[arg(long, hide_short_help = true)]
    pub up_queue_limit: Option<Span>,

    /// Upstream to client: delay.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub down_delay: Option<Delay>,
    /// Upstream to client: jitter.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub down_jitter: Option<Jitter>,
    /// Upstream to client: random loss.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub down_loss: Option<Percent>,
    /// Upstream to client: bursty loss.
    #[arg(long, value_name = "P,R", allow_hyphen_values = true, hide_short_help = true)]
    pub down_loss_burst: Option<LossBurst>,
    /// Upstream to client: reorder.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub down_reorder: Option<Reorder>,
    /// Upstream to client: duplicate.
    #[arg(long, allow_hyphen_values = true, hide_short_help = true)]
    pub down_duplicate: Option<Percent>,
    /// Upstream to client: rate.
    #[arg(long, hide_short_help = true)]
    pub down_rate: Option<BitRate>,
    /// Upstream to client: queue limit.
    #[arg(long, hide_short_help = true)]
    pub down_queue_limit: Option<Span>,

    /// Seed of the impairment decisions (the same seed and traffic replay the same
    /// decisions) [default: random, printed].
    #[arg(long, help_heading = "Run")]
    pub seed: Option<u64>,
    /// Print requested vs achieved this often.
    #[arg(long, default_value = "1s", help_heading = "Run")]
    pub interval: Span,
    /// Stop after this long [default: until Ctrl-C].
    #[arg(long, short = 'd', visible_short_alias = 't', visible_alias = "time", help_heading = "Run")]
    pub duration: Option<Span>,
    /// Busy-poll while traffic flows (sleeps again after 50 ms idle): the lowest added
    /// latency, at the cost of a core.
    #[arg(long, help_heading = "Run")]
    pub spin: bool,
    /// UDP: forget a client flow (and close its upstream socket) after this long idle.
    #[arg(long, default_value = "60s", help_heading = "Run")]
    pub idle_timeout: Span,
    /// At most this many UDP flows or TCP connections at once.
    #[arg(long, default_value = "1024", help_heading = "Run")]
    pub max_flows: wirebench_core::units::Count,
    /// At most this many bytes of delayed packets held at once (UDP: more are dropped and
    /// counted as "queue full"; TCP: the pumps stop reading). Units: KiB, MiB, GiB.
    #[arg(long, default_value = "64MiB", help_heading = "Run")]
    pub max_held: wirebench_core::units::ByteSize,
    /// The report file, and how much the screen says.
    #[command(flatten)]
    pub output: crate::flags::OutputArgs,
    /// The stall meter beside the run.
    #[command(flatten)]
    pub hiccup: crate::stall::HiccupArgs,
}
