//! `PopFuture`: `DeltaFifo::pop` for async callers, parked on a waker list.

use crate::core::Next;
use crate::{DeltaFifo, Deltas, PopError};
use kcache_core::Meta;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of [`DeltaFifo::pop_async`].
///
/// It registers its waker with the FIFO and is woken by every write, `close` and finished key;
/// it never polls in a loop. Dropping it before completion takes nothing.
#[must_use = "futures do nothing unless polled"]
pub struct PopFuture<'a, T, M: Meta<T>, F> {
    fifo: &'a DeltaFifo<T, M>,
    process: Option<F>,
    waker_id: Option<u64>,
}

// No field is pinned: the future never hands out a pinned reference to its fields.
impl<T, M: Meta<T>, F> Unpin for PopFuture<'_, T, M, F> {}

impl<'a, T, M: Meta<T>, F> PopFuture<'a, T, M, F> {
    pub(crate) fn new(fifo: &'a DeltaFifo<T, M>, process: F) -> Self {
        Self {
            fifo,
            process: Some(process),
            waker_id: None,
        }
    }
}

impl<T, M: Meta<T>, F> fmt::Debug for PopFuture<'_, T, M, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PopFuture")
            .field("done", &self.process.is_none())
            .finish_non_exhaustive()
    }
}

impl<T, M, F, R, E> Future for PopFuture<'_, T, M, F>
where
    M: Meta<T>,
    F: FnOnce(Deltas<T>, bool) -> Result<R, E>,
{
    type Output = Result<R, PopError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(process) = this.process.take() else {
            // Polled after completion: behave like a closed FIFO rather than panic.
            return Poll::Ready(Err(PopError::Closed));
        };
        let mut st = this.fifo.lock();
        if let Some(id) = this.waker_id.take() {
            if st.wakers.remove(&id).is_some() {
                this.fifo.publish_waiters(&st);
            }
        }
        loop {
            match st.core.next() {
                Next::Ready(taken) => {
                    drop(st);
                    return Poll::Ready(this.fifo.process(taken, process));
                }
                Next::Closed => return Poll::Ready(Err(PopError::Closed)),
                Next::Wait => {
                    let id = st.next_waker_id;
                    st.next_waker_id = st.next_waker_id.wrapping_add(1);
                    st.wakers.insert(id, cx.waker().clone());
                    // Published together with a last look at the inbox (see `inbox.rs`).
                    let waiters = st.waiters();
                    if this.fifo.apply_inbox(&mut st, Some(waiters)) {
                        st.wakers.remove(&id);
                        this.fifo.publish_waiters(&st);
                        continue;
                    }
                    this.waker_id = Some(id);
                    this.process = Some(process);
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<T, M: Meta<T>, F> Drop for PopFuture<'_, T, M, F> {
    fn drop(&mut self) {
        if let Some(id) = self.waker_id.take() {
            let mut st = self.fifo.lock();
            if st.wakers.remove(&id).is_some() {
                self.fifo.publish_waiters(&st);
            }
        }
    }
}
