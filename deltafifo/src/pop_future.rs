//! `PopFuture`: `DeltaFifo::pop` for async callers, parked on a waker list.

use crate::core::Next;
use crate::fifo::State;
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
        this.fifo.unpark(&mut st, &mut this.waker_id);
        loop {
            match st.core.next() {
                Next::Ready(taken) => {
                    drop(st);
                    return Poll::Ready(this.fifo.process(taken, process));
                }
                Next::Closed => return Poll::Ready(Err(PopError::Closed)),
                Next::Wait => {
                    if this.fifo.park(&mut st, cx, &mut this.waker_id) {
                        this.process = Some(process);
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

impl<T, M: Meta<T>, F> Drop for PopFuture<'_, T, M, F> {
    fn drop(&mut self) {
        self.fifo.unpark_unlocked(&mut self.waker_id);
    }
}

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// Registers the task's waker (lock held), publishing the waiter count with a last look at
    /// the inbox (see `inbox.rs`). `true`: parked, return `Pending`; `false`: writes arrived
    /// and were applied, look again (the waker is not left registered).
    pub(crate) fn park(
        &self,
        st: &mut State<T>,
        cx: &Context<'_>,
        waker_id: &mut Option<u64>,
    ) -> bool {
        let id = st.next_waker_id;
        st.next_waker_id = st.next_waker_id.wrapping_add(1);
        st.wakers.insert(id, cx.waker().clone());
        let waiters = st.waiters();
        if self.apply_inbox(st, Some(waiters)) {
            st.wakers.remove(&id);
            self.publish_waiters(st);
            return false;
        }
        *waker_id = Some(id);
        true
    }

    /// Removes the waker `park` registered, if it is still there (lock held).
    pub(crate) fn unpark(&self, st: &mut State<T>, waker_id: &mut Option<u64>) {
        if let Some(id) = waker_id.take() {
            if st.wakers.remove(&id).is_some() {
                self.publish_waiters(st);
            }
        }
    }

    /// [`unpark`](Self::unpark) for a future being dropped (takes the lock if it has to).
    pub(crate) fn unpark_unlocked(&self, waker_id: &mut Option<u64>) {
        if waker_id.is_some() {
            let mut st = self.lock();
            self.unpark(&mut st, waker_id);
        }
    }
}
