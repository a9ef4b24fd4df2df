//! A scripted WebSocket server for the load tests: an echo server, or a room relay that
//! misbehaves on purpose (skips messages to one member, withholds them from another and
//! then closes it with 1013; or closes a member after its Nth message and refuses a room),
//! counting exactly what it relayed and what it did not.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// What the server does with a message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Script {
    /// Every message back to its sender only.
    Echo,
    /// A room relay (requests answered), except: the second member of each room misses
    /// every `skip_every`-th relay; the third gets nothing after `withhold_after` and is
    /// closed with 1013 at `close_at`.
    Lossy { skip_every: u64, withhold_after: Duration, close_at: Duration },
    /// A room relay (requests answered) that closes the second member of each room with
    /// 1013 once it has read `after` messages from it, and refuses (503) every handshake
    /// whose path ends with `refuse`: decided by counts and names, not by time.
    Kick { after: u64, refuse: &'static str },
}

/// What the server counted.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Relays written to members other than the sender.
    pub(crate) relayed: AtomicU64,
    /// Relays queued (the skip rule counts these).
    queued: AtomicU64,
    /// Relays skipped or withheld on purpose.
    pub(crate) skipped: AtomicU64,
}

struct Member {
    ordinal: usize,
    /// Messages to write, and whether each is a relay (counted once written).
    tx: mpsc::UnboundedSender<(Message, bool)>,
}

type Rooms = Mutex<std::collections::HashMap<String, Vec<Member>>>;

/// A running scripted server; stops on drop.
pub(crate) struct Relay {
    addr: SocketAddr,
    pub(crate) tally: Arc<Tally>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub(crate) fn start(script: Script) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let tally = Arc::new(Tally::default());
        let (stop, stop_rx) = watch::channel(false);
        let t = tally.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(serve(listener, script, t, stop_rx));
            rt.shutdown_timeout(Duration::from_secs(1));
        });
        Self { addr, tally, stop, thread: Some(thread) }
    }

    pub(crate) fn url(&self) -> String {
        format!("ws://{}/rooms/t", self.addr)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(listener: std::net::TcpListener, script: Script, tally: Arc<Tally>, mut stop: watch::Receiver<bool>) {
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let rooms: Arc<Rooms> = Arc::default();
    let t0 = Instant::now();
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((sock, _)) = r else { continue };
                tokio::spawn(member(sock, script, rooms.clone(), tally.clone(), t0, stop.clone()));
            }
            _ = stop.changed() => return,
        }
    }
}

async fn member(
    sock: tokio::net::TcpStream,
    script: Script,
    rooms: Arc<Rooms>,
    tally: Arc<Tally>,
    t0: Instant,
    mut stop: watch::Receiver<bool>,
) {
    let mut path = String::new();
    #[expect(clippy::result_large_err, reason = "tungstenite's callback type")]
    let cb = |req: &Request, resp: Response| {
        req.uri().path().clone_into(&mut path);
        if let Script::Kick { refuse, .. } = script
            && path.ends_with(refuse)
        {
            let mut no = ErrorResponse::new(Some("scripted refusal".into()));
            *no.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            return Err(no);
        }
        Ok(resp)
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(sock, cb).await else { return };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ordinal = {
        let mut map = rooms.lock().unwrap();
        let list = map.entry(path.clone()).or_default();
        list.push(Member { ordinal: list.len(), tx: tx.clone() });
        list.len() - 1
    };
    let mut kicked = false;
    // data messages read from this member
    let mut read = 0u64;
    loop {
        let close_in = match script {
            Script::Lossy { close_at, .. } if ordinal == 2 && !kicked => close_at.saturating_sub(t0.elapsed()),
            _ => Duration::from_secs(3600),
        };
        tokio::select! {
            m = ws.next() => match m {
                Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                    let request = wirebench_core::load::msg::is_request(&m.clone().into_data());
                    if matches!(script, Script::Echo) || request {
                        let _ = tx.send((m, false));
                        continue;
                    }
                    read += 1;
                    {
                        let map = rooms.lock().unwrap();
                        for to in map[&path].iter().filter(|x| x.ordinal != ordinal) {
                            let n = tally.queued.load(Ordering::Relaxed) + tally.skipped.load(Ordering::Relaxed);
                            let skip = match script {
                                Script::Lossy { skip_every, withhold_after, .. } => {
                                    (to.ordinal == 1 && n.is_multiple_of(skip_every))
                                        || (to.ordinal == 2 && t0.elapsed() >= withhold_after)
                                }
                                _ => false,
                            };
                            if skip || to.tx.send((m.clone(), true)).is_err() {
                                tally.skipped.fetch_add(1, Ordering::Relaxed);
                            } else {
                                tally.queued.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    if let Script::Kick { after, .. } = script
                        && ordinal == 1
                        && !kicked
                        && read >= after
                    {
                        kicked = true;
                        let _ = ws.close(Some(CloseFrame { code: CloseCode::Again, reason: "scripted".into() })).await;
                        rooms.lock().unwrap().get_mut(&path).unwrap().retain(|x| x.ordinal != ordinal);
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
            Some((m, relay)) = rx.recv() => {
                if ws.send(m).await.is_err() { break }
                if relay {
                    tally.relayed.fetch_add(1, Ordering::Relaxed);
                }
            }
            () = tokio::time::sleep(close_in) => {
                kicked = true;
                let _ = ws.close(Some(CloseFrame { code: CloseCode::Again, reason: "scripted".into() })).await;
                rooms.lock().unwrap().get_mut(&path).unwrap().retain(|x| x.ordinal != ordinal);
            }
            _ = stop.changed() => break,
        }
    }
    if let Some(list) = rooms.lock().unwrap().get_mut(&path) {
        list.retain(|x| x.ordinal != ordinal);
    }
}
