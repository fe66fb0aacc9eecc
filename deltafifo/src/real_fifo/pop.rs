//! Popping a [`RealFifo`]: a batch of consecutive entries is taken under the lock, processed
//! with the lock released, then marked done (only then does the initial population shrink).

use super::{wake, Batch, RealFifo, State};
use crate::FifoClosed;
use kcache_core::Meta;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What the queue can hand out now.
enum Take<T> {
    Batch(Batch<T>),
    Wait,
    Closed,
}

impl<T> State<T> {
    /// Takes up to `max` (at least one) consecutive entries: a run of deltas, or one
    /// `ReplacedAll`/`SyncAll` alone. Waits while another popper processes (order).
    fn take(&mut self, max: usize) -> Take<T> {
        if self.processing {
            return Take::Wait;
        }
        let Some(front) = self.queue.front() else {
            return if self.closed {
                Take::Closed
            } else {
                Take::Wait
            };
        };
        let n = if front.batchable() {
            let max = max.max(1);
            self.queue
                .iter()
                .take(max)
                .take_while(|e| e.batchable())
                .count()
        } else {
            1
        };
        let entries: Vec<_> = self.queue.drain(..n).collect();
        let initial = self.initial.min(entries.len());
        self.processing = true;
        Take::Batch(Batch { entries, initial })
    }
}

/// Marks the taken batch processed when dropped (even if processing panicked).
struct Done<'a, T, M> {
    fifo: &'a RealFifo<T, M>,
    initial: usize,
}

impl<T, M> Drop for Done<'_, T, M> {
    fn drop(&mut self) {
        let mut st = self.fifo.state.lock();
        st.processing = false;
        st.initial -= self.initial.min(st.initial);
        let wakers = std::mem::take(&mut st.wakers);
        drop(st);
        wake(wakers);
    }
}

impl<T, M: Meta<T>> RealFifo<T, M> {
    /// Runs `process` on a batch taken under the lock, with the lock released.
    fn run<R>(&self, batch: Batch<T>, process: impl FnOnce(Batch<T>) -> R) -> R {
        let done = Done {
            fifo: self,
            initial: batch.initial,
        };
        let r = process(batch);
        drop(done);
        r
    }

    /// Takes up to `max` consecutive entries (at least one; a
    /// [`ReplacedAll`](super::Entry::ReplacedAll) or [`SyncAll`](super::Entry::SyncAll) alone)
    /// and hands them to `process`, without holding the queue's lock meanwhile; returns its
    /// result, or `None` if nothing can be taken now (nothing queued, or another popper is
    /// processing).
    ///
    /// # Errors
    /// [`FifoClosed`] once the queue is closed and empty.
    pub fn try_pop_batch<R>(
        &self,
        max: usize,
        process: impl FnOnce(Batch<T>) -> R,
    ) -> Result<Option<R>, FifoClosed> {
        let taken = self.lock().take(max);
        match taken {
            Take::Batch(batch) => Ok(Some(self.run(batch, process))),
            Take::Wait => Ok(None),
            Take::Closed => Err(FifoClosed),
        }
    }

    /// [`try_pop_batch`](Self::try_pop_batch) for async callers: waits until a batch can be
    /// taken (woken by writes, `close` and finished batches; it never polls in a loop).
    /// Dropping the future before it completes takes nothing.
    pub fn pop_batch_async<R, F>(&self, max: usize, process: F) -> RealPopFuture<'_, T, M, F>
    where
        F: FnOnce(Batch<T>) -> R,
    {
        RealPopFuture {
            fifo: self,
            max,
            process: Some(process),
        }
    }
}

/// The future of [`RealFifo::pop_batch_async`].
#[must_use = "futures do nothing unless polled"]
pub struct RealPopFuture<'a, T, M, F> {
    fifo: &'a RealFifo<T, M>,
    max: usize,
    process: Option<F>,
}

// No field is pinned.
impl<T, M, F> Unpin for RealPopFuture<'_, T, M, F> {}

impl<T, M, F> fmt::Debug for RealPopFuture<'_, T, M, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealPopFuture")
            .field("max", &self.max)
            .field("done", &self.process.is_none())
            .finish_non_exhaustive()
    }
}

impl<T, M, F, R> Future for RealPopFuture<'_, T, M, F>
where
    M: Meta<T>,
    F: FnOnce(Batch<T>) -> R,
{
    type Output = Result<R, FifoClosed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(process) = this.process.take() else {
            // Polled after completion: take nothing, answer as a closed queue.
            return Poll::Ready(Err(FifoClosed));
        };
        let mut st = this.fifo.lock();
        match st.take(this.max) {
            Take::Batch(batch) => {
                drop(st);
                Poll::Ready(Ok(this.fifo.run(batch, process)))
            }
            Take::Closed => Poll::Ready(Err(FifoClosed)),
            Take::Wait => {
                this.process = Some(process);
                if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    st.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}
