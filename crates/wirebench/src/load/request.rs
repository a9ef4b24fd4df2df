//! What a client says when it connects, for real applications: `wss://` (TLS), extra
//! headers (an Authorization, say), cookies, subprotocols, and per-client values in the URL
//! and in header values (`{client}`, the columns of `--tokens FILE.csv`). Everything is
//! parsed and checked once, when the configuration is built (every row of the CSV is tried
//! in every pattern, so a bad token is a usage error up front, not a failed connection),
//! and expanded once per client at connect time; nothing here runs in the send loop.
//!
//! Subprotocols: the server must pick one of those offered. RFC 6455 lets a client go on
//! when the server picks none, but browsers fail the connection then (and must when it picks
//! one not offered), and the app serves browsers: so does `load` (tungstenite's check),
//! counting it as a failed connection with the cause.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, ClientConnection};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue, header};
use wirebench_core::load::vars::{Pattern, Table, mask_password};

use super::Args;
use crate::error::UsageError;
use crate::tls::{self, Trust};

/// Largest `--tokens` file read.
pub const MAX_TOKENS_BYTES: u64 = 64 << 20;

/// Headers the WebSocket handshake sets itself.
const RESERVED: [&str; 6] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
];

/// How clients connect: validated, ready to expand per client.
#[derive(Debug, Clone)]
pub struct Connect {
    /// The URL with `{room}` (inserted as `Config::room_url` does when absent).
    url: Pattern,
    /// The URL's host (TLS name, messages).
    pub host: String,
    /// TLS: the configuration and the name checked against the certificate.
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// Where TLS trust comes from (`None`: ws://).
    pub trust: Option<Trust>,
    /// The `--ca` file.
    pub ca: Option<PathBuf>,
    /// Extra headers, in order (a name's first occurrence replaces the handshake's own).
    headers: Vec<(HeaderName, Pattern)>,
    /// Offered subprotocols, in order of preference.
    pub subprotocols: Vec<String>,
    /// Per-client values.
    pub table: Option<Arc<Table>>,
    /// The `--tokens` file.
    pub tokens: Option<PathBuf>,
    /// Cookie names (for the report; values may be secrets).
    cookies: Vec<String>,
}

fn usage(msg: String) -> UsageError {
    UsageError(msg)
}

