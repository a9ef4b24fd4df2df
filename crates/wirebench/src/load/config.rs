//! `wirebench load` flags, the scenario file and the preset, layered into a validated
//! [`Config`]: command line, then `--scenario FILE.toml`, then `--preset`, then defaults.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::PathBuf;
use std::time::Duration;
use wirebench_core::units::nanos;

use serde::Deserialize;
use wirebench_core::load::{Arrivals, EventType, Link, Mix, Threshold};
use wirebench_core::units::{MsgRate, Span};

use wirebench_core::load::delivery::{Book, PAIR_BYTES};
use wirebench_core::load::msg::{DEFAULT_TEMPLATE, Template};

use super::Args;
use crate::error::UsageError;

/// A scenario file: everything the flags say, in TOML.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `collab-ide` to start from the preset.
    pub preset: Option<String>,
    /// Target URL.
    pub url: Option<String>,
    /// Clients.
    pub clients: Option<u64>,
    /// Per-client rate, e.g. `"2/s"`.
    pub rate: Option<String>,
    /// e.g. `"5m"`.
    pub duration: Option<String>,
    /// e.g. `"10s"`.
    pub ramp: Option<String>,
    /// Members per room.
    pub room_size: Option<u64>,
    /// `fixed` or `poisson`.
    pub arrivals: Option<String>,
    /// e.g. `[50, 96, 99]`.
    pub percentiles: Option<Vec<f64>>,
    /// e.g. `["p96<300ms"]`.
    pub thresholds: Option<Vec<String>>,
    /// Upload link, e.g. `"60.76mbit/10ms"`.
    pub link: Option<String>,
    /// Download link.
    pub link_down: Option<String>,
    /// Message template.
    pub template: Option<String>,
    /// RNG seed.
    pub seed: Option<u64>,
    /// The event mix.
    pub events: Option<Vec<ScenarioEvent>>,
    // -- real apps: the connection flags, as keys (`request::FromFile`)
    /// wss://: also trust these CA certificates (PEM; relative to the scenario's directory).
    pub ca: Option<PathBuf>,
    /// wss://: do not check the server's certificate.
    pub insecure: Option<bool>,
    /// Extra handshake headers, each `"Name: value"`.
    pub headers: Option<Vec<String>>,
    /// Cookies, each `"NAME=VALUE"`.
    pub cookies: Option<Vec<String>>,
    /// Subprotocols offered, in order of preference.
    pub subprotocols: Option<Vec<String>>,
    /// Per-client values, CSV (relative to the scenario's directory).
    pub tokens: Option<PathBuf>,
}

impl Scenario {
    /// The connection keys, paths resolved against `dir` (the file's directory).
    fn connect(&mut self, name: String, dir: &std::path::Path) -> super::request::FromFile {
        let at = |p: PathBuf| if p.is_relative() { dir.join(p) } else { p };
        super::request::FromFile {
            name,
            ca: self.ca.take().map(at),
            insecure: self.insecure.unwrap_or(false),
            headers: self.headers.take().unwrap_or_default(),
            cookies: self.cookies.take().unwrap_or_default(),
            subprotocols: self.subprotocols.take().unwrap_or_default(),
            tokens: self.tokens.take().map(at),
        }
    }
}

impl Scenario {
    /// This scenario over `base`: each key this one leaves out, `base` gives. Written
    /// field by field, so a new key cannot be forgotten here.
    fn over(self, base: Self) -> Self {
        let Self {
            preset,
            url,
            clients,
            rate,
            duration,
            ramp,
            room_size,
            arrivals,
            percentiles,
            thresholds,
            link,
            link_down,
            template,
            seed,
            events,
            ca,
            insecure,
            headers,
            cookies,
            subprotocols,
            tokens,
        } = base;
        Self {
            preset: self.preset.or(preset),
            url: self.url.or(url),
            clients: self.clients.or(clients),
            rate: self.rate.or(rate),
            duration: self.duration.or(duration),
            ramp: self.ramp.or(ramp),
            room_size: self.room_size.or(room_size),
            arrivals: self.arrivals.or(arrivals),
            percentiles: self.percentiles.or(percentiles),
            thresholds: self.thresholds.or(thresholds),
            link: self.link.or(link),
            link_down: self.link_down.or(link_down),
            template: self.template.or(template),
            seed: self.seed.or(seed),
            events: self.events.or(events),
            ca: self.ca.or(ca),
            insecure: self.insecure.or(insecure),
            headers: self.headers.or(headers),
            cookies: self.cookies.or(cookies),
            subprotocols: self.subprotocols.or(subprotocols),
            tokens: self.tokens.or(tokens),
        }
    }
}

