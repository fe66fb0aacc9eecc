//! `DelayingQueue`: a queue whose items can be added after a delay.

use crate::config::QueueConfig;
use crate::queue::shared::Scheduled;
use crate::queue::tick::Tick;
use crate::queue::{Queue, Shared};
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::time::{Duration, Instant};

/// A [`Queue`] plus [`add_after`](DelayingQueue::add_after) (client-go's `DelayingInterface`).
///
/// Delayed items wait in one schedule served by one background thread per queue (never a thread or
/// timer per item). `add_after` decides under its item's shard lock only and appends to an inbox
/// the timer sorts, so delayed adds do not contend with the ready queue's producers and workers. It derefs to [`Queue`] for `add`, `get`, `done`, `shut_down` and the rest.
///
/// Differences from client-go, on purpose:
/// - The heap is deduplicated against the ready queue: an item waiting for its delay and added
///   now is handed out once, not once now and again when its delay fires (kubernetes#126027).
/// - `add_after` of an item already queued is a no-op; of an item in flight, it schedules the item
///   for after its `done` and the delay, whichever is later.
/// - A pending delay only ever moves earlier.
/// - [`len`](Queue::len) counts ready items; [`waiting_len`](DelayingQueue::waiting_len) counts the
///   ones waiting in the heap (also exported as the `workqueue_delayed_depth` gauge).
///
/// # Examples
/// ```
/// use kcache_core::FakeClock;
/// use kcache_workqueue::{DelayingQueue, QueueConfig};
/// use std::{sync::Arc, time::Duration};
///
/// let clock = FakeClock::new();
/// let queue = DelayingQueue::with_config(QueueConfig::new().clock(Arc::new(clock.clone())));
/// queue.add_after("retry-me", Duration::from_secs(5));
/// assert_eq!((queue.len(), queue.waiting_len()), (0, 1));
///
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(queue.get(), Some("retry-me")); // blocks until the timer thread moved it
/// ```
///
/// # Panics
/// The constructors panic if the operating system cannot start the timer thread.
pub struct DelayingQueue<T> {
    queue: Queue<T>,
}

impl<T: Clone + Eq + Hash + Send + 'static> DelayingQueue<T> {
    /// A delaying queue with no name, no metrics and the system clock.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A delaying queue built from `config`.
    pub fn with_config(config: QueueConfig) -> Self {
        let queue = Queue::build(config);
        crate::background::spawn(&queue.shared);
        Self { queue }
    }

    /// Adds `item` once `delay` has passed; a zero delay is [`add`](Queue::add). Returns `false`
    /// only when refused because the queue is shutting down. Every call counts in
    /// `workqueue_retries_total`, as in client-go.
    pub fn add_after(&self, item: T, delay: Duration) -> bool {
        add_after_from(&self.queue.shared, item, delay, 0)
    }

    /// Adds `item` at `deadline`; a deadline not in the future is [`add`](Queue::add).
    pub fn add_at(&self, item: T, deadline: Instant) -> bool {
        let now = self.queue.shared.clock.now();
        self.add_at_from(item, deadline, now)
    }

    fn add_at_from(&self, item: T, deadline: Instant, now: Instant) -> bool {
        add_at_from(&self.queue.shared, item, deadline, now, 0)
    }

    /// The number of items waiting for their delay.
    pub fn waiting_len(&self) -> usize {
        self.queue.shared.waiting()
    }

    /// The plain queue under this one (a cheap handle to the same queue).
    pub fn queue(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T> Deref for DelayingQueue<T> {
    type Target = Queue<T>;
    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue").finish_non_exhaustive()
    }
}

/// A delayed add, counted in `workqueue_retries_total`; the timer is signalled if the deadline is
/// earlier than it planned (the delaying and priority queues' shared path).
pub(crate) fn add_at_from<T: Clone + Eq + Hash + Send + 'static>(
    shared: &Shared<T>,
    item: T,
    deadline: Instant,
    now: Instant,
    priority: i32,
) -> bool {
    let (at, now) = (shared.epoch.tick(deadline), shared.epoch.tick(now));
    schedule(shared, item, at, now, priority)
}

/// A delay from now, counted and signalled as [`add_at_from`] does.
pub(crate) fn add_after_from<T: Clone + Eq + Hash + Send + 'static>(
    shared: &Shared<T>,
    item: T,
    delay: Duration,
    priority: i32,
) -> bool {
    let (now, at) = shared.epoch.after(shared.clock.now(), delay);
    schedule(shared, item, at, now, priority)
}

/// The two's common path: the retry is counted, then the item scheduled.
fn schedule<T: Clone + Eq + Hash + Send + 'static>(
    shared: &Shared<T>,
    item: T,
    at: Tick,
    now: Tick,
    priority: i32,
) -> bool {
    if let Some(m) = &shared.metrics {
        m.retries.inc();
    }
    match shared.add_at(item, at, now, priority) {
        Scheduled::Refused => false,
        Scheduled::Accepted => true,
        Scheduled::Waiting { at } => {
            shared.after_schedule(at);
            true
        }
    }
}
