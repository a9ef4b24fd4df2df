//! Stopping: a shared flag that Ctrl-C (or a test) sets and every loop polls. Loops that
//! block wake at least every [`POLL`] to look at it, so a stop takes effect promptly and
//! every mode still returns what it measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a blocked loop wakes to check the flag.
pub const POLL: Duration = Duration::from_millis(100);

/// A cloneable stop signal.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(Arc<AtomicBool>);

impl Shutdown {
    /// A signal that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets it.
    pub fn trigger(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Is it set?
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag itself, for engines that take `&AtomicBool`.
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }

    /// Sets it on Ctrl-C (SIGINT) and SIGTERM. Call once per process, from `main`.
    pub fn on_ctrl_c(&self) -> anyhow::Result<()> {
        let me = self.clone();
        ctrlc::set_handler(move || me.trigger()).map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))
    }
}
