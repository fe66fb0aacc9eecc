//! `DeltaFifo`: the locking driver around the pure bookkeeping in `core`.

use crate::core::{FifoCore, Next, Taken};
use crate::inbox::{key_text, Inbox, Op};
use crate::options::Transformer;
use crate::spin::WriteSignal;
use crate::sync::{Condvar, Mutex, MutexGuard};
use crate::{DeltaFifoError, DeltaFifoOptions, Deltas, PopError, PopFuture};
use kcache_core::ResourceVersion;
use kcache_core::{KeyError, KnownObjects, Meta, ObjectAccessor, ObjectKey, ReflectorStore};
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::Waker;

/// The lock-protected state: the bookkeeping, the blocked poppers and the parked async poppers.
pub(crate) struct State<T> {
    pub(crate) core: FifoCore<T>,
    /// Threads in `pop` waiting on the condvar. A popper counts itself under the lock before it
    /// waits and uncounts itself after, so an operation under the lock that sees zero has no one
    /// to wake (the wakers map is the parked tasks' count the same way). Writers going through
    /// the inbox see the sum, published there (see `inbox.rs`).
    pub(crate) blocked: usize,
    pub(crate) wakers: HashMap<u64, Waker>,
    pub(crate) next_waker_id: u64,
    /// The inbox's previous buffer, swapped in to apply it without allocating.
    pub(crate) spare: Vec<Op<T>>,
}

impl<T> State<T> {
    /// Blocked threads and parked tasks.
    pub(crate) fn waiters(&self) -> usize {
        self.blocked + self.wakers.len()
    }
}

/// A producer/consumer queue of per-key change lists: client-go's `DeltaFIFO`.
///
/// A reflector writes into it (it implements [`ReflectorStore`]); workers [`pop`](Self::pop) the
/// oldest key's [`Deltas`]. A key is queued at most once: new changes to a queued key are
/// appended to its list and it keeps its place. `M` reads objects' keys (default: the
/// [`Object`](kcache_core::Object) trait).
///
/// Rules, as in client-go:
/// - `add`/`update` append `Added`/`Updated`; `delete` appends `Deleted`, but a deletion of a key
///   never seen (not queued, not in flight, and not in the known objects) is dropped.
/// - Only one merge: two trailing `Deleted` deltas collapse into one, keeping the older unless it
///   is a tombstone.
/// - `replace` appends `Replaced` (or `Sync`) for each listed object, then a
///   [`DeletedFinalStateUnknown`](crate::DeletedFinalStateUnknown) tombstone for each queued key
///   missing from the list (from its newest queued state), then for each known key missing from
///   the list with nothing queued (from the known state).
/// - `resync` appends `Sync` for each known key with nothing pending.
/// - The first `replace` fixes the initial population; [`has_synced`](Self::has_synced) turns true
///   once an add/update/delete came first, or once every key of that population was processed.
///
/// Differences from client-go, each deliberate:
/// - `pop` does not hold the lock while the process function runs. A key being processed is
///   never handed to a second popper: if new deltas arrive for it meanwhile, it is queued again at
///   the back, and poppers skip it until the first one finishes. Other keys are handed out
///   meanwhile, so with several poppers a later key may overtake a key that waits for its own
///   in-flight predecessor; the order of one key's deltas is always kept.
/// - Keys being processed count as pending: `delete` does not drop them, `resync` does not resync
///   them (the known state may be mid-update), and `replace` tombstones them from the state handed
///   out when they are missing from the list (unless that state was a deletion).
/// - `has_synced` turns true only after the last initial key was *processed* (client-go flips it
///   just before). A process-function error still counts as processed.
/// - [`write_or_apply`](Self::write_or_apply) lets a consumer that keeps up take an add or an
///   update directly, without a queue round trip, when nothing is pending (client-go's newer
///   `RealFIFO` direction); the order of changes is the same as through the queue.
/// - A list can also be taken page by page ([`begin_list`](Self::begin_list),
///   [`list_page`](Self::list_page) or [`list_page_or_apply`](Self::list_page_or_apply),
///   [`finish_list`](Self::finish_list)), so a consumer can apply each page before the next is
///   fetched and a relist never holds the whole new list: the deltas are those of one `replace`
///   when nothing is popped between pages; the listed keys are remembered across pages, so keys
///   applied from earlier pages are not tombstoned; `has_synced` cannot turn true before
///   `finish_list`.
/// - A failing key accessor or transformer refuses the whole operation (a whole `replace`
///   included) and leaves the FIFO unchanged; except through
///   [`replace_skipping_refused`](Self::replace_skipping_refused) (what a reflector calls), which
///   leaves out only the objects that fail.
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_deltafifo::{DeltaFifo, DeltaType};
/// use std::sync::Arc;
///
/// #[derive(Debug)]
/// struct Pod { name: &'static str, rv: u64 }
/// impl Object for Pod {
///     fn namespace(&self) -> Option<&str> { Some("default") }
///     fn name(&self) -> &str { self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.into() }
/// }
///
/// let fifo: DeltaFifo<Pod> = DeltaFifo::new();
/// fifo.add(Arc::new(Pod { name: "web", rv: 1 }))?;
/// fifo.update(Arc::new(Pod { name: "web", rv: 2 }))?;
/// let types = fifo.pop(|deltas, _initial| {
///     Ok::<_, std::convert::Infallible>(deltas.iter().map(|d| d.delta_type).collect::<Vec<_>>())
/// })?;
/// assert_eq!(types, [DeltaType::Added, DeltaType::Updated]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "DeltaFIFO")]
pub struct DeltaFifo<T, M: Meta<T> = ObjectAccessor> {
    pub(crate) state: Mutex<State<T>>,
    pub(crate) inbox: Mutex<Inbox<T>>,
    pub(crate) cond: Condvar,
    pub(crate) writes: WriteSignal,
    known: Option<Arc<dyn KnownObjects<T>>>,
    transformer: Option<Transformer<T>>,
    _meta: PhantomData<fn() -> M>,
}

