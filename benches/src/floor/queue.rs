//! `FloorQueue`: a crossbeam channel.

use crate::api::WorkQueue;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::fmt;

/// An unbounded crossbeam channel used as a queue: no dedup, `done` does nothing. `shut_down`
/// sends one end marker per worker (the count given to [`new`](FloorQueue::new)), so each worker
/// drains what was sent before and then gets `None`.
///
/// # Examples
/// ```
/// use kcache_benches::api::WorkQueue;
/// use kcache_benches::floor::FloorQueue;
///
/// let q = FloorQueue::new(1);
/// q.add(1);
/// q.add(1); // no dedup
/// q.shut_down();
/// assert_eq!((q.get(), q.get(), q.get()), (Some(1), Some(1), None));
/// ```
pub struct FloorQueue<T> {
    tx: Sender<Option<T>>,
    rx: Receiver<Option<T>>,
    workers: usize,
}

impl<T> FloorQueue<T> {
    /// A queue whose shutdown stops `workers` workers.
    pub fn new(workers: usize) -> Self {
        let (tx, rx) = unbounded();
        Self { tx, rx, workers }
    }
}

impl<T> Clone for FloorQueue<T> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            rx: self.rx.clone(),
            workers: self.workers,
        }
    }
}

impl<T> fmt::Debug for FloorQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FloorQueue")
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> WorkQueue<T> for FloorQueue<T> {
    fn add(&self, item: T) {
        // Cannot fail: this handle holds a receiver.
        let _ = self.tx.send(Some(item));
    }
    fn get(&self) -> Option<T> {
        self.rx.recv().ok().flatten()
    }
    fn done(&self, _: &T) -> bool {
        true
    }
    fn shut_down(&self) {
        for _ in 0..self.workers {
            let _ = self.tx.send(None);
        }
    }
}
