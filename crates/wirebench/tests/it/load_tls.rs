//! `wirebench load` for real apps: wss:// to `room --tls-cert/--tls-key`
//! with a certificate made here (rcgen), a wrong CA and a wrong name, `--insecure`; headers,
//! cookies, subprotocols and per-client values as a small WebSocket server here receives
//! them; bad input exits 2 with one line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::Value;
use wirebench::Shutdown;
use wirebench::room::{self, RoomServer};

use crate::support::{read_json, wirebench, wirebench_with};

/// A CA and a server certificate it signed for `names`, as PEM files in `dir`.
pub(crate) struct Certs {
    pub(crate) ca: PathBuf,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

pub(crate) fn certs(dir: &Path, tag: &str, names: &[&str]) -> Certs {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, format!("wirebench test CA {tag}"));
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(names.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let c = Certs {
        ca: dir.join(format!("{tag}-ca.pem")),
        cert: dir.join(format!("{tag}-cert.pem")),
        key: dir.join(format!("{tag}-key.pem")),
    };
    std::fs::write(&c.ca, ca_cert.pem()).unwrap();
    std::fs::write(&c.cert, leaf.pem()).unwrap();
    std::fs::write(&c.key, leaf_key.serialize_pem()).unwrap();
    c
}

pub(crate) fn tls_room(c: &Certs) -> RoomServer {
    let tls = wirebench::tls::server_config(&c.cert, &c.key).expect("certificate loads");
    RoomServer::start_tls(&room::Config::loopback(), Some(tls)).expect("room starts")
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn n(v: &Value) -> u64 {
    v.as_u64().expect("an integer")
}

/// 10 clients in rooms of 5 over wss:// for 1 s: every relayed message reaches the 4 other
/// members, and the room received exactly what the clients sent.
fn assert_delivered(run: &crate::support::Run, json: &Path, r: &RoomServer) {
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let rep = read_json(json);
    let l = &rep["results"];
    assert_eq!(l["connections"]["connected"], 10, "{}", run.out);
    let sent: u64 = l["types"].as_array().unwrap().iter().map(|t| n(&t["sent"])).sum();
    let relayed: u64 =
        l["types"].as_array().unwrap().iter().filter(|t| t["request"] == false).map(|t| n(&t["sent"])).sum();
    assert!(sent >= 50, "10 clients x 10/s x 1 s: {sent}");
    assert_eq!(n(&l["overall"]["received"]), relayed * 4, "{}", run.out);
    assert_eq!(r.counters().received, sent);
    assert!(rep["config"]["connect"]["tls"].as_str().is_some());
}

fn load_args<'a>(url: &'a str, json: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["load", url, "--clients", "10", "--rate", "10/s", "--duration", "1s", "-q", "--json", p(json)];
    a.extend_from_slice(extra);
    a
}

#[test]
fn wss_with_the_ca_delivers_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path(), "good", &["localhost", "127.0.0.1"]);
    let r = tls_room(&c);
    let url = format!("wss://{}/rooms/t", r.local_addr());
    let json = dir.path().join("load.json");
    let run = wirebench(&load_args(&url, &json, &["--ca", p(&c.ca)]));
    assert_delivered(&run, &json, &r);
    assert!(run.out.contains("tls: certificate checked against"), "{}", run.out);
    assert_eq!(read_json(&json)["config"]["connect"]["ca"], p(&c.ca));
}

#[test]
fn insecure_connects_without_the_ca_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path(), "self", &["localhost", "127.0.0.1"]);
    let r = tls_room(&c);
    let url = format!("wss://{}/rooms/t", r.local_addr());
    let json = dir.path().join("load.json");
    let run = wirebench(&load_args(&url, &json, &["--insecure"]));
    assert_delivered(&run, &json, &r);
    assert!(run.out.contains("WARNING: --insecure: the server's TLS certificate is NOT checked"), "{}", run.out);
    assert_eq!(read_json(&json)["config"]["connect"]["tls"], "insecure_unverified");
}