/// The scenarios `--preset` names: built-in scenario files, read as a `--scenario` file is.
const PRESETS: &[(&str, &str)] = &[("collab-ide", include_str!("presets/collab-ide.toml"))];

/// The preset `name`'s scenario.
fn preset(name: &str) -> Result<Scenario, UsageError> {
    let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
        return Err(usage(format!("unknown preset '{name}' (known: {})", known.join(", "))));
    };
    toml::from_str(text).map_err(|e| usage(format!("preset {name}: {}", e.message())))
}

/// One event type in a scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioEvent {
    /// Type name.
    pub name: String,
    /// Share.
    pub weight: f64,
    /// Size, bytes.
    pub size: Option<usize>,
    /// Answered to the sender only.
    #[serde(default)]
    pub request: bool,
}

/// A validated load configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The URL as given (may hold `{room}`).
    pub url: String,
    /// Resolved server address.
    pub addr: SocketAddr,
    /// Clients.
    pub clients: u64,
    /// Per-client event rate.
    pub rate: MsgRate,
    /// Sending time after the ramp.
    pub duration: Duration,
    /// Clients join evenly over this.
    pub ramp: Duration,
    /// Members per room.
    pub room_size: u64,
    /// The event mix with sizes and request marks.
    pub mix: Mix,
    /// Fixed interval with random phase, or Poisson.
    pub arrivals: Arrivals,
    /// Upload shaping.
    pub link_up: Option<Link>,
    /// Download shaping.
    pub link_down: Option<Link>,
    /// Percentiles to report.
    pub percentiles: Vec<f64>,
    /// Pass/fail criteria.
    pub thresholds: Vec<Threshold>,
    /// Message layout.
    pub template: Template,
    /// The template text (for the report).
    pub template_text: String,
    /// Seed of every client's RNG.
    pub seed: u64,
    /// JSON report.
    pub json: Option<PathBuf>,
    /// Per-second CSV.
    pub series: Option<PathBuf>,
    /// Summary only.
    pub quiet: bool,
    /// The per-second lines and the report's details (`-v`).
    pub verbose: bool,
    /// Sockets something else in this process holds (an in-process room): counted against
    /// the open-file limit.
    pub extra_fds: u64,
    // -- real apps: TLS, headers, cookies, subprotocols, per-client values
    /// How clients connect: TLS, extra headers, subprotocols, per-client values.
    pub connect: super::request::Connect,
    /// `--shard` and `--start-at`: the part of the scenario this process runs, and when.
    pub sharding: super::shard::Sharding,
}

/// Memory the delivery accounting may take (`Book`: one entry per sender-receiver pair).
pub const MAX_BOOK_BYTES: u64 = 512 << 20;

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

fn span(s: &str, what: &str) -> Result<Duration, UsageError> {
    s.parse::<Span>().map(|s| s.0).map_err(|e| usage(format!("{what}: {e}")))
}

