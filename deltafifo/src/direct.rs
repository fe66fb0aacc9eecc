//! Writing past the queue: [`DeltaFifo::write_or_apply`] hands an add or an update straight to
//! the consumer when nothing is pending, so a FIFO that keeps up costs no queue round trip
//! (client-go's newer "RealFIFO" goes the same way).

use crate::inbox::key_text;
use crate::{DeltaFifo, DeltaFifoError};
use kcache_core::{KeyText, Meta};
use std::sync::Arc;

/// What [`DeltaFifo::write_or_apply`] did with the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The consumer applied it directly.
    Applied,
    /// It was queued, as [`add`](DeltaFifo::add) or [`update`](DeltaFifo::update) queue.
    Queued,
}

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// [`add`](Self::add) (`added`) or [`update`](Self::update), except when the FIFO is
    /// *caught up*: nothing queued, nothing being processed, the initial population processed
    /// ([`has_synced`](Self::has_synced)), not closed. Then `apply(key, obj)` gets the
    /// (transformed) object at once instead, under the FIFO's lock, so no pop can interleave:
    /// a consumer that applies it as it would apply a popped `Added`/`Updated` delta sees the
    /// same sequence of changes, in the same order, as if it had been queued and popped. `apply`
    /// may decline by handing the object back (`Err(obj)`); it is then queued.
    ///
    /// The key is computed once and passed to `apply` as checked text.
    ///
    /// # Errors
    /// A key accessor or transformer failure; the FIFO is unchanged and `apply` is not called.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{Object, ResourceVersion};
    /// # use kcache_deltafifo::{DeltaFifo, Written};
    /// # use std::sync::Arc;
    /// # struct Pod(&'static str);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { None }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { ResourceVersion::default() }
    /// # }
    /// let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    /// fifo.replace(Vec::new(), "1".into())?; // an empty first list: synced, caught up
    /// let mut applied = Vec::new();
    /// let how = fifo.write_or_apply(Arc::new(Pod("a")), true, |key, _| {
    ///     applied.push(key.to_string());
    ///     Ok(())
    /// })?;
    /// assert_eq!((how, applied, fifo.len()), (Written::Applied, vec!["a".to_string()], 0));
    /// // Declined: queued as an add.
    /// let how = fifo.write_or_apply(Arc::new(Pod("b")), true, |_, obj| Err(obj))?;
    /// assert_eq!((how, fifo.len()), (Written::Queued, 1));
    /// // Something is queued now: the next write queues behind it.
    /// let how = fifo.write_or_apply(Arc::new(Pod("c")), false, |_, _| Ok(()))?;
    /// assert_eq!((how, fifo.len()), (Written::Queued, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_or_apply(
        &self,
        obj: Arc<T>,
        added: bool,
        apply: impl FnOnce(&KeyText, Arc<T>) -> Result<(), Arc<T>>,
    ) -> Result<Written, DeltaFifoError> {
        let key = key_text::<T, M>(&obj)?;
        let obj = self.transform(obj)?;
        let mut st = self.lock();
        let core = &st.core;
        let obj = if core.is_idle() && core.has_synced() && !core.is_closed() {
            match apply(&key, obj) {
                Ok(()) => return Ok(Written::Applied),
                Err(obj) => obj,
            }
        } else {
            obj
        };
        if added {
            st.core.add(key, obj);
        } else {
            st.core.update(key, obj);
        }
        self.notify(st);
        Ok(Written::Queued)
    }
}