#[test]
fn a_wrong_ca_or_name_fails_every_client_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = certs(dir.path(), "good", &["localhost", "127.0.0.1"]);
    let other = certs(dir.path(), "other", &["localhost", "127.0.0.1"]);
    let r = tls_room(&good);
    let url = format!("wss://{}/rooms/t", r.local_addr());
    let json = dir.path().join("load.json");
    let run = wirebench(&load_args(&url, &json, &["--ca", p(&other.ca)]));
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert_eq!(run.err.trim().lines().count(), 1, "{}", run.err);
    assert!(
        run.err.contains(
            "/rooms/t-0 (client 0's URL; 10 attempts): TLS: the server's certificate is not trusted (unknown issuer)"
        ),
        "{}",
        run.err
    );
    assert!(run.out.contains("connect failures: 10 (10 x TLS: the server's certificate is not trusted"), "{}", run.out);
    assert_eq!(r.counters().connections, 0);
    // the right CA, a certificate for another name
    let named = certs(dir.path(), "named", &["app.example.invalid"]);
    let r2 = tls_room(&named);
    let url = format!("wss://{}/rooms/t", r2.local_addr());
    let run = wirebench(&load_args(&url, &json, &["--ca", p(&named.ca)]));
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(run.err.contains("TLS: the server's certificate is not valid for '127.0.0.1'"), "{}", run.err);
    // wss:// to a ws:// server
    let plain = RoomServer::start(&room::Config::loopback()).unwrap();
    let url = format!("wss://{}/rooms/t", plain.local_addr());
    let run = wirebench(&load_args(&url, &json, &["--ca", p(&good.ca)]));
    assert_eq!(run.code, 1, "{}{}", run.out, run.err);
    assert!(run.err.contains("is it a ws:// server?"), "{}", run.err);
}

/// The room command itself serves wss:// with --tls-cert/--tls-key.
#[test]
fn room_cli_serves_wss() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path(), "cli", &["127.0.0.1"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let stop = Shutdown::new();
    let (l, cert, key, s) = (listen.clone(), c.cert.clone(), c.key.clone(), stop.clone());
    let room = std::thread::spawn(move || {
        wirebench_with(&["room", "--listen", &l, "--tls-cert", p(&cert), "--tls-key", p(&key), "--interval", "0s"], s)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(Instant::now() < deadline && !room.is_finished(), "the room did not start");
        std::thread::park_timeout(Duration::from_millis(10));
    }
    let json = dir.path().join("load.json");
    let url = format!("wss://{listen}/rooms/t");
    let run = wirebench(&load_args(&url, &json, &["--ca", p(&c.ca)]));
    stop.trigger();
    let room = room.join().unwrap();
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    assert_eq!(room.code, 0, "{}", room.err);
    assert!(room.out.contains(&format!("wirebench room: wss://{listen}/rooms/NAME")), "{}", room.out);
    assert!(room.out.contains("connections 10 "), "{}", room.out);
}

/// What the test server saw of one handshake.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) uri: String,
    pub(crate) headers: Vec<(String, String)>,
}

impl Seen {
    pub(crate) fn get(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }
}