/// The URL with a `{room}` placeholder: given, or appended as `-{room}` (`{room}` after a
/// trailing `/`).
fn with_room(url: &str) -> String {
    if url.contains("{room}") {
        url.to_owned()
    } else if url.ends_with('/') {
        format!("{url}{{room}}")
    } else {
        format!("{url}-{{room}}")
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The connection settings of a scenario file (its `ca`, `insecure`, `headers`, `cookies`,
/// `subprotocols` and `tokens` keys), paths resolved against the file's directory.
#[derive(Debug, Clone, Default)]
pub struct FromFile {
    /// `scenario FILE.toml`, for messages.
    pub name: String,
    /// `ca`.
    pub ca: Option<PathBuf>,
    /// `insecure`.
    pub insecure: bool,
    /// `headers`, each `Name: value`.
    pub headers: Vec<String>,
    /// `cookies`, each `NAME=VALUE`.
    pub cookies: Vec<String>,
    /// `subprotocols`.
    pub subprotocols: Vec<String>,
    /// `tokens`.
    pub tokens: Option<PathBuf>,
}

impl FromFile {
    /// How a value of key `key` is named in messages: `scenario s.toml: headers`.
    fn label(&self, key: &str) -> String {
        format!("{}: {key}", self.name)
    }
}

/// `'Name: value'` split and checked; `label` names where it came from (`--header`).
fn parse_header(h: &str, label: &str) -> Result<(HeaderName, String), UsageError> {
    let (name, value) = h.split_once(':').ok_or_else(|| usage(format!("{label} '{h}' is not 'Name: value'")))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| usage(format!("{label} '{h}': '{}' is not a valid header name", name.trim())))?;
    if RESERVED.contains(&name.as_str()) {
        let hint = if name == header::SEC_WEBSOCKET_PROTOCOL { ": use --subprotocol" } else { "" };
        return Err(usage(format!("{label} '{h}': {name} is set by the WebSocket handshake{hint}")));
    }
    Ok((name, value.trim().to_owned()))
}

/// `NAME=VALUE` split and checked.
fn parse_cookie<'a>(c: &'a str, label: &str) -> Result<(&'a str, &'a str), UsageError> {
    let (k, v) = c.split_once('=').ok_or_else(|| usage(format!("{label} '{c}' is not NAME=VALUE")))?;
    let bad_value = v.bytes().any(|b| b.is_ascii_control() || b" \",;\\".contains(&b));
    if !is_token(k) || bad_value {
        return Err(usage(format!(
            "{label} '{c}': the name must be a token and the value free of spaces, quotes, ',', ';' and '\\'"
        )));
    }
    Ok((k, v))
}

impl Connect {
    /// Reads and checks the connection flags for `url` (already checked by `resolve`), over
    /// the scenario file's (`file`): `--ca`, `--tokens` and `--subprotocol` (the whole
    /// list) replace the file's; `--insecure` or the file's turns it on; `--header` and
    /// `--cookie` add to the file's, a name given on the command line replacing the file's
    /// of that name.
    pub fn from_args(a: &Args, file: &FromFile, url: &str) -> Result<Self, UsageError> {
        let secure = url.starts_with("wss://");
        let authority = url.split_once("://").map_or("", |(_, r)| r.split(['/', '?']).next().unwrap_or(""));
        let host = match authority.rsplit_once(':') {
            Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => authority,
        }
        .to_owned();
        let ca = a.ca.clone().or_else(|| file.ca.clone());
        let insecure = a.insecure || file.insecure;
        let (tls, trust) = if secure {
            let (cfg, trust) = tls::client_config(ca.as_deref(), insecure)?;
            (Some((cfg, tls::server_name(&host)?)), Some(trust))
        } else {
            if a.ca.is_some() || a.insecure {
                return Err(usage("--ca and --insecure are for wss:// URLs".into()));
            }
            if ca.is_some() || insecure {
                return Err(usage(format!("{}: ca and insecure are for wss:// URLs", file.name)));
            }
            (None, None)
        };
        let tokens = match (&a.tokens, &file.tokens) {
            (Some(p), _) => Some((p.clone(), "--tokens".to_owned())),
            (None, Some(p)) => Some((p.clone(), file.label("tokens"))),
            (None, None) => None,
        };
        let table = match &tokens {
            Some((p, label)) => Some(Arc::new(read_tokens(p, label)?)),
            None => None,
        };
        let rows_label = tokens.as_ref().map_or_else(String::new, |(_, l)| l.clone());
        let columns = table.as_ref().map_or(&[][..], |t| t.names());
        let url_pattern = Pattern::parse(&with_room(url), columns, true).map_err(|e| usage(format!("URL: {e}")))?;

        let mut from_flags = Vec::with_capacity(a.header.len());
        for h in &a.header {
            from_flags.push(parse_header(h, "--header")?);
        }
        let mut header_text: Vec<(HeaderName, String)> = Vec::new();
        let label = file.label("headers");
        for h in &file.headers {
            let (name, value) = parse_header(h, &label)?;
            if !from_flags.iter().any(|(n, _)| *n == name) {
                header_text.push((name, value));
            }
        }
        header_text.extend(from_flags);
        let mut cookies = Vec::new();
        let mut jar = Vec::new();
        let mut flag_cookies = Vec::with_capacity(a.cookie.len());
        for c in &a.cookie {
            flag_cookies.push(parse_cookie(c, "--cookie")?);
        }
        let label = file.label("cookies");
        for c in &file.cookies {
            let (k, _) = parse_cookie(c, &label)?;
            if !flag_cookies.iter().any(|(f, _)| *f == k) {
                jar.push(c.as_str());
                cookies.push(k.to_owned());
            }
        }
        for (c, (k, _)) in a.cookie.iter().zip(&flag_cookies) {
            jar.push(c.as_str());
            cookies.push((*k).to_owned());
        }
        if !jar.is_empty() {
            let jar = jar.join("; ");
            match header_text.iter_mut().find(|(n, _)| n == header::COOKIE) {
                Some((_, v)) => *v = format!("{v}; {jar}"),
                None => header_text.push((header::COOKIE, jar)),
            }
        }
        let mut headers = Vec::with_capacity(header_text.len());
        for (name, text) in header_text {
            let p = Pattern::parse(&text, columns, false).map_err(|e| usage(format!("header {name}: {e}")))?;
            headers.push((name, p));
        }
        let (offered, label) = if a.subprotocol.is_empty() {
            (&file.subprotocols, file.label("subprotocols"))
        } else {
            (&a.subprotocol, "--subprotocol".to_owned())
        };
        for s in offered {
            if !is_token(s) {
                return Err(usage(format!("{label} '{s}' is not a valid protocol name (an HTTP token)")));
            }
        }
        let mut subprotocols = offered.clone();
        subprotocols.dedup();
        let conn = Self {
            url: url_pattern,
            host,
            tls,
            trust,
            ca,
            headers,
            subprotocols,
            table,
            tokens: tokens.map(|(p, _)| p),
            cookies,
        };
        conn.check_rows(&rows_label)?;
        Ok(conn)
    }

    /// Expands every pattern with every row (client and room 0; their digits are always
    /// valid): a value that cannot go on the wire is refused now.
    fn check_rows(&self, tokens: &str) -> Result<(), UsageError> {
        let none = [Vec::new()];
        let rows: &[Vec<String>] = self.table.as_ref().map_or(&none, |t| t.rows());
        for (i, row) in rows.iter().enumerate() {
            let at = if self.table.is_some() { format!(" ({tokens} row {})", i + 1) } else { String::new() };
            self.request_with(0, 0, row).map_err(|e| usage(format!("{e}{at}")))?;
            if !self.url.uses_columns() && self.headers.iter().all(|(_, p)| !p.uses_columns()) {
                break;
            }
        }
        Ok(())
    }

    /// The URL client `client` connects to in room `room`, every placeholder expanded.
    pub fn url(&self, client: u64, room: u64) -> String {
        self.url.expand(client, room, self.table.as_ref().map_or(&[][..], |t| t.row(client)))
    }

    /// The same URL as messages show it: `{client}` and `{room}` expanded, the `--tokens`
    /// columns left as `{name}` and a userinfo password as `***` (they may be secrets, and
    /// messages reach terminals and CI logs).
    pub fn shown_url(&self, client: u64, room: u64) -> String {
        let names = self.table.as_ref().map_or(&[][..], |t| t.names());
        mask_password(&self.url.shown(client, room, names))
    }

    /// Client `client`'s handshake request for room `room`.
    pub fn request(&self, client: u64, room: u64) -> Result<Request, String> {
        let row = self.table.as_ref().map_or(&[][..], |t| t.row(client));
        self.request_with(client, room, row)
    }

    fn request_with(&self, client: u64, room: u64, row: &[String]) -> Result<Request, String> {
        let url = self.url.expand(client, room, row);
        let mut req = url
            .as_str()
            .into_client_request()
            .map_err(|e| format!("URL '{}' is not valid: {e}", self.shown_url(client, room)))?;
        let names = self.table.as_ref().map_or(&[][..], |t| t.names());
        let mut seen: Vec<&HeaderName> = Vec::with_capacity(self.headers.len());
        for (name, p) in &self.headers {
            let text = p.expand(client, room, row);
            let value = HeaderValue::from_str(&text)
                .map_err(|_| format!("header {name}: '{}' is not a valid value", p.shown(client, room, names)))?;
            if seen.contains(&name) {
                req.headers_mut().append(name.clone(), value);
            } else {
                seen.push(name);
                req.headers_mut().insert(name.clone(), value);
            }
        }
        if !self.subprotocols.is_empty() {
            let offer = HeaderValue::from_str(&self.subprotocols.join(", ")).map_err(|e| e.to_string())?;
            req.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, offer);
        }
        Ok(req)
    }

    /// A new TLS session for one connection (`None`: ws://).
    pub fn tls_session(&self) -> Option<Result<ClientConnection, String>> {
        let (cfg, name) = self.tls.as_ref()?;
        Some(ClientConnection::new(Arc::clone(cfg), name.clone()).map_err(|e| format!("TLS: {e}")))
    }

    /// The configuration as the report records it: header names (never values, which may be
    /// secrets), cookie names, subprotocols, TLS trust, the tokens file and its row count.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "tls": self.trust.map(|t| match t {
                Trust::System => "system_store",
                Trust::CaOnly => "ca_file",
                Trust::Insecure => "insecure_unverified",
            }),
            "ca": self.ca.as_ref().map(|p| p.display().to_string()),
            "headers": self.headers.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            "cookies": self.cookies,
            "subprotocols": self.subprotocols,
            "tokens": self.tokens.as_ref().map(|p| p.display().to_string()),
            "token_rows": self.table.as_ref().map(|t| t.len()),
        })
    }
}