impl<T, M: Meta<T>> fmt::Debug for DeltaFifo<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("DeltaFifo")
            .field("len", &st.core.len())
            .field("has_synced", &st.core.has_synced())
            .field("closed", &st.core.is_closed())
            .finish_non_exhaustive()
    }
}

impl<T, M: Meta<T>> Default for DeltaFifo<T, M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, M: Meta<T>> DeltaFifo<T, M> {
    /// A FIFO with default options: no known objects, relists emit `Sync`, no transformer.
    pub fn new() -> Self {
        Self::with_options(DeltaFifoOptions::new())
    }

    /// A FIFO with the given options.
    pub fn with_options(options: DeltaFifoOptions<T>) -> Self {
        Self {
            state: Mutex::new(State {
                core: FifoCore::new(options.emit_delta_type_replaced),
                blocked: 0,
                wakers: HashMap::new(),
                next_waker_id: 0,
                spare: Vec::new(),
            }),
            inbox: Mutex::new(Inbox::default()),
            cond: Condvar::new(),
            writes: WriteSignal::default(),
            known: options.known_objects,
            transformer: options.transformer,
            _meta: PhantomData,
        }
    }

    /// The key the FIFO files `obj` under.
    ///
    /// # Errors
    /// The key accessor's [`KeyError`].
    pub fn key_of(&self, obj: &T) -> Result<ObjectKey, KeyError> {
        M::key(obj)
    }

    pub(crate) fn transform(&self, obj: Arc<T>) -> Result<Arc<T>, DeltaFifoError> {
        match &self.transformer {
            Some(t) => t(obj).map_err(DeltaFifoError::Transform),
            None => Ok(obj),
        }
    }

    pub(crate) fn known(&self) -> Option<&dyn KnownObjects<T>> {
        self.known.as_deref()
    }

    /// Releases the lock, then wakes every blocked and every parked popper. Without any, it only
    /// releases the lock: no futex wake, no waker traffic.
    pub(crate) fn notify(&self, mut st: MutexGuard<'_, State<T>>) {
        self.writes.bump();
        let blocked = st.blocked != 0;
        let wakers = if st.wakers.is_empty() {
            None
        } else {
            let wakers = std::mem::take(&mut st.wakers);
            self.publish_waiters(&st);
            Some(wakers)
        };
        drop(st);
        if blocked {
            self.cond.notify_all();
        }
        for w in wakers.into_iter().flat_map(HashMap::into_values) {
            w.wake();
        }
    }

    /// Appends an `Added` delta for `obj`.
    ///
    /// # Errors
    /// A key accessor or transformer failure; the FIFO is unchanged.
    pub fn add(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        let key = key_text::<T, M>(&obj)?;
        let obj = self.transform(obj)?;
        self.push(Op::Add(key, obj));
        Ok(())
    }

    /// Appends an `Updated` delta for `obj`.
    ///
    /// # Errors
    /// A key accessor or transformer failure; the FIFO is unchanged.
    pub fn update(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        let key = key_text::<T, M>(&obj)?;
        let obj = self.transform(obj)?;
        self.push(Op::Update(key, obj));
        Ok(())
    }

    /// Appends a `Deleted` delta for `obj`, unless its key was never seen (not queued, not being
    /// processed, not known): then the deletion is dropped. Either way the FIFO counts as
    /// populated.
    ///
    /// # Errors
    /// A key accessor or transformer failure; the FIFO is unchanged.
    pub fn delete(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        let key = key_text::<T, M>(&obj)?;
        let obj = self.transform(obj)?;
        self.push(Op::Delete(key, obj));
        Ok(())
    }

