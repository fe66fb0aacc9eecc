//! The delayed-add inbox: `add_after` appends here under its own small lock, and whoever next
//! takes the queue's main lock (the timer thread, or any other operation) schedules the batch.
//!
//! This keeps a producer of delayed adds (a controller retrying keys through its rate limiter)
//! off the main lock that workers and the timer thread need. Nothing a caller can observe
//! changes: `add_after` cannot tell whether it was deduplicated (it returns `true` either way),
//! every reader of the state drains the inbox first, and the state machine treats a late-applied
//! schedule exactly like an early one (a deadline that passed meanwhile makes the item ready).

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::Mutex;
use std::time::Instant;

/// A delayed add waiting to be scheduled.
pub(crate) type Delayed<T> = (T, Instant);

#[derive(Debug)]
struct Buf<T> {
    items: Vec<Delayed<T>>,
    closed: bool,
}

/// The delayed-add inbox of one queue, and when the timer thread plans to wake next.
#[derive(Debug)]
pub(crate) struct Inbox<T> {
    buf: Mutex<Buf<T>>,
    /// Items in `buf`, readable without its lock.
    len: AtomicUsize,
    /// When the timer thread will next look at the schedule, in nanoseconds after `epoch`
    /// (`u64::MAX`: only when signalled). A push with an earlier deadline must signal it.
    planned: AtomicU64,
    epoch: Instant,
}

impl<T> Inbox<T> {
    pub(crate) fn new(epoch: Instant) -> Self {
        Self {
            buf: Mutex::new(Buf {
                items: Vec::new(),
                closed: false,
            }),
            len: AtomicUsize::new(0),
            planned: AtomicU64::new(u64::MAX),
            epoch,
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Appends a delayed add. `None` when refused (the queue shut down); otherwise whether the
    /// timer thread must be signalled because the deadline is before its planned wake-up.
    pub(crate) fn push(&self, item: T, at: Instant) -> Option<bool> {
        {
            let mut b = self.buf.lock();
            if b.closed {
                return None;
            }
            b.items.push((item, at));
            // SeqCst pairs with `plan`: either the timer sees this item after publishing its
            // plan, or this push sees the plan and signals when the deadline is earlier.
            self.len.store(b.items.len(), Ordering::SeqCst);
        }
        Some(self.nanos(at) < self.planned.load(Ordering::SeqCst))
    }

    /// Whether the inbox looks empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::SeqCst) == 0
    }

    /// Moves the buffered adds into `out` (which must be empty), keeping `out`'s allocation. With
    /// `close`, later pushes are refused.
    pub(crate) fn take_into(&self, out: &mut Vec<Delayed<T>>, close: bool) {
        let mut b = self.buf.lock();
        std::mem::swap(&mut b.items, out);
        b.closed |= close;
        self.len.store(0, Ordering::SeqCst);
    }

    /// The timer thread publishes when it will next wake (`None`: only when signalled). It must
    /// check [`is_empty`](Inbox::is_empty) afterwards and not sleep if the inbox has items.
    pub(crate) fn plan(&self, next: Option<Instant>) {
        let n = next.map_or(u64::MAX, |t| self.nanos(t));
        self.planned.store(n, Ordering::SeqCst);
    }
}
