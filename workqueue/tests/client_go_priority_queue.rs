//! client-go's `util/workqueue/queue_test.go` cases (ported in `client_go_queue/cases.rs`) run
//! against the priority queue with every item at one priority: there it must behave exactly as
//! client-go's queue (FIFO, dedup, re-add while processing, shutdown and drain).

use kcache_core::FakeClock;
use kcache_workqueue::{PriorityQueue, Queue, QueueConfig, RateLimiter};
use std::sync::Arc;
use std::time::Duration;

/// A limiter the cases never use (they only add, get and done).
struct NoDelay;

impl<T> RateLimiter<T> for NoDelay {
    fn when(&self, _: &T) -> Duration {
        Duration::ZERO
    }
    fn forget(&self, _: &T) {}
    fn num_requeues(&self, _: &T) -> usize {
        0
    }
}

fn queue<T: Clone + Eq + std::hash::Hash + Send + 'static>() -> Queue<T> {
    let config = QueueConfig::new().clock(Arc::new(FakeClock::new()));
    PriorityQueue::with_config(NoDelay, config).queue().clone()
}

#[path = "client_go_queue/cases.rs"]
mod cases;