fn read_tokens(p: &std::path::Path, label: &str) -> Result<Table, UsageError> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    std::fs::File::open(p)
        .and_then(|f| f.take(MAX_TOKENS_BYTES + 1).read_to_end(&mut buf))
        .map_err(|e| usage(format!("cannot read {label} {}: {e}", p.display())))?;
    if buf.len() as u64 > MAX_TOKENS_BYTES {
        return Err(usage(format!("{label} {} is larger than 64 MiB", p.display())));
    }
    let text = String::from_utf8(buf).map_err(|_| usage(format!("{label} {}: not UTF-8", p.display())))?;
    Table::parse_csv(&text).map_err(|e| usage(format!("{label} {}: {e}", p.display())))
}

/// What the handshakes said, beside the counters: failures by cause and the subprotocol
/// each connected client got. Touched once per connection attempt, never per message.
#[derive(Debug, Default)]
pub struct Handshakes {
    failures: Mutex<BTreeMap<String, u64>>,
    chosen: Mutex<BTreeMap<String, u64>>,
}

impl Handshakes {
    /// A connection attempt failed for `cause`.
    pub fn failed(&self, cause: String) {
        *self.failures.lock().unwrap_or_else(PoisonError::into_inner).entry(cause).or_insert(0) += 1;
    }

