//! Stopping: a shared flag that Ctrl-C (or a test) sets and every loop polls. Loops that
//! block wake at least every [`POLL`] to look at it, so a stop takes effect promptly and
//! every mode still returns what it measured. Async tasks (the mesh agent's HTTP side and
//! discovery) instead await [`Shutdown::stopped`], which the trigger wakes: an idle task
//! costs no wake-ups.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How often a blocked loop wakes to check the flag.
pub const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct Inner {
    flag: AtomicBool,
    /// Woken (every waiter) by [`Shutdown::trigger`].
    notify: Notify,
}

/// A cloneable stop signal.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(Arc<Inner>);

impl Shutdown {
    /// A signal that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets it, and wakes every task awaiting [`Self::stopped`].
    pub fn trigger(&self) {
        self.0.flag.store(true, Ordering::Relaxed);
        self.0.notify.notify_waiters();
    }

    /// Is it set?
    pub fn is_set(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }

    /// The flag itself, for engines that take `&AtomicBool`.
    pub fn flag(&self) -> &AtomicBool {
        &self.0.flag
    }

    /// Completes once the signal is set, without polling: the waiter is registered before
    /// the flag is looked at, so a trigger between the two is not missed.
    pub async fn stopped(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    /// Sets it on Ctrl-C (SIGINT) and SIGTERM. Call once per process, from `main`.
    pub fn on_ctrl_c(&self) -> anyhow::Result<()> {
        let me = self.clone();
        ctrlc::set_handler(move || me.trigger()).map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stopped` completes for a waiter that registered before the trigger (woken, not
    /// polled: the runtime's clock is paused, so a polling wait would never see the flag
    /// unless time advanced) and for one that starts after it.
    #[tokio::test(start_paused = true)]
    async fn stopped_wakes_on_the_trigger_without_polling() {
        let s = Shutdown::new();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.stopped().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        let t0 = tokio::time::Instant::now();
        std::thread::spawn({
            let s = s.clone();
            move || s.trigger()
        })
        .join()
        .unwrap();
        waiter.await.unwrap();
        assert_eq!(tokio::time::Instant::now(), t0, "woken by the trigger, not by a timer");
        // Already set: at once.
        s.stopped().await;
    }
}
