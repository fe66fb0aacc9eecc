//! The future of `Queue::get_async`.

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
        let mut g = shared.lock();
        let taken = shared.take(&mut g);
        if taken.is_some() || g.st.is_shutting_down() {
            if let Some(id) = self.id.take() {
                g.waiters.remove(id);
            }
            return Poll::Ready(taken);
        }
        let mut id = self.id;
        g.waiters.register(&mut id, cx.waker());
        drop(g);
        self.id = id;
        Poll::Pending
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Drop for GetAsync<'_, T> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let shared = &self.queue.shared;
        let mut g = shared.lock();
        if !g.waiters.remove(id) && g.st.len() > 0 {
            // We were woken for an item we will never take: pass the wake-up on.
            shared.wake(&mut g, 1);
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