    /// The server chose `protocol` (`None`: no subprotocol).
    pub fn chose(&self, protocol: Option<&str>) {
        let key = protocol.unwrap_or("").to_owned();
        *self.chosen.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_insert(0) += 1;
    }

    /// Failures by cause, most frequent first.
    pub fn failures(&self) -> Vec<(String, u64)> {
        let mut v: Vec<_> =
            self.failures.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(k, n)| (k.clone(), *n)).collect();
        v.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        v
    }

    /// Subprotocols chosen, by name (`""`: none), with how many clients got each.
    pub fn chosen(&self) -> Vec<(String, u64)> {
        self.chosen.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(k, n)| (k.clone(), *n)).collect()
    }
}

/// The lines after a run: TLS trust, failed handshakes by cause (the subprotocols chosen are
/// in the report: `wirebench_core::report::subprotocol_words`).
pub fn summary(conn: &Connect, h: &Handshakes, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if let Some(t) = conn.trust {
        let how = match t {
            Trust::System => "certificate checked against the system's CA store",
            Trust::CaOnly => "certificate checked against --ca",
            Trust::Insecure => "certificate NOT checked (--insecure)",
        };
        let ca = conn.ca.as_ref().filter(|_| t == Trust::System).map(|p| format!(" and {}", p.display()));
        writeln!(out, "tls: {how}{}", ca.unwrap_or_default())?;
    }
    let failures = h.failures();
    if !failures.is_empty() {
        let n: u64 = failures.iter().map(|(_, n)| n).sum();
        let causes: Vec<String> = failures.iter().take(3).map(|(c, n)| format!("{n} x {c}")).collect();
        writeln!(out, "connect failures: {n} ({})", causes.join("; "))?;
    }
    if let Some(t) = &conn.table {
        match t.len() {
            1 => writeln!(out, "tokens: 1 row; every client used it")?,
            n => writeln!(out, "tokens: {n} rows; client i used row i mod {n}")?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(url: &str) -> Args {
        Args { url: Some(url.into()), ..Args::default() }
    }

    #[test]
    fn headers_cookies_and_subprotocols_make_the_request() {
        let mut a = args("ws://127.0.0.1:1/r/{room}?u={client}");
        a.header =
            vec!["Authorization: Bearer c{client}".into(), "Cookie: a=1".into(), "X-Two: 1".into(), "X-Two: 2".into()];
        a.cookie = vec!["sid=s{client}".into()];
        a.subprotocol = vec!["chat".into(), "v2.json".into()];
        let c = Connect::from_args(&a, &FromFile::default(), a.url.as_deref().unwrap()).unwrap();
        let r = c.request(7, 1).unwrap();
        assert_eq!(r.uri().to_string(), "ws://127.0.0.1:1/r/1?u=7");
        let h = r.headers();
        assert_eq!(h["authorization"], "Bearer c7");
        assert_eq!(h["cookie"], "a=1; sid=s7");
        assert_eq!(h.get_all("x-two").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(h["sec-websocket-protocol"], "chat, v2.json");
    }

    #[test]
    fn room_is_appended_as_room_url_does() {
        let c = Connect::from_args(&args("ws://h:1/rooms/demo"), &FromFile::default(), "ws://h:1/rooms/demo").unwrap();
        assert_eq!(c.request(0, 3).unwrap().uri().to_string(), "ws://h:1/rooms/demo-3");
        let c = Connect::from_args(&args("ws://h:1/rooms/"), &FromFile::default(), "ws://h:1/rooms/").unwrap();
        assert_eq!(c.request(0, 3).unwrap().uri().to_string(), "ws://h:1/rooms/3");
    }

    #[test]
    fn bad_input_is_one_line() {
        let e = |f: &dyn Fn(&mut Args)| {
            let mut a = args("ws://h:1/r");
            f(&mut a);
            Connect::from_args(&a, &FromFile::default(), "ws://h:1/r").unwrap_err().0
        };
        assert_eq!(e(&|a| a.header = vec!["NoColon".into()]), "--header 'NoColon' is not 'Name: value'");
        assert_eq!(
            e(&|a| a.header = vec!["Bad Name: x".into()]),
            "--header 'Bad Name: x': 'Bad Name' is not a valid header name"
        );
        assert_eq!(e(&|a| a.header = vec!["X: a\u{7}b".into()]), "header x: 'a\u{7}b' is not a valid value");
        assert_eq!(e(&|a| a.header = vec!["X: {tokn}".into()]), "header x: unknown placeholder {tokn} (known: client)");
        assert!(e(&|a| a.header = vec!["Sec-WebSocket-Protocol: x".into()]).ends_with("use --subprotocol"));
        assert!(e(&|a| a.cookie = vec!["a=b;c".into()]).starts_with("--cookie 'a=b;c'"));
        assert!(e(&|a| a.subprotocol = vec!["a b".into()]).starts_with("--subprotocol 'a b'"));
        assert_eq!(e(&|a| a.insecure = true), "--ca and --insecure are for wss:// URLs");
    }
}