    /// A list or relist: `objects` is the complete state. Appends `Replaced` (or `Sync`) for
    /// each, then tombstones for keys that vanished (see the type's documentation). The first
    /// call fixes the initial population. The resource version is not used.
    ///
    /// # Errors
    /// A key accessor or transformer failure on any object; the FIFO is unchanged.
    pub fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        let _ = rv;
        let mut listed = Vec::with_capacity(objects.len());
        for obj in objects {
            let key = M::key(&obj)?;
            listed.push((key, self.transform(obj)?));
        }
        let mut st = self.lock();
        st.core.replace(listed, self.known());
        self.notify(st);
        Ok(())
    }

    /// [`replace`](Self::replace), except that an object whose key or transform fails is left
    /// out of the list (so, if it was known, it gets a tombstone like any vanished object)
    /// instead of refusing the whole list: one poison object must not keep a relist, and so a
    /// cache, from ever syncing. What a reflector calls through [`ReflectorStore`].
    ///
    /// # Errors
    /// [`DeltaFifoError::Refused`] with the reason for each object left out; the rest was
    /// replaced all the same.
    ///
    /// # Examples
    /// ```
    /// # use kcache_core::{Object, ResourceVersion};
    /// # use kcache_deltafifo::{DeltaFifo, DeltaFifoError, DeltaFifoOptions};
    /// # use std::sync::Arc;
    /// # #[derive(Debug)] struct Pod(&'static str);
    /// # impl Object for Pod {
    /// #     fn namespace(&self) -> Option<&str> { None }
    /// #     fn name(&self) -> &str { self.0 }
    /// #     fn resource_version(&self) -> ResourceVersion { "1".into() }
    /// # }
    /// let fifo: DeltaFifo<Pod> = DeltaFifo::with_options(DeltaFifoOptions::new().transformer(
    ///     |p: Arc<Pod>| if p.0 == "poison" { Err("cannot transform") } else { Ok(p) },
    /// ));
    /// let listed = vec![Arc::new(Pod("a")), Arc::new(Pod("poison")), Arc::new(Pod("b"))];
    /// let err = fifo.replace_skipping_refused(listed, "7".into()).unwrap_err();
    /// assert!(matches!(err, DeltaFifoError::Refused { ref refused } if refused.len() == 1));
    /// assert_eq!(fifo.len(), 2);
    /// let name = fifo.pop(|d, _| Ok::<_, std::io::Error>(d.newest().unwrap().object.object().unwrap().0))?;
    /// assert_eq!(name, "a");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_skipping_refused(
        &self,
        objects: Vec<Arc<T>>,
        rv: ResourceVersion,
    ) -> Result<(), DeltaFifoError> {
        let _ = rv;
        let (listed, refused) = self.prepare(objects);
        let mut st = self.lock();
        st.core.replace(listed, self.known());
        self.notify(st);
        if refused.is_empty() {
            Ok(())
        } else {
            Err(DeltaFifoError::Refused { refused })
        }
    }

    /// Appends `Sync` (with the known object) for every known key that has nothing pending. A
    /// no-op without known objects.
    pub fn resync(&self) {
        let mut st = self.lock();
        st.core.resync(self.known());
        self.notify(st);
    }

    /// Hands the oldest queued key's deltas to `process`, blocking while nothing can be handed
    /// out. `process` also learns whether the key belongs to the initial population (the first
    /// `replace`) and had not been handed out before.
    ///
    /// The FIFO's lock is not held while `process` runs: it may call back into the FIFO. The key
    /// counts as processed when `process` returns, fails or panics.
    ///
    /// # Errors
    /// [`PopError::Closed`] once [`close`](Self::close)d and nothing is queued;
    /// [`PopError::Process`] with `process`'s error. A failed item is **not** requeued (as in
    /// client-go since v0.33); it still counts toward the initial population.
    ///
    /// # Blocking
    /// Blocks the thread until a key can be handed out or the FIFO is closed and empty. Use
    /// [`pop_async`](Self::pop_async) from async code.
    pub fn pop<R, E>(
        &self,
        process: impl FnOnce(Deltas<T>, bool) -> Result<R, E>,
    ) -> Result<R, PopError<E>> {
        let mut st = self.lock();
        let mut spun = false;
        let taken = loop {
            match st.core.next() {
                Next::Ready(t) => break t,
                Next::Closed => return Err(PopError::Closed),
                // First spin briefly with the lock released (see `spin.rs`), then block.
                Next::Wait if !spun && WriteSignal::spins() => {
                    spun = true;
                    let seen = self.writes.seen();
                    drop(st);
                    self.writes.spin_for_write(seen);
                    st = self.lock();
                }
                Next::Wait => {
                    self.block(&mut st);
                    spun = false;
                }
            }
        };
        drop(st);
        self.process(taken, process)
    }

    /// [`pop`](Self::pop) as a future: parks the task (no polling) until a key can be handed out
    /// or the FIFO is closed and empty, then runs `process` synchronously inside `poll`.
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
    /// let n = futures::executor::block_on(
    ///     fifo.pop_async(|deltas, _| Ok::<_, std::io::Error>(deltas.len())),
    /// )?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pop_async<R, E, F>(&self, process: F) -> PopFuture<'_, T, M, F>
    where
        F: FnOnce(Deltas<T>, bool) -> Result<R, E>,
    {
        PopFuture::new(self, process)
    }

    /// Runs `process` on a taken key outside the lock, finishing the key however it ends.
    pub(crate) fn process<R, E>(
        &self,
        taken: Taken<T>,
        process: impl FnOnce(Deltas<T>, bool) -> Result<R, E>,
    ) -> Result<R, PopError<E>> {
        let guard = FinishGuard {
            fifo: self,
            key: Some(taken.key),
        };
        let result = process(taken.deltas, taken.is_in_initial_list);
        drop(guard);
        result.map_err(PopError::Process)
    }

    /// Takes the next key without waiting (the fuzz driver's first half of a pop).
    #[cfg(feature = "fuzz")]
    pub(crate) fn begin(&self) -> Next<T> {
        self.lock().core.next()
    }

    /// Marks `key` processed (the second half of a pop).
    pub(crate) fn finish(&self, key: &ObjectKey) {
        let mut st = self.lock();
        st.core.finish(key);
        self.notify(st);
    }

    /// Whether the initial population has been processed (see the type's documentation).
    pub fn has_synced(&self) -> bool {
        self.lock().core.has_synced()
    }

    /// Makes `pop` return [`PopError::Closed`] once nothing is queued. Writes are still accepted.
    pub fn close(&self) {
        let mut st = self.lock();
        st.core.close();
        self.notify(st);
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().core.is_closed()
    }

    /// Number of queued keys.
    pub fn len(&self) -> usize {
        self.lock().core.len()
    }

    /// Whether no key is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`is_idle`](Self::is_idle) and [`has_synced`](Self::has_synced), read together under one
    /// lock.
    pub fn progress(&self) -> Progress {
        let st = self.lock();
        Progress {
            idle: st.core.is_idle(),
            synced: st.core.has_synced(),
        }
    }

    /// Whether no key is queued **and** no popped key is still being processed: everything
    /// written so far has been handed out and processed (an informer uses it to tell how far its
    /// cache has caught up with its source).
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
    /// assert!(fifo.is_idle());
    /// fifo.add(Arc::new(Pod("a")))?;
    /// fifo.pop(|_, _| {
    ///     // Taken, so not queued, but still being processed.
    ///     assert!(fifo.is_empty() && !fifo.is_idle());
    ///     Ok::<_, std::convert::Infallible>(())
    /// })?;
    /// assert!(fifo.is_idle());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_idle(&self) -> bool {
        self.lock().core.is_idle()
    }
}