impl Config {
    /// Layers the flags over the scenario file over the preset over the defaults.
    pub fn from_args(a: &Args) -> Result<Self, UsageError> {
        let (file, file_connect) = match &a.scenario {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| usage(format!("cannot read scenario {}: {e}", p.display())))?;
                let mut file = toml::from_str::<Scenario>(&text)
                    .map_err(|e| usage(format!("scenario {}: {}", p.display(), e.message())))?;
                let dir = p.parent().unwrap_or_else(|| std::path::Path::new(""));
                let connect = file.connect(format!("scenario {}", p.display()), dir);
                (file, connect)
            }
            None => (Scenario::default(), super::request::FromFile::default()),
        };
        let file = match a.preset.clone().or_else(|| file.preset.clone()) {
            Some(name) => file.over(preset(&name)?),
            None => file,
        };
        let url = a.url.clone().or(file.url).ok_or_else(|| usage("give the server's URL (ws://HOST:PORT/PATH)"))?;
        let addr = resolve(&url)?;
        let clients = a.clients.map(|c| c.0).or(file.clients).unwrap_or(10);
        if clients == 0 {
            return Err(usage("--clients must be at least 1"));
        }
        let rate = match (&a.rate, &file.rate) {
            (Some(r), _) => *r,
            (None, Some(r)) => r.parse().map_err(|e| usage(format!("scenario rate: {e}")))?,
            (None, None) => MsgRate::new(2.0).expect("constant"),
        };
        let duration = match (&a.duration, &file.duration) {
            (Some(d), _) => d.0,
            (None, Some(d)) => span(d, "scenario duration")?,
            (None, None) => Duration::from_secs(10),
        };
        let ramp = match (&a.ramp, &file.ramp) {
            (Some(d), _) => d.0,
            (None, Some(d)) => span(d, "scenario ramp")?,
            (None, None) => Duration::ZERO,
        };
        let room_size = a.room_size.map(|c| c.0).or(file.room_size).unwrap_or(5);
        if room_size < 2 {
            return Err(usage("--room-size must be at least 2 (a message goes to the other members)"));
        }
        let book = Book::pairs(clients, room_size).saturating_mul(PAIR_BYTES);
        if book > MAX_BOOK_BYTES {
            return Err(usage(format!(
                "{clients} clients in rooms of {room_size}: the delivery accounting keeps {PAIR_BYTES} bytes per \
                 (sender, receiver) pair, {} MB here (at most {} MB): use smaller rooms",
                book >> 20,
                MAX_BOOK_BYTES >> 20
            )));
        }
        let requests = ["save", "open", "list"];
        let mut mix = match (&a.mix, file.events) {
            (Some(m), _) => Mix::parse(m, &requests).map_err(|e| usage(e.to_string()))?,
            (None, Some(ev)) => Mix::new(
                ev.into_iter()
                    .map(|e| EventType {
                        name: e.name,
                        weight: e.weight,
                        request: e.request,
                        size: e.size.unwrap_or(wirebench_core::load::mix::DEFAULT_SIZE),
                    })
                    .collect(),
            )
            .map_err(|e| usage(e.to_string()))?,
            (None, None) => Mix::collab_ide(),
        };
        for super::TypeSize(name, size) in &a.size {
            let s = format!("{name}={size}");
            let bytes = usize::try_from(size.0).unwrap_or(usize::MAX);
            if bytes > 1 << 20 {
                return Err(usage(format!("--size '{s}': at most 1 MiB")));
            }
            let names: Vec<String> =
                if name == "*" { mix.types().iter().map(|t| t.name.clone()).collect() } else { vec![name.to_owned()] };
            for n in names {
                mix.type_mut(&n).ok_or_else(|| usage(format!("--size: '{n}' is not in the mix")))?.size = bytes;
            }
        }
        let arrivals_name = a.arrivals.clone().or(file.arrivals).unwrap_or_else(|| "fixed".into());
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "rate is at most 1e9/s")]
        let interval_ns = (1e9 / rate.per_sec()).round().max(1.0) as u64;
        let arrivals = match arrivals_name.as_str() {
            "fixed" => Arrivals::Fixed { interval_ns },
            "poisson" => Arrivals::Poisson { mean_ns: interval_ns },
            other => return Err(usage(format!("--arrivals '{other}': use fixed or poisson"))),
        };
        let link = |flag: Option<Link>, file: Option<String>, what: &str| -> Result<Option<Link>, UsageError> {
            match (flag, file) {
                (Some(l), _) => Ok(Some(l)),
                (None, Some(s)) => s.parse().map(Some).map_err(|e| usage(format!("scenario {what}: {e}"))),
                (None, None) => Ok(None),
            }
        };
        let link_up = link(a.link, file.link, "link")?;
        let link_down = link(a.link_down, file.link_down, "link_down")?;
        let mut percentiles =
            a.percentiles.clone().or(file.percentiles).unwrap_or_else(|| vec![50.0, 90.0, 99.0, 99.9]);
        if let Some(p) = percentiles.iter().find(|p| !(0.0..=100.0).contains(*p)) {
            return Err(usage(format!("--percentiles: {p} is not in 0..=100")));
        }
        let mut thresholds = Vec::new();
        for t in a.threshold.iter().chain(file.thresholds.iter().flatten()) {
            thresholds.push(t.parse::<Threshold>().map_err(|e| usage(e.to_string()))?);
        }
        for t in &thresholds {
            if let Some(sc) = &t.scope
                && sc != "reply"
                && mix.type_mut(sc).is_none()
            {
                return Err(usage(format!("threshold '{}': '{sc}' is not an event type or 'reply'", t.expr)));
            }
            if let wirebench_core::load::Stat::Percentile(p) = t.stat
                && !percentiles.iter().any(|q| (q - p).abs() < 1e-9)
            {
                percentiles.push(p);
            }
        }
        percentiles.sort_by(f64::total_cmp);
        percentiles.dedup();
        let template_text = a.template.clone().or(file.template).unwrap_or_else(|| DEFAULT_TEMPLATE.into());
        let template = Template::parse(&template_text).map_err(|e| usage(e.to_string()))?;
        // -- real apps
        let connect = super::request::Connect::from_args(a, &file_connect, &url)?;
        let sharding = super::shard::Sharding::from_args(a, clients, room_size)?;
        Ok(Self {
            url,
            addr,
            clients,
            rate,
            duration,
            ramp,
            room_size,
            mix,
            arrivals,
            link_up,
            link_down,
            percentiles,
            thresholds,
            template,
            template_text,
            seed: a.seed.or(file.seed).unwrap_or(1),
            json: a.output.json.clone(),
            series: a.series.clone(),
            quiet: a.output.quiet,
            verbose: a.output.verbose,
            extra_fds: 0,
            // -- real apps
            connect,
            sharding,
        })
    }

    /// Rooms: clients / room size, rounded up.
    pub const fn rooms(&self) -> u64 {
        self.clients.div_ceil(self.room_size)
    }

    /// The URL of room `k`: `{room}` replaced, or `-k` appended to the path.
    pub fn room_url(&self, k: u64) -> String {
        if self.url.contains("{room}") {
            self.url.replace("{room}", &k.to_string())
        } else if self.url.ends_with('/') {
            format!("{}{k}", self.url)
        } else {
            format!("{}-{k}", self.url)
        }
    }

    /// The configuration as the report records it.
    pub fn to_json(&self) -> serde_json::Value {
        let link = |l: Option<Link>| l.map(|l| l.to_string());
        let mut v = serde_json::json!({
            "url": self.url,
            "clients": self.clients,
            "rate_per_client": self.rate.per_sec(),
            "duration_ns": nanos(self.duration),
            "ramp_ns": nanos(self.ramp),
            "room_size": self.room_size,
            "arrivals": self.arrivals.name(),
            "mix": self.mix.types().iter().map(|t| serde_json::json!({
                "name": t.name, "weight": t.weight, "request": t.request, "size": t.size,
            })).collect::<Vec<_>>(),
            "link_up": link(self.link_up),
            "link_down": link(self.link_down),
            "percentiles": self.percentiles,
            "thresholds": self.thresholds.iter().map(|t| t.expr.clone()).collect::<Vec<_>>(),
            "template": self.template_text,
            "seed": self.seed,
            // -- real apps
            "connect": self.connect.to_json(),
        });
        // sharding: the shard is a part's own; the start time is the scenario's
        if let Some(m) = v.as_object_mut() {
            if let Some(s) = self.sharding.shard {
                m.insert("shard".into(), s.to_string().into());
            }
            if let Some(at) = self.sharding.start_at {
                m.insert("start_at".into(), humantime::format_rfc3339_millis(at).to_string().into());
            }
        }
        v
    }
}

