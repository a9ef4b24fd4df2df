//! Which format `/metrics` answers in, from the scraper's `Accept` header, and the
//! Prometheus text format 0.0.4 made from the OpenMetrics text the encoder writes.
//!
//! Prometheus asks for protobuf first when its native histograms are on, else OpenMetrics
//! first; other scrapers (and `curl`) send no preference and expect text 0.0.4. Formats:
//! <https://prometheus.io/docs/instrumenting/exposition_formats/>.

use std::fmt::Write as _;

/// A format `/metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4: the default.
    Text,
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
    /// Length-delimited `io.prometheus.client.MetricFamily` messages, with native histograms.
    Protobuf,
}

impl Format {
    /// The `Content-Type` of an answer in this format.
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Text => "text/plain; version=0.0.4; charset=utf-8",
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
        }
    }
}

/// The format one media range of an `Accept` header names, if it is one this side serves.
fn format_of(range: &str) -> Option<(Format, f64)> {
    let mut parts = range.split(';').map(str::trim);
    let kind = parts.next()?.to_ascii_lowercase();
    let (mut q, mut version, mut proto, mut encoding) = (1.0, None, None, None);
    for p in parts {
        let Some((k, v)) = p.split_once('=') else { continue };
        let v = v.trim().trim_matches('"');
        match k.trim().to_ascii_lowercase().as_str() {
            // A malformed weight makes the range unacceptable rather than preferred.
            "q" => q = v.parse::<f64>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0),
            "version" => version = Some(v.to_owned()),
            "proto" => proto = Some(v.to_owned()),
            "encoding" => encoding = Some(v.to_owned()),
            _ => {}
        }
    }
    let format = match kind.as_str() {
        "application/vnd.google.protobuf"
            if proto.as_deref() == Some("io.prometheus.client.MetricFamily")
                && encoding.as_deref() == Some("delimited") =>
        {
            Format::Protobuf
        }
        "application/openmetrics-text" if version.as_deref().is_none_or(|v| v == "1.0.0" || v == "0.0.1") => {
            Format::OpenMetrics
        }
        "text/plain" | "text/*" | "*/*" if version.as_deref().is_none_or(|v| v == "0.0.4") => Format::Text,
        _ => return None,
    };
    Some((format, q))
}

/// The format to answer an `Accept` header with: the served format of the highest weight
/// (the first of equal weights), or text 0.0.4 when none is acceptable or there is no header.
pub fn negotiate(accept: Option<&str>) -> Format {
    let mut best: Option<(Format, f64)> = None;
    for (f, q) in accept.unwrap_or("").split(',').filter_map(format_of) {
        if q > 0.0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((f, q));
        }
    }
    best.map_or(Format::Text, |(f, _)| f)
}

