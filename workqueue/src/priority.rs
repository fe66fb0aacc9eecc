//! `PriorityQueue`: a rate-limiting work queue whose ready items go by priority, and where no item
//! starves.

use crate::config::QueueConfig;
use crate::delaying::{add_after_from, add_at_from};
use crate::queue::ranked::SHARE;
use crate::queue::Queue;
use crate::rate_limiter::{default_controller_rate_limiter, RateLimiter};
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A work queue that hands out higher-priority items first (controller-runtime's priority queue,
/// with client-go's queue rules and a bound on how long any item waits).
///
/// - Priorities are `i32`, higher first. [`add`](Queue::add), [`add_after`](PriorityQueue::add_after)
///   and [`add_rate_limited`](PriorityQueue::add_rate_limited) use [`NORMAL`](PriorityQueue::NORMAL);
///   the `_with_priority` forms take one. Controllers put initial-list and resync events at
///   [`LOW`](PriorityQueue::LOW), so a real change is not stuck behind them.
/// - Within a priority, items go in the order they became ready (first add).
/// - An item added again while pending keeps its place and takes the higher of its priorities:
///   it moves up, never down. This holds while it is ready, in flight (it is queued again at
///   [`done`](Queue::done), at the highest priority it was re-added with) and waiting for a delay
///   (a deadline only moves earlier, as in [`DelayingQueue`](crate::DelayingQueue)).
/// - Every rule of [`Queue`] holds: deduplication, an item never handed to two workers, re-add
///   while processing, shutdown and [`shut_down_with_drain`](Queue::shut_down_with_drain),
///   `get_async`, client-go's metrics; plus a `workqueue_depth` gauge per priority through
///   [`MetricsProvider::new_priority_depth_metric`](crate::MetricsProvider::new_priority_depth_metric).
///
/// # No starvation: the bound
/// One hand-off in [`HANDOFF_SHARE`](PriorityQueue::HANDOFF_SHARE) (every 8th `get`) goes to the
/// item that has been ready the longest, whatever its priority; the others go to the highest
/// priority. An item that becomes ready while `n` items are ready is therefore handed out within
/// `8 × (n + 1)` hand-offs, however many items of higher priority are added meanwhile: only the
/// `n` items ready before it can be older, and each eighth hand-off takes one of them or it. (A
/// raise keeps an item's age; an item queued again after `done` is a new arrival.) At one priority
/// every hand-off takes the oldest item, so the queue is the plain FIFO.
///
/// # Examples
/// ```
/// use kcache_workqueue::PriorityQueue;
///
/// let queue = PriorityQueue::new();
/// queue.add_with_priority("resync-a", PriorityQueue::<&str>::LOW);
/// queue.add_with_priority("resync-b", PriorityQueue::<&str>::LOW);
/// queue.add("changed"); // NORMAL
/// queue.add_with_priority("resync-b", 10); // moves up, keeps its place among priority 10
/// assert_eq!(queue.get(), Some("resync-b"));
/// assert_eq!(queue.get(), Some("changed"));
/// assert_eq!(queue.get(), Some("resync-a"));
/// # for k in ["resync-a", "resync-b", "changed"] { queue.done(&k)?; }
/// # Ok::<(), kcache_workqueue::NotProcessing>(())
/// ```
///
/// # Panics
/// The constructors panic if the operating system cannot start the timer thread.
pub struct PriorityQueue<T> {
    queue: Queue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> PriorityQueue<T> {
    /// The priority of initial-list and resync events (controller-runtime's `LowPriority`).
    pub const LOW: i32 = -100;
    /// The priority of [`add`](Queue::add) and of the forms without `_with_priority`.
    pub const NORMAL: i32 = 0;
    /// One hand-off in this many goes to the item ready the longest (see the type's docs).
    pub const HANDOFF_SHARE: u64 = SHARE;
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> PriorityQueue<T> {
    /// A priority queue with client-go's default controller rate limiter, no name, no metrics
    /// and the system clock.
    pub fn new() -> Self {
        Self::with_config(default_controller_rate_limiter(), QueueConfig::new())
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> PriorityQueue<T> {
    /// A priority queue retrying through `limiter`, built from `config`. The limiter keeps its
    /// own clock: give it the same fake clock in tests.
    pub fn with_config(limiter: impl RateLimiter<T> + 'static, config: QueueConfig) -> Self {
        let queue = Queue::build_with(config, true);
        crate::background::spawn(&queue.shared);
        Self {
            queue,
            limiter: Arc::new(limiter),
        }
    }

    /// Adds `item` at `priority`; if it is pending, raises its priority (never lowers it). Returns
    /// `false` only when refused because the queue is shutting down.
    pub fn add_with_priority(&self, item: T, priority: i32) -> bool {
        self.queue.shared.add_with_priority(item, priority)
    }

    /// Adds `item` at [`NORMAL`](PriorityQueue::NORMAL) priority once `delay` has passed.
    pub fn add_after(&self, item: T, delay: Duration) -> bool {
        self.add_after_with_priority(item, delay, Self::NORMAL)
    }

    /// Adds `item` at `priority` once `delay` has passed; a zero delay is
    /// [`add_with_priority`](PriorityQueue::add_with_priority). A pending deadline only moves
    /// earlier, a pending priority only up. Counts in `workqueue_retries_total`.
    pub fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) -> bool {
        add_after_from(&self.queue.shared, item, delay, priority)
    }

    /// Adds `item` at `priority` at `deadline`; a deadline not in the future is an immediate add.
    pub fn add_at_with_priority(&self, item: T, deadline: Instant, priority: i32) -> bool {
        let now = self.queue.shared.clock.now();
        add_at_from(&self.queue.shared, item, deadline, now, priority)
    }

    /// Adds `item` at [`NORMAL`](PriorityQueue::NORMAL) priority after the limiter's delay.
    pub fn add_rate_limited(&self, item: T) -> bool {
        self.add_rate_limited_with_priority(item, Self::NORMAL)
    }

    /// Adds `item` at `priority` after the delay the limiter gives (which records the retry).
    pub fn add_rate_limited_with_priority(&self, item: T, priority: i32) -> bool {
        let delay = self.limiter.when(&item);
        self.add_after_with_priority(item, delay, priority)
    }

    /// Clears `item`'s retry history in the limiter.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was retried since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }

    /// The number of items waiting for their delay.
    pub fn waiting_len(&self) -> usize {
        self.queue.shared.waiting()
    }

    /// The priority `item` is ready at, if it is ready (not in flight, not waiting).
    pub fn priority_of(&self, item: &T) -> Option<i32> {
        self.queue.shared.ready.ranked()?.priority_of(item)
    }

    /// Ready items per priority, highest first (priorities without ready items left out).
    pub fn depth_by_priority(&self) -> Vec<(i32, usize)> {
        self.queue
            .shared
            .ready
            .ranked()
            .map(|r| r.depth_by_priority())
            .unwrap_or_default()
    }

    /// The queue under this one (a cheap handle to the same queue; its `add` is at
    /// [`NORMAL`](PriorityQueue::NORMAL) priority).
    pub fn queue(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T> Deref for PriorityQueue<T> {
    type Target = Queue<T>;
    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Default for PriorityQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for PriorityQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T> fmt::Debug for PriorityQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityQueue").finish_non_exhaustive()
    }
}
