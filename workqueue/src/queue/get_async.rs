//! The future of `Queue::get_async`.

use super::ready::TaskPark;
use super::Queue;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future returned by [`Queue::get_async`]: resolves to the next item, or `None` once the
/// queue is shut down and empty.
#[must_use = "futures do nothing unless polled"]
pub struct GetAsync<'a, T: Clone + Eq + Hash + Send + 'static> {
    queue: &'a Queue<T>,
    id: Option<u64>,
}

impl<'a, T: Clone + Eq + Hash + Send + 'static> GetAsync<'a, T> {
    pub(super) fn new(queue: &'a Queue<T>) -> Self {
        Self { queue, id: None }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Future for GetAsync<'_, T> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let shared = &self.queue.shared;
        loop {
            if let Some(item) = shared.try_take() {
                if let Some(id) = self.id.take() {
                    // Parked and not woken (a spurious poll): leave the sleepers.
                    shared.ready.unpark_task(id, false);
                }
                return Poll::Ready(Some(item));
            }
            match shared.ready.park_task(self.id, cx.waker()) {
                TaskPark::Retry => continue,
                TaskPark::Closed => {
                    if let Some(id) = self.id.take() {
                        shared.ready.unpark_task(id, false);
                    }
                    return Poll::Ready(None);
                }
                TaskPark::Parked(id) => {
                    self.id = Some(id);
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Drop for GetAsync<'_, T> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // Woken for an item we will never take: pass the wake-up on.
            self.queue.shared.ready.unpark_task(id, true);
        }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> fmt::Debug for GetAsync<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GetAsync")
            .field("parked", &self.id.is_some())
            .finish()
    }
}