/// A WebSocket server that records every handshake and answers the subprotocol `pick`
/// (`None`: none), then reads until the client closes.
pub(crate) fn recording_server(
    pick: Option<&'static str>,
) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>, Shutdown, std::thread::JoinHandle<()>) {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let stop = Shutdown::new();
    let (seen2, stop2) = (seen.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            while !stop2.is_set() {
                let Ok(Ok((sock, _))) = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await else {
                    continue;
                };
                let seen = seen2.clone();
                tokio::spawn(async move {
                    #[expect(clippy::result_large_err, reason = "tungstenite's callback type")]
                    let cb = |req: &Request, mut resp: Response| {
                        let headers = req
                            .headers()
                            .iter()
                            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("?").to_owned()))
                            .collect();
                        seen.lock().unwrap().push(Seen { uri: req.uri().to_string(), headers });
                        if let Some(p) = pick {
                            resp.headers_mut().insert("sec-websocket-protocol", p.parse().unwrap());
                        }
                        Ok(resp)
                    };
                    if let Ok(Ok(mut ws)) =
                        tokio::time::timeout(Duration::from_secs(5), tokio_tungstenite::accept_hdr_async(sock, cb))
                            .await
                    {
                        while let Ok(Some(Ok(_))) = tokio::time::timeout(Duration::from_secs(10), ws.next()).await {}
                    }
                });
            }
        });
    });
    (addr, seen, stop, thread)
}

#[test]
fn headers_cookies_subprotocols_and_per_client_values_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "token,user\nt0,u0\n\"t,1\",u1\nt2,u2\n").unwrap();
    let (addr, seen, stop, thread) = recording_server(Some("v2"));
    let url = format!("ws://{addr}/r{{room}}?client={{client}}&user={{user}}");
    let run = wirebench(&[
        "load",
        &url,
        "--clients",
        "4",
        "--room-size",
        "2",
        "--rate",
        "1/s",
        "--duration",
        "1s",
        "-v",
        "-H",
        "Authorization: Bearer {token}",
        "--header",
        "X-Client: c{client}",
        "--header",
        "X-Fixed: yes",
        "--cookie",
        "sid={user}",
        "--cookie",
        "theme=dark",
        "--subprotocol",
        "v1",
        "--subprotocol",
        "v2",
        "--tokens",
        p(&tokens),
    ]);
    stop.trigger();
    thread.join().unwrap();
    let mut seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{}{}", run.out, run.err);
    seen.sort_by_key(|s| s.get("x-client")[0].to_owned());
    let (tok, user) = (["t0", "t,1", "t2", "t0"], ["u0", "u1", "u2", "u0"]);
    for (i, s) in seen.iter().enumerate() {
        // client i takes row i mod 3
        assert_eq!(s.uri, format!("/r{}?client={i}&user={}", i / 2, user[i]));
        assert_eq!(s.get("x-client"), [format!("c{i}")]);
        assert_eq!(s.get("authorization"), [format!("Bearer {}", tok[i])]);
        assert_eq!(s.get("cookie"), [format!("sid={}; theme=dark", user[i])]);
        assert_eq!(s.get("x-fixed"), ["yes"]);
        assert_eq!(s.get("sec-websocket-protocol"), ["v1, v2"]);
    }
    assert!(run.out.contains("subprotocol: offered v1, v2; the server chose v2 for 4 clients"), "{}", run.out);
    assert!(run.out.contains("tokens: 3 rows; client i used row i mod 3"), "{}", run.out);
}

/// A server that picks no subprotocol, or one not offered: every client fails, as a
/// browser's would, with the cause.
#[test]
fn a_server_that_picks_no_or_an_unknown_subprotocol_fails_the_connection() {
    for (pick, want) in [(None, "Server sent no subprotocol"), (Some("zz"), "Server sent an invalid subprotocol")] {
        let (addr, seen, stop, thread) = recording_server(pick);
        let url = format!("ws://{addr}/r");
        let run = wirebench(&["load", &url, "--clients", "2", "--duration", "1s", "-q", "--subprotocol", "v1"]);
        stop.trigger();
        thread.join().unwrap();
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert_eq!(run.code, 1, "{}{}", run.out, run.err);
        assert!(run.err.contains(&format!("subprotocol: {want} (offered: v1)")), "{}", run.err);
    }
}