/// Text 0.0.4 from OpenMetrics text (as the `prometheus-client` encoder writes it: each
/// family's `# HELP` then `# TYPE`, samples already named as 0.0.4 names them). Counters and
/// infos are declared under their samples' names (`x_total` a counter, `x_info` a gauge, 0.0.4
/// having no info type); `# UNIT` and `# EOF` go.
pub fn text_from_openmetrics(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" | "histogram" | "summary" => ("", kind),
                _ => ("", "untyped"),
            };
            if let Some((h_name, text)) = help.take()
                && h_name == name
            {
                let _ = writeln!(out, "# HELP {name}{suffix} {}", text.replace('\\', "\\\\"));
            }
            let _ = writeln!(out, "# TYPE {name}{suffix} {kind}");
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Prometheus 2.42 sends without and with `--enable-feature=native-histograms` (as
    /// captured from its scrapes).
    const PROMETHEUS: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    const PROMETHEUS_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn each_format_is_chosen_when_asked_for() {
        assert_eq!(negotiate(Some(PROMETHEUS)), Format::OpenMetrics);
        assert_eq!(negotiate(Some(PROMETHEUS_NATIVE)), Format::Protobuf);
        assert_eq!(negotiate(Some("text/plain; version=0.0.4")), Format::Text);
        assert_eq!(negotiate(Some("application/openmetrics-text")), Format::OpenMetrics);
        assert_eq!(
            negotiate(Some(
                "Application/Vnd.Google.Protobuf; proto=\"io.prometheus.client.MetricFamily\"; encoding=delimited"
            )),
            Format::Protobuf
        );
    }

    #[test]
    fn weights_decide_and_the_first_of_equals_wins() {
        let low_proto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.2,application/openmetrics-text;q=0.7";
        assert_eq!(negotiate(Some(low_proto)), Format::OpenMetrics);
        assert_eq!(negotiate(Some("application/openmetrics-text;q=0.5, text/plain;q=0.5")), Format::OpenMetrics);
        assert_eq!(negotiate(Some("text/plain;q=0.5, application/openmetrics-text;q=0.5")), Format::Text);
        assert_eq!(negotiate(Some("application/openmetrics-text;q=0.3, */*;q=0.4")), Format::Text);
    }

    /// A text version this side does not write is not acceptable, so it does not outweigh
    /// a served format; the one it writes does.
    #[test]
    fn only_text_0_0_4_outweighs_a_lower_served_format() {
        let om = "application/openmetrics-text;q=0.5";
        assert_eq!(negotiate(Some(&format!("text/plain;version=0.0.5, {om}"))), Format::OpenMetrics);
        assert_eq!(negotiate(Some(&format!("text/plain;version=0.0.4, {om}"))), Format::Text);
    }

    /// Each answer's `Content-Type` is a media range that asks for that same format.
    #[test]
    fn each_content_type_names_its_own_format() {
        for f in [Format::Text, Format::OpenMetrics, Format::Protobuf] {
            assert_eq!(format_of(f.content_type()), Some((f, 1.0)), "{f:?}");
        }
    }

    #[test]
    fn nothing_acceptable_falls_back_to_text() {
        for accept in [
            None,
            Some(""),
            Some("application/json"),
            Some("application/openmetrics-text;q=0"),
            Some("application/openmetrics-text;q=banana"),
            Some("application/openmetrics-text;version=2.0.0"),
            Some("text/plain;version=0.0.5"),
            // Protobuf of another message, or not delimited: not what is served.
            Some("application/vnd.google.protobuf;proto=io.prometheus.client.Other;encoding=delimited"),
            Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"),
            Some("application/vnd.google.protobuf"),
            Some(",;,=;q=1"),
        ] {
            assert_eq!(negotiate(accept), Format::Text, "{accept:?}");
        }
    }

    #[test]
    fn text_declares_counters_and_infos_by_their_samples_and_drops_the_openmetrics_lines() {
        let om = "# HELP a_agent This agent\n# TYPE a_agent info\na_agent_info{node=\"n\"} 1\n\
                  # HELP a_sent Probes\n# TYPE a_sent counter\na_sent_total{peer=\"p\"} 3\n\
                  # HELP a_rtt_seconds Round trips \\ all\n# TYPE a_rtt_seconds histogram\n# UNIT a_rtt_seconds seconds\n\
                  a_rtt_seconds_sum 0.5\na_rtt_seconds_count 2\na_rtt_seconds_bucket{le=\"+Inf\"} 2\n\
                  # HELP a_up Up\n# TYPE a_up gauge\na_up 1.0\n# TYPE a_x unknown\na_x 2\n# EOF\n";
        let text = text_from_openmetrics(om);
        assert_eq!(
            text,
            "# HELP a_agent_info This agent\n# TYPE a_agent_info gauge\na_agent_info{node=\"n\"} 1\n\
             # HELP a_sent_total Probes\n# TYPE a_sent_total counter\na_sent_total{peer=\"p\"} 3\n\
             # HELP a_rtt_seconds Round trips \\\\ all\n# TYPE a_rtt_seconds histogram\n\
             a_rtt_seconds_sum 0.5\na_rtt_seconds_count 2\na_rtt_seconds_bucket{le=\"+Inf\"} 2\n\
             # HELP a_up Up\n# TYPE a_up gauge\na_up 1.0\n# TYPE a_x untyped\na_x 2\n"
        );
    }
}