/// A consistent reading of a [`DeltaFifo`]'s progress (see [`DeltaFifo::progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// [`DeltaFifo::is_idle`]: nothing queued, nothing being processed.
    pub idle: bool,
    /// [`DeltaFifo::has_synced`]: the initial population has been processed.
    pub synced: bool,
}

/// Finishes a taken key when dropped, so a panicking process function does not wedge its key.
struct FinishGuard<'a, T, M: Meta<T>> {
    fifo: &'a DeltaFifo<T, M>,
    key: Option<ObjectKey>,
}

impl<T, M: Meta<T>> Drop for FinishGuard<'_, T, M> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.fifo.finish(&key);
        }
    }
}

impl<T: Send + Sync, M: Meta<T>> ReflectorStore<T> for DeltaFifo<T, M> {
    type Error = DeltaFifoError;

    fn add(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        DeltaFifo::add(self, obj)
    }
    fn update(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        DeltaFifo::update(self, obj)
    }
    fn delete(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        DeltaFifo::delete(self, obj)
    }
    /// [`replace_skipping_refused`](DeltaFifo::replace_skipping_refused): objects whose key or
    /// transform fails are left out and reported ([`replace_applied`](Self::replace_applied)
    /// tells the reflector the rest was taken, so it goes on watching).
    fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        DeltaFifo::replace_skipping_refused(self, objects, rv)
    }
    fn replace_applied(&self, error: &DeltaFifoError) -> bool {
        matches!(error, DeltaFifoError::Refused { .. })
    }
    fn resync(&self) -> Result<(), DeltaFifoError> {
        DeltaFifo::resync(self);
        Ok(())
    }
}
