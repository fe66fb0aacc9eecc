//! A wake-up flag for the queue's background threads (the delay timer, the metrics ticker).

use crate::sync::{wait_timeout, Condvar, Mutex};
use kcache_core::{Clock, Subscription};
use std::sync::Arc;
use std::time::Instant;

/// A sticky flag: `set` before a `wait` makes that wait return at once, so a notification sent
/// between a thread's check of its state and its wait is never lost.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Signal {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Wakes the waiter (now or at its next wait).
    pub(crate) fn set(&self) {
        *self.set.lock() = true;
        self.cv.notify_all();
    }

    /// Clears the flag; call before looking at the state the signal guards.
    pub(crate) fn clear(&self) {
        *self.set.lock() = false;
    }

    /// Waits until the flag is set or `deadline` passes on `clock` (a fake clock sets the flag on
    /// every advance through the subscription made by [`Signal::subscribe`]).
    pub(crate) fn wait(&self, clock: &dyn Clock, deadline: Option<Instant>) {
        let mut set = self.set.lock();
        if *set {
            return;
        }
        let timeout = deadline.and_then(|d| clock.timeout_until(d));
        if let Some(t) = timeout {
            if t.is_zero() {
                return;
            }
        }
        wait_timeout(&self.cv, &mut set, timeout);
    }

    /// Makes every jump of `clock` set this signal.
    pub(crate) fn subscribe(self: &Arc<Self>, clock: &dyn Clock) -> Subscription {
        let me = Arc::downgrade(self);
        clock.subscribe(Arc::new(move || {
            if let Some(s) = me.upgrade() {
                s.set();
            }
        }))
    }
}
