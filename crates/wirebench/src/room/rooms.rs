//! Rooms and their members: a relay goes into every other member's queue, and every byte
//! queued counts against that member's backlog budget and the server's total. A member
//! whose own queue would pass its budget is marked for dropping (close 1013) instead of
//! being sent more, so a member that never reads costs at most its budget, never the room's
//! traffic. When the total would pass its budget, the members with the longest queues
//! (in any room) are dropped until the message fits, and their bytes leave the total at
//! once: members that read promptly keep their place however many others do not read.
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
    /// Every member of every room, to find the longest queues when the total is full. Locked
    /// after a room's lock (a relay holds its room's), never before one.
    all: Mutex<HashMap<u64, Arc<Member>>>,
    /// Bytes queued for all members: the sum of the members' `backlog`.
    pub(super) backlog: AtomicU64,
    /// Members dropped for their backlog.
    pub(super) kicked: AtomicU64,
}

impl Rooms {
    /// Adds `m` to the room at `path` (created if new).
    pub(super) fn join(&self, path: &str, m: Arc<Member>) -> Arc<Room> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let room = map.entry(path.to_owned()).or_default().clone();
        room.members.lock().unwrap_or_else(PoisonError::into_inner).push(m.clone());
        drop(map);
        self.all.lock().unwrap_or_else(PoisonError::into_inner).insert(m.id, m);
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
        self.all.lock().unwrap_or_else(PoisonError::into_inner).remove(&m.id);
        // No relay can add to it now: it is out of the room.
        self.release(m);
    }

    /// Takes all of `m`'s queued bytes out of its count and the total.
    fn release(&self, m: &Member) {
        self.backlog.fetch_sub(m.backlog.swap(0, Ordering::AcqRel), Ordering::AcqRel);
    }

    /// Marks `m` for dropping (close 1013), once, and takes its queued bytes out of the
    /// total at once: its task throws its queue away before it closes.
    fn kick(&self, m: &Member) {
        if !m.kicked.swap(true, Ordering::AcqRel) {
            self.kicked.fetch_add(1, Ordering::Relaxed);
            m.kick.notify_one();
        }
        self.release(m);
    }

    /// The total is over its budget: drops the member with the longest queue (not yet
    /// dropped). Returns that member's id, or `None` if nobody has a queue.
    fn drop_longest(&self) -> Option<u64> {
        let all = self.all.lock().unwrap_or_else(PoisonError::into_inner);
        let longest = all
            .values()
            .filter(|m| !m.kicked.load(Ordering::Acquire))
            .max_by_key(|m| m.backlog.load(Ordering::Acquire))
            .filter(|m| m.backlog.load(Ordering::Acquire) > 0)?
            .clone();
        drop(all);
        self.kick(&longest);
        Some(longest.id)
    }

    /// Rooms open now.
    pub(super) fn count(&self) -> u64 {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).len() as u64
    }

    /// Queues `msg` for `to`, within the budgets: past its own, `to` is marked for dropping;
    /// past the total, the longest queues are dropped until `msg` fits (which may be `to`'s).
    /// Returns whether it was queued.
    pub(super) fn queue(&self, to: &Member, msg: Message, limits: &Limits) -> bool {
        if to.kicked.load(Ordering::Acquire) {
            return false;
        }
        let len = msg.len() as u64;
        if to.backlog.load(Ordering::Acquire) + len > limits.member_backlog {
            self.kick(to);
            return false;
        }
        // Reserve `len` in the total (compare-and-swap: two workers never pass it together).
        let mut total = self.backlog.load(Ordering::Acquire);
        loop {
            if total + len <= limits.total_backlog {
                match self.backlog.compare_exchange_weak(total, total + len, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(now) => total = now,
                }
            } else {
                match self.drop_longest() {
                    Some(id) if id != to.id => total = self.backlog.load(Ordering::Acquire),
                    _ => {
                        self.kick(to);
                        return false;
                    }
                }
            }
        }
        let own = to.backlog.fetch_add(len, Ordering::AcqRel) + len;
        if own > limits.member_backlog || to.tx.send(msg).is_err() {
            self.kick(to);
            return false;
        }
        true
    }

    /// Bytes written out for `m`: no longer queued. (A dropped member's bytes were released
    /// when it was dropped: only what is still counted leaves the total.)
    pub(super) fn written(&self, m: &Member, bytes: u64) {
        let was = m.backlog.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(v.saturating_sub(bytes)));
        let was = was.unwrap_or_else(|v| v);
        self.backlog.fetch_sub(was.min(bytes), Ordering::AcqRel);
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
