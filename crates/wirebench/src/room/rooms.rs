//! Rooms and their members: a relay goes into every other member's queue, and every byte
//! queued counts against that member's backlog budget and the server's total. A member
//! whose queue would pass either is marked for dropping (close 1013) instead of being sent
//! more, so a member that never reads costs at most its budget, never the room's traffic.
//! A room is freed when its last member leaves.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;
use wirebench_core::room::Limits;

/// One member's handle, as its room sees it.
#[derive(Debug)]
pub(super) struct Member {
    /// Unique for the server's life (the connection's number).
    pub(super) id: u64,
    tx: mpsc::UnboundedSender<Message>,
    /// Bytes queued for this member and not yet written out.
    pub(super) backlog: AtomicU64,
    /// Set once when the member is to be dropped for its backlog.
    pub(super) kicked: AtomicBool,
    /// Wakes the member's task to drop it.
    pub(super) kick: Notify,
}

impl Member {
    /// A member and the receiving end of its queue.
    pub(super) fn new(id: u64) -> (Arc<Self>, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let m = Self { id, tx, backlog: AtomicU64::new(0), kicked: AtomicBool::new(false), kick: Notify::new() };
        (Arc::new(m), rx)
    }
}

/// One room: its members.
#[derive(Debug, Default)]
pub(super) struct Room {
    members: Mutex<Vec<Arc<Member>>>,
}

/// Every room, and the bytes queued in all of them.
#[derive(Debug, Default)]
pub(super) struct Rooms {
    map: Mutex<HashMap<String, Arc<Room>>>,
    /// Bytes queued for all members.
    pub(super) backlog: AtomicU64,
    /// Members dropped for their backlog.
    pub(super) kicked: AtomicU64,
}

impl Rooms {
    /// Adds `m` to the room at `path` (created if new).
    pub(super) fn join(&self, path: &str, m: Arc<Member>) -> Arc<Room> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let room = map.entry(path.to_owned()).or_default().clone();
        room.members.lock().unwrap_or_else(PoisonError::into_inner).push(m);
        room
    }

    /// Removes member `m` from `room`; frees the room when it was the last; gives back the
    /// bytes still queued for it.
    pub(super) fn leave(&self, path: &str, room: &Arc<Room>, m: &Member) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let empty = {
            let mut members = room.members.lock().unwrap_or_else(PoisonError::into_inner);
            members.retain(|x| x.id != m.id);
            members.is_empty()
        };
        if empty && map.get(path).is_some_and(|r| Arc::ptr_eq(r, room)) {
            map.remove(path);
        }
        drop(map);
        // No relay can add to it now: it is out of the room.
        self.backlog.fetch_sub(m.backlog.swap(0, Ordering::AcqRel), Ordering::AcqRel);
    }

    /// Rooms open now.
    pub(super) fn count(&self) -> u64 {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).len() as u64
    }

    /// Queues `msg` for `to`, within the budgets; marks it for dropping if it would pass
    /// one. Returns whether it was queued.
    pub(super) fn queue(&self, to: &Member, msg: Message, limits: &Limits) -> bool {
        if to.kicked.load(Ordering::Relaxed) {
            return false;
        }
        let len = msg.len() as u64;
        let total = self.backlog.fetch_add(len, Ordering::AcqRel) + len;
        let own = to.backlog.fetch_add(len, Ordering::AcqRel) + len;
        if own > limits.member_backlog || total > limits.total_backlog || to.tx.send(msg).is_err() {
            to.backlog.fetch_sub(len, Ordering::AcqRel);
            self.backlog.fetch_sub(len, Ordering::AcqRel);
            if !to.kicked.swap(true, Ordering::AcqRel) {
                self.kicked.fetch_add(1, Ordering::Relaxed);
                to.kick.notify_one();
            }
            return false;
        }
        true
    }

    /// Bytes written out for `m`: no longer queued.
    pub(super) fn written(&self, m: &Member, bytes: u64) {
        m.backlog.fetch_sub(bytes, Ordering::AcqRel);
        self.backlog.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Relays `msg` from member `from` to every other member of `room`; returns how many
    /// it was queued for.
    pub(super) fn relay(&self, room: &Room, from: u64, msg: &Message, limits: &Limits) -> u64 {
        let members = room.members.lock().unwrap_or_else(PoisonError::into_inner);
        let mut n = 0;
        for m in members.iter().filter(|m| m.id != from) {
            n += u64::from(self.queue(m, msg.clone(), limits));
        }
        n
    }
}
