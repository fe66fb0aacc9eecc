//! Ported from client-go's `util/workqueue/queue_test.go` (kubernetes/client-go), rewritten in our
//! words. Where kcache deliberately differs from client-go (the differences the crate docs list), the
//! test asserts kcache's behaviour and says so. client-go's `TestFind` is not ported: `Find` is a
//! debugging helper kcache does not have. The cases live in `client_go_queue/cases.rs`, shared
//! with the priority queue's run of them.

use kcache_core::FakeClock;
use kcache_workqueue::{Queue, QueueConfig};
use std::sync::Arc;

fn queue<T: Clone + Eq + std::hash::Hash + Send + 'static>() -> Queue<T> {
    Queue::with_config(QueueConfig::new().clock(Arc::new(FakeClock::new())))
}

#[path = "client_go_queue/cases.rs"]
mod cases;
