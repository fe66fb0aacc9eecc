//! `PopBatchFuture`: `DeltaFifo::pop_batch` for async callers.

use crate::core::Next;
use crate::pop_batch::Batch;
use crate::{DeltaFifo, Deltas, PopError};
use kcache_core::Meta;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of [`DeltaFifo::pop_batch_async`]. Parked on a waker (no polling) while nothing
/// can be taken; dropping it before completion takes nothing.
#[must_use = "futures do nothing unless polled"]
pub struct PopBatchFuture<'a, T, M: Meta<T>, F> {
    fifo: &'a DeltaFifo<T, M>,
    max: usize,
    process: Option<F>,
    waker_id: Option<u64>,
}

// No field is pinned: the future never hands out a pinned reference to its fields.
impl<T, M: Meta<T>, F> Unpin for PopBatchFuture<'_, T, M, F> {}

impl<T, M: Meta<T>, F> fmt::Debug for PopBatchFuture<'_, T, M, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PopBatchFuture")
            .field("max", &self.max)
            .field("done", &self.process.is_none())
            .finish_non_exhaustive()
    }
}

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// [`pop_batch`](Self::pop_batch) as a future: parks the task (no polling, no spinning)
    /// until a key can be handed out or the FIFO is closed and empty, then takes up to `max` keys
    /// under one lock and runs `process` on each inside `poll`. Resolves to how many keys were
    /// processed.
    ///
    /// # Errors
    /// [`PopError::Closed`] once [`close`](Self::close)d and nothing is queued.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes takes nothing from the FIFO.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{Object, ResourceVersion};
    /// # use kcache_deltafifo::DeltaFifo;
    /// # use std::sync::Arc;
    /// # struct Pod(&'static str);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { None }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
    /// # }
    /// let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    /// fifo.add(Arc::new(Pod("a")))?;
    /// fifo.add(Arc::new(Pod("b")))?;
    /// let mut names = Vec::new();
    /// let n = futures::executor::block_on(fifo.pop_batch_async(8, |deltas, _| {
    ///     names.extend(deltas.iter().filter_map(|d| d.object.object()).map(|p| p.0));
    /// }))?;
    /// assert_eq!((n, names), (2, vec!["a", "b"]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pop_batch_async<F>(&self, max: usize, process: F) -> PopBatchFuture<'_, T, M, F>
    where
        F: FnMut(Deltas<T>, bool),
    {
        PopBatchFuture {
            fifo: self,
            max: max.max(1),
            process: Some(process),
            waker_id: None,
        }
    }
}

impl<T, M, F> Future for PopBatchFuture<'_, T, M, F>
where
    M: Meta<T>,
    F: FnMut(Deltas<T>, bool),
{
    type Output = Result<usize, PopError<Infallible>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(mut process) = this.process.take() else {
            // Polled after completion: behave like a closed FIFO rather than panic.
            return Poll::Ready(Err(PopError::Closed));
        };
        let mut st = this.fifo.lock();
        this.fifo.unpark(&mut st, &mut this.waker_id);
        let mut batch = Batch::new(this.fifo);
        loop {
            match DeltaFifo::take_into(&mut st, &mut batch, this.max) {
                _ if !batch.is_empty() => {
                    drop(st);
                    return Poll::Ready(Ok(batch.run(&mut process)));
                }
                Next::Closed => return Poll::Ready(Err(PopError::Closed)),
                Next::Wait | Next::Ready(_) => {
                    if this.fifo.park(&mut st, cx, &mut this.waker_id) {
                        this.process = Some(process);
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

impl<T, M: Meta<T>, F> Drop for PopBatchFuture<'_, T, M, F> {
    fn drop(&mut self) {
        self.fifo.unpark_unlocked(&mut self.waker_id);
    }
}