/// Checks a `ws://HOST:PORT/PATH` URL and resolves its host once.
pub fn resolve(url: &str) -> Result<SocketAddr, UsageError> {
    // Shown with a password masked: this line reaches terminals and CI logs.
    let shown = wirebench_core::load::vars::mask_password(url);
    let bad = |why: &str| usage(format!("URL '{shown}' {why} (expected ws://HOST:PORT/PATH or wss://...)"));
    let (rest, default_port) = match (url.strip_prefix("ws://"), url.strip_prefix("wss://")) {
        (Some(r), _) => (r, 80),
        (None, Some(r)) => (r, 443),
        (None, None) => return Err(bad("is not a ws:// or wss:// URL")),
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(bad("has no host"));
    }
    if authority.contains('@') {
        return Err(bad("has a user or password before its host (give credentials with --header or --cookie)"));
    }
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())) {
        authority.to_owned()
    } else {
        format!("{authority}:{default_port}")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| bad(&format!("does not resolve: {e}")))?
        .next()
        .ok_or_else(|| bad("does not resolve"))?;
    // The whole URL, per-client values included, is checked by `request::Connect`.
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::{Args, Config};

    const PRESET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/load/presets/collab-ide.toml");

    fn cfg(args: &[&str]) -> Config {
        Config::from_args(&crate::flags::parse_mode::<Args>("load", args).unwrap()).unwrap()
    }

    /// Every field a scenario sets, compared one by one.
    fn assert_same(a: &Config, b: &Config, what: &str) {
        assert_eq!(a.clients, b.clients, "{what}: clients");
        assert_eq!(a.rate, b.rate, "{what}: rate");
        assert_eq!(a.duration, b.duration, "{what}: duration");
        assert_eq!(a.ramp, b.ramp, "{what}: ramp");
        assert_eq!(a.room_size, b.room_size, "{what}: room_size");
        assert_eq!(a.mix, b.mix, "{what}: mix");
        assert_eq!(a.arrivals, b.arrivals, "{what}: arrivals");
        assert_eq!(format!("{:?}", a.link_up), format!("{:?}", b.link_up), "{what}: link_up");
        assert_eq!(format!("{:?}", a.link_down), format!("{:?}", b.link_down), "{what}: link_down");
        assert_eq!(a.percentiles, b.percentiles, "{what}: percentiles");
        assert_eq!(format!("{:?}", a.thresholds), format!("{:?}", b.thresholds), "{what}: thresholds");
        assert_eq!(a.template_text, b.template_text, "{what}: template");
        assert_eq!(a.seed, b.seed, "{what}: seed");
        assert_eq!((&a.url, a.addr), (&b.url, b.addr), "{what}: url");
    }

    /// The preset's file, read as a user's scenario, gives the config the preset gives.
    #[test]
    fn the_preset_file_is_the_preset() {
        let url = "ws://127.0.0.1:9/r";
        for extra in [&[][..], &["--clients", "7"], &["--duration", "3s", "--percentiles", "50,90"], &["--mix", "a=1"]]
        {
            let preset = cfg(&[&[url, "--preset", "collab-ide"], extra].concat());
            let file = cfg(&[&[url, "--scenario", PRESET], extra].concat());
            assert_same(&preset, &file, &format!("{extra:?}"));
        }
    }

    /// The preset has the values docs/modes/load.md gives it, and a user's file and the
    /// flags go over it.
    #[test]
    fn the_preset_has_its_documented_values() {
        let c = cfg(&["ws://127.0.0.1:9/r", "--preset", "collab-ide"]);
        assert_eq!((c.clients, c.rate.per_sec(), c.duration.as_secs(), c.room_size), (50, 2.0, 300, 5));
        assert_eq!(c.percentiles, [50.0, 96.0, 99.0]);
        let mix: Vec<(&str, f64, bool)> =
            c.mix.types().iter().map(|t| (t.name.as_str(), t.weight, t.request)).collect();
        assert_eq!(
            mix,
            [
                ("cursor", 40.0, false),
                ("modify", 30.0, false),
                ("save", 10.0, true),
                ("open", 10.0, true),
                ("list", 7.0, true),
                ("comment", 2.5, false),
                ("question", 0.5, false),
            ]
        );
        assert!(c.mix.types().iter().all(|t| t.size == wirebench_core::load::mix::DEFAULT_SIZE));
        assert_eq!(c.mix, wirebench_core::load::Mix::collab_ide(), "the default mix is the preset's");
        let plain = cfg(&["ws://127.0.0.1:9/r"]);
        assert_eq!((plain.clients, plain.duration.as_secs()), (10, 10), "no preset: the defaults");
        assert_eq!(plain.percentiles, [50.0, 90.0, 99.0, 99.9]);
        let e =
            Config::from_args(&crate::flags::parse_mode::<Args>("load", &["ws://h:1/r", "--preset", "nope"]).unwrap())
                .unwrap_err();
        assert_eq!(e.0, "unknown preset 'nope' (known: collab-ide)");
    }
}