#[test]
fn bad_headers_and_token_files_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let header_only = dir.path().join("header.csv");
    std::fs::write(&header_only, "token\n").unwrap();
    let missing = dir.path().join("missing.csv");
    let cases: [(&[&str], &str); 7] = [
        (&["--header", "Authorization Bearer x"], "--header 'Authorization Bearer x' is not 'Name: value'"),
        (&["--header", "Bad Name: x"], "'Bad Name' is not a valid header name"),
        (&["--header", "X-T: {token}"], "header x-t: unknown placeholder {token} (known: client)"),
        (&["--tokens", p(&missing)], "cannot read --tokens"),
        (&["--tokens", p(&empty)], "the CSV is empty"),
        (&["--tokens", p(&header_only)], "the CSV has a header row but no rows"),
        (&["--cookie", "novalue"], "--cookie 'novalue' is not NAME=VALUE"),
    ];
    for (flags, want) in cases {
        let mut a = vec!["load", "ws://127.0.0.1:1/r", "-d", "1s"];
        a.extend_from_slice(flags);
        let r = wirebench(&a);
        assert_eq!(r.code, 2, "{flags:?}: {}", r.err);
        assert_eq!(r.err.trim().lines().count(), 1, "{flags:?}: {}", r.err);
        assert!(r.err.contains(want), "{flags:?}: {}", r.err);
    }
    // a token that cannot go in a header is refused up front, naming its row
    let bad_row = dir.path().join("bad.csv");
    std::fs::write(&bad_row, "token\nok\n\"two\nlines\"\n").unwrap();
    let r = wirebench(&["load", "ws://127.0.0.1:1/r", "-H", "Authorization: {token}", "--tokens", p(&bad_row)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("is not a valid value (--tokens row 2)"), "{}", r.err);
    // room: a key without a certificate, a certificate file that is not there
    let r = wirebench(&["room", "--tls-key", p(&missing)]);
    assert_eq!(r.code, 2, "{}", r.err);
    let r = wirebench(&["room", "--listen", "127.0.0.1:0", "--tls-cert", p(&missing), "--tls-key", p(&missing)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("cannot read --tls-cert"), "{}", r.err);
}

/// A TLS connection to `addr` that trusts `ca`, as a blocking stream (reads bounded).
fn tls_client(
    addr: SocketAddr,
    ca: &Path,
) -> tokio_rustls::rustls::StreamOwned<tokio_rustls::rustls::ClientConnection, std::net::TcpStream> {
    let (cfg, _) = wirebench::tls::client_config(Some(ca), false).unwrap();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = tokio_rustls::rustls::ClientConnection::new(cfg, name).unwrap();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tokio_rustls::rustls::StreamOwned::new(conn, tcp)
}

/// At its connection limit, a wss:// room answered a newcomer with a plaintext 503 on the
/// raw socket (garbage to a TLS client) and dropped it: the client must read the whole 503
/// over TLS and then a close_notify (`read_to_end` fails on a cut without one).
#[test]
fn at_the_cap_a_wss_newcomer_reads_the_whole_503_and_a_clean_tls_close() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path(), "cap", &["127.0.0.1"]);
    let mut cfg = room::Config::loopback();
    cfg.limits.max_connections = 1;
    let tls = wirebench::tls::server_config(&c.cert, &c.key).unwrap();
    let r = RoomServer::start_tls(&cfg, Some(tls)).unwrap();
    let upgrade = b"GET /rooms/cap HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    // the one member: its 101 read, so it holds the only place (not an evictable handshake)
    let mut member = tls_client(r.local_addr(), &c.ca);
    member.write_all(upgrade).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        member.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101 "), "{}", String::from_utf8_lossy(&head));
    let mut newcomer = tls_client(r.local_addr(), &c.ca);
    newcomer.write_all(upgrade).unwrap();
    let mut answer = Vec::new();
    let end = newcomer.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(end.is_ok(), "no clean TLS close: {end:?} after {text:?}");
    assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nwirebench room: at its connection limit\r\n"), "{text}");
    assert_eq!(r.counters().refused_full, 1);
    drop(member);
    r.stop();
}
