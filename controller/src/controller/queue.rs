//! The controller's work queue: kcache's priority queue (the default) or the plain rate-limiting
//! queue.

use kcache_core::ObjectKey;
use kcache_workqueue::{PriorityQueue, Queue, QueueConfig, RateLimiter, RateLimitingQueue};
use std::fmt;
use std::ops::Deref;
use std::time::Duration;

/// The queue between a [`Controller`](super::Controller)'s event handlers and its workers.
///
/// By default a [`PriorityQueue`]: keys from an informer's initial list and from the controller's
/// periodic resync go in at [`LOW`](ControllerQueue::LOW) priority, keys of watched changes at
/// normal priority, so after a restart or a resync a real change is not reconciled behind every
/// no-op one (controller-runtime's behaviour); no key starves (see [`PriorityQueue`]'s bound).
/// [`ControllerBuilder::priority_queue(false)`](super::ControllerBuilder::priority_queue) keeps
/// the plain [`RateLimitingQueue`], where every key is FIFO.
///
/// It derefs to [`Queue`] (`add` at normal priority, `len`, `in_flight`, `get`, `done`, …).
#[derive(Clone)]
pub struct ControllerQueue {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Priority(PriorityQueue<ObjectKey>),
    Plain(RateLimitingQueue<ObjectKey>),
}

impl ControllerQueue {
    /// The priority of initial-list and resync keys.
    pub const LOW: i32 = PriorityQueue::<ObjectKey>::LOW;

    pub(crate) fn new(
        priority: bool,
        limiter: impl RateLimiter<ObjectKey> + 'static,
        config: QueueConfig,
    ) -> Self {
        let kind = if priority {
            Kind::Priority(PriorityQueue::with_config(limiter, config))
        } else {
            Kind::Plain(RateLimitingQueue::with_config(limiter, config))
        };
        Self { kind }
    }

    /// Whether this is the priority queue (not the plain one).
    pub fn is_priority(&self) -> bool {
        matches!(self.kind, Kind::Priority(_))
    }

    /// Adds `key` at `priority` (the plain queue ignores the priority). `false` only when the
    /// queue is shutting down.
    pub fn add_with_priority(&self, key: ObjectKey, priority: i32) -> bool {
        match &self.kind {
            Kind::Priority(q) => q.add_with_priority(key, priority),
            Kind::Plain(q) => q.add(key),
        }
    }

    /// The priority `key` is queued at (`None` if it is not queued, or on the plain queue).
    pub fn priority_of(&self, key: &ObjectKey) -> Option<i32> {
        match &self.kind {
            Kind::Priority(q) => q.priority_of(key),
            Kind::Plain(_) => None,
        }
    }

    /// Adds `key` at normal priority once `delay` has passed.
    pub fn add_after(&self, key: ObjectKey, delay: Duration) -> bool {
        match &self.kind {
            Kind::Priority(q) => q.add_after(key, delay),
            Kind::Plain(q) => q.add_after(key, delay),
        }
    }

    /// Adds `key` at normal priority after the rate limiter's delay.
    pub fn add_rate_limited(&self, key: ObjectKey) -> bool {
        match &self.kind {
            Kind::Priority(q) => q.add_rate_limited(key),
            Kind::Plain(q) => q.add_rate_limited(key),
        }
    }

    /// Clears `key`'s retry history.
    pub fn forget(&self, key: &ObjectKey) {
        match &self.kind {
            Kind::Priority(q) => q.forget(key),
            Kind::Plain(q) => q.forget(key),
        }
    }

    /// How many times `key` was retried since it was last forgotten.
    pub fn num_requeues(&self, key: &ObjectKey) -> usize {
        match &self.kind {
            Kind::Priority(q) => q.num_requeues(key),
            Kind::Plain(q) => q.num_requeues(key),
        }
    }

    /// The number of keys waiting for their delay.
    pub fn waiting_len(&self) -> usize {
        match &self.kind {
            Kind::Priority(q) => q.waiting_len(),
            Kind::Plain(q) => q.waiting_len(),
        }
    }
}

impl Deref for ControllerQueue {
    type Target = Queue<ObjectKey>;
    fn deref(&self) -> &Queue<ObjectKey> {
        match &self.kind {
            Kind::Priority(q) => q,
            Kind::Plain(q) => q,
        }
    }
}

impl fmt::Debug for ControllerQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerQueue")
            .field("priority", &self.is_priority())
            .finish_non_exhaustive()
    }
}
