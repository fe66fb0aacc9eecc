//! `pop_batch`: several keys per lock hand-off, for a popper that keeps up with a fast writer.

use crate::core::{Next, Taken};
use crate::fifo::State;
use crate::spin::WriteSignal;
use crate::{DeltaFifo, Deltas, PopError};
use kcache_core::Meta;
use std::collections::VecDeque;
use std::convert::Infallible;

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// Takes up to `max` (at least 1) of the oldest keys that can be handed out, under one lock,
    /// and hands each key's deltas to `process` in queue order, then marks them all processed
    /// under one lock. Blocks like [`pop`](Self::pop) while nothing can be taken. Returns how
    /// many keys were processed.
    ///
    /// Every rule of `pop` holds per key (a key is never handed to two poppers; its deltas keep
    /// their order); the keys of a batch count as being processed until the whole batch is done,
    /// so [`is_idle`](Self::is_idle) and [`has_synced`](Self::has_synced) turn true only then.
    ///
    /// With nothing to take, the popper spins briefly for a write (as `pop` does), then a little
    /// longer for up to `max` writes, so under a steady stream of writes it takes several keys
    /// per lock instead of contending for the lock once per key. That costs a popper that only
    /// ever gets single writes a few microseconds of latency per batch.
    ///
    /// `process` handles its own errors (an informer logs them): a batch does not stop early.
    /// If `process` panics, its key counts as processed (as in `pop`) and the batch's keys not
    /// yet handed out go back to the front of the queue, ahead of anything that arrived since.
    ///
    /// # Errors
    /// [`PopError::Closed`] once [`close`](Self::close)d and nothing is queued.
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
    /// for name in ["a", "b", "c"] {
    ///     fifo.add(Arc::new(Pod(name)))?;
    /// }
    /// let mut seen = Vec::new();
    /// let n = fifo.pop_batch(2, |deltas, _initial| {
    ///     seen.extend(deltas.iter().filter_map(|d| d.object.object()).map(|p| p.0));
    /// })?;
    /// assert_eq!((n, seen), (2, vec!["a", "b"]));
    /// assert_eq!(fifo.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pop_batch(
        &self,
        max: usize,
        mut process: impl FnMut(Deltas<T>, bool),
    ) -> Result<usize, PopError<Infallible>> {
        let max = max.max(1);
        let mut batch = Batch::new(self);
        let mut st = self.lock();
        let mut spun = false;
        loop {
            match Self::take_into(&mut st, &mut batch, max) {
                _ if !batch.is_empty() => break,
                Next::Closed => return Err(PopError::Closed),
                Next::Wait if !spun && WriteSignal::spins() => {
                    spun = true;
                    let seen = self.writes.seen();
                    drop(st);
                    if self.writes.spin_for_write(seen) {
                        self.writes.spin_for_writes(seen, max as u64);
                    }
                    st = self.lock();
                }
                Next::Wait | Next::Ready(_) => {
                    self.block(&mut st);
                    spun = false;
                }
            }
        }
        drop(st);
        Ok(batch.run(&mut process))
    }

    /// Moves up to `max - batch.pending.len()` more keys that can be handed out into `batch`,
    /// under the held lock; the last `Next` seen when it stopped early.
    pub(crate) fn take_into(st: &mut State<T>, batch: &mut Batch<'_, T, M>, max: usize) -> Next<T> {
        loop {
            if batch.pending.len() >= max {
                return Next::Wait;
            }
            match st.core.next() {
                Next::Ready(t) => batch.pending.push_back(t),
                other => return other,
            }
        }
    }
}

impl<'a, T, M: Meta<T>> Batch<'a, T, M> {
    pub(crate) fn new(fifo: &'a DeltaFifo<T, M>) -> Self {
        Self {
            fifo,
            pending: VecDeque::new(),
            done: Vec::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Hands each taken key to `process` in order; the keys are finished when `self` drops.
    pub(crate) fn run(mut self, process: &mut impl FnMut(Deltas<T>, bool)) -> usize {
        while let Some(taken) = self.pending.pop_front() {
            self.done.push(taken.key.clone());
            process(taken.deltas, taken.is_in_initial_list);
        }
        self.done.len()
    }
}

/// The keys of a batch: finished when dropped (after the batch, or while unwinding from a
/// panicking process function, when the keys not yet handed out are given back instead).
pub(crate) struct Batch<'a, T, M: Meta<T>> {
    fifo: &'a DeltaFifo<T, M>,
    pending: VecDeque<Taken<T>>,
    done: Vec<kcache_core::ObjectKey>,
}

impl<T, M: Meta<T>> Drop for Batch<'_, T, M> {
    fn drop(&mut self) {
        if self.done.is_empty() && self.pending.is_empty() {
            return;
        }
        let mut st = self.fifo.lock();
        for key in &self.done {
            st.core.finish(key);
        }
        while let Some(taken) = self.pending.pop_back() {
            st.core.untake(taken);
        }
        self.fifo.notify(st);
    }
}
