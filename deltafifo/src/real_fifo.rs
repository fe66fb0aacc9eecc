//! `RealFifo`: client-go's `RealFIFO` (the queue of its in-order informers): one entry per
//! event, in the order the events were written; a relist is one
//! [`ReplacedAll`](Entry::ReplacedAll) entry, a resync one [`SyncAll`](Entry::SyncAll) entry.

mod entry;
mod pop;
mod staged;

pub use entry::{Batch, BatchIntoIter, Entry, ReplacedAll};
pub use pop::RealPopFuture;

use crate::inbox::key_text;
use crate::options::Transformer;
use crate::sync::Mutex;
use crate::{BoxError, DeltaFifoError, DeltaType, Progress, Written};
use kcache_core::{KeyText, Meta, ObjectAccessor, ResourceVersion};
use staged::{last_wins, Staged};
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::Waker;

/// An ordered queue of events between a reflector and the code that applies them to a cache
/// (client-go's `RealFIFO`, with its atomic events and unlocking while processing on).
///
/// Unlike [`DeltaFifo`](crate::DeltaFifo), nothing is merged or reordered: every
/// [`add`](Self::add), [`update`](Self::update) and [`delete`](Self::delete) appends an
/// [`Entry::Delta`], so a key can be queued several times and the consumer sees events of
/// different keys in the order they were written. A [`replace`](Self::replace) (a relist)
/// appends one [`Entry::ReplacedAll`] with the whole list: the consumer replaces its cache in
/// one step and infers the deletions itself, against its state at that point of the stream. A
/// [`resync`](Self::resync) appends one [`Entry::SyncAll`].
///
/// A consumer takes [`Batch`]es of consecutive entries ([`pop_batch_async`](Self::pop_batch_async),
/// [`try_pop_batch`](Self::try_pop_batch)); the queue's lock is not held while it processes
/// them, so writers never wait for processing, and a second popper waits until the first has
/// finished, so entries are processed in order even with several poppers.
///
/// [`has_synced`](Self::has_synced) turns true once every entry queued up to the first
/// `replace` (the initial population) has been processed; an add, update or delete before any
/// replace marks the queue synced at once, as in client-go.
///
/// # Examples
/// ```
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_deltafifo::{DeltaType, Entry, RealFifo};
/// use std::sync::Arc;
///
/// #[derive(Debug)]
/// struct Pod { name: &'static str, rv: u64 }
/// impl Object for Pod {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { self.name }
///     fn resource_version(&self) -> ResourceVersion { self.rv.into() }
/// }
///
/// let fifo: RealFifo<Pod> = RealFifo::new();
/// fifo.replace(vec![Arc::new(Pod { name: "a", rv: 1 })], "1".into())?;
/// fifo.update(Arc::new(Pod { name: "a", rv: 2 }))?;
/// fifo.add(Arc::new(Pod { name: "b", rv: 3 }))?;
/// fifo.update(Arc::new(Pod { name: "a", rv: 4 }))?;
///
/// // The list comes alone, as one entry, part of the initial list.
/// let list = fifo.try_pop_batch(10, |batch| batch.iter().map(|(e, initial)| (format!("{e:?}"), initial)).collect::<Vec<_>>())?;
/// assert_eq!(list, Some(vec![(r#"ReplacedAll(1 objects at "1")"#.to_string(), true)]));
/// assert!(fifo.has_synced());
///
/// // Then the watch events, in the order they were written: a, b, a.
/// let events = fifo.try_pop_batch(10, |batch| {
///     batch.into_iter().map(|(e, _)| match e {
///         Entry::Delta { key, delta_type, .. } => format!("{delta_type} {key}"),
///         other => format!("{other:?}"),
///     }).collect::<Vec<_>>()
/// })?;
/// assert_eq!(events, Some(vec!["Updated a".to_string(), "Added b".into(), "Updated a".into()]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "RealFIFO")]
pub struct RealFifo<T, M = ObjectAccessor> {
    state: Mutex<State<T>>,
    /// The pages of a list in progress (only the writer touches them).
    staged: Mutex<Option<Staged<T>>>,
    transformer: Option<Transformer<T>>,
    _meta: PhantomData<fn() -> M>,
}

pub(crate) struct State<T> {
    pub(crate) queue: VecDeque<Entry<T>>,
    /// Entries of the initial population not yet processed.
    pub(crate) initial: usize,
    /// A write (or a replace) happened: the initial population is fixed.
    pub(crate) populated: bool,
    /// A popper is processing a batch (outside the lock).
    pub(crate) processing: bool,
    pub(crate) closed: bool,
    /// Async poppers waiting for entries (or for the processing popper to finish).
    pub(crate) wakers: Vec<Waker>,
}

impl<T> State<T> {
    pub(crate) fn has_synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    fn is_idle(&self) -> bool {
        self.queue.is_empty() && !self.processing
    }

    /// Appends `entry` and hands back the wakers to wake once the lock is released.
    fn push(&mut self, entry: Entry<T>) -> Vec<Waker> {
        self.queue.push_back(entry);
        std::mem::take(&mut self.wakers)
    }
}

fn wake(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

impl<T, M: Meta<T>> Default for RealFifo<T, M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, M> fmt::Debug for RealFifo<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("RealFifo")
            .field("queued", &st.queue.len())
            .field("initial", &st.initial)
            .field("processing", &st.processing)
            .field("closed", &st.closed)
            .finish_non_exhaustive()
    }
}

impl<T, M: Meta<T>> RealFifo<T, M> {
    /// An empty queue without a transformer.
    #[doc(alias = "NewRealFIFO")]
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                initial: 0,
                populated: false,
                processing: false,
                closed: false,
                wakers: Vec::new(),
            }),
            staged: Mutex::new(None),
            transformer: None,
            _meta: PhantomData,
        }
    }

    /// An empty queue whose writes pass every object through `f` first (client-go's
    /// `Transformer`): added, updated, deleted and listed objects alike. An object `f` fails on
    /// is refused (the write returns [`DeltaFifoError::Transform`], a list leaves it out).
    pub fn with_transformer<F, E>(f: F) -> Self
    where
        F: Fn(Arc<T>) -> Result<Arc<T>, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        Self {
            transformer: Some(Arc::new(move |obj| f(obj).map_err(Into::into))),
            ..Self::new()
        }
    }

    pub(crate) fn lock(&self) -> crate::sync::MutexGuard<'_, State<T>> {
        self.state.lock()
    }

    fn keyed(&self, obj: Arc<T>) -> Result<(KeyText, Arc<T>), DeltaFifoError> {
        let key = key_text::<T, M>(&obj)?;
        let obj = match &self.transformer {
            Some(f) => f(obj).map_err(DeltaFifoError::Transform)?,
            None => obj,
        };
        Ok((key, obj))
    }

    fn write(&self, delta_type: DeltaType, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        let (key, object) = self.keyed(obj)?;
        let mut st = self.lock();
        st.populated = true;
        let wakers = st.push(Entry::Delta {
            key,
            delta_type,
            object,
        });
        drop(st);
        wake(wakers);
        Ok(())
    }

    /// Queues an [`Added`](DeltaType::Added) entry for `obj`.
    ///
    /// # Errors
    /// The key accessor's or the transformer's failure; nothing is queued.
    pub fn add(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        self.write(DeltaType::Added, obj)
    }

    /// Queues an [`Updated`](DeltaType::Updated) entry for `obj`.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn update(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        self.write(DeltaType::Updated, obj)
    }

    /// Queues a [`Deleted`](DeltaType::Deleted) entry for `obj`, whether or not its key was
    /// ever seen (as client-go's `RealFIFO`; the consumer decides what an unknown key's delete
    /// means).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn delete(&self, obj: Arc<T>) -> Result<(), DeltaFifoError> {
        self.write(DeltaType::Deleted, obj)
    }

    /// [`add`](Self::add) (`added`) or [`update`](Self::update), except when the queue is
    /// *caught up*: nothing queued, nothing being processed, synced, not closed. Then
    /// `apply(key, obj)` gets the (transformed) object at once, under the queue's lock, so no
    /// pop can interleave and the order of events is kept. `apply` may decline by handing the
    /// object back (`Err(obj)`); it is then queued.
    ///
    /// # Errors
    /// As [`add`](Self::add); `apply` is not called.
    pub fn write_or_apply(
        &self,
        obj: Arc<T>,
        added: bool,
        apply: impl FnOnce(&KeyText, Arc<T>) -> Result<(), Arc<T>>,
    ) -> Result<Written, DeltaFifoError> {
        let (key, object) = self.keyed(obj)?;
        let mut st = self.lock();
        let object = if st.is_idle() && st.has_synced() && !st.closed {
            match apply(&key, object) {
                Ok(()) => return Ok(Written::Applied),
                Err(obj) => obj,
            }
        } else {
            object
        };
        st.populated = true;
        let delta_type = if added {
            DeltaType::Added
        } else {
            DeltaType::Updated
        };
        let wakers = st.push(Entry::Delta {
            key,
            delta_type,
            object,
        });
        drop(st);
        wake(wakers);
        Ok(Written::Queued)
    }

    /// Keys and transforms `objects`, leaving out (and returning the reasons for) those whose
    /// key or transform fails; `keep` may swap each object for an equal one the caller holds.
    fn prepare(
        &self,
        objects: Vec<Arc<T>>,
        keep: &mut dyn FnMut(&KeyText, Arc<T>) -> Arc<T>,
        into: &mut Vec<(KeyText, Option<Arc<T>>)>,
    ) -> Vec<DeltaFifoError> {
        let mut refused = Vec::new();
        into.reserve(objects.len());
        for obj in objects {
            match self.keyed(obj) {
                Ok((key, obj)) => {
                    let obj = keep(&key, obj);
                    into.push((key, Some(obj)));
                }
                Err(e) => refused.push(e),
            }
        }
        refused
    }

    /// Queues one [`ReplacedAll`](Entry::ReplacedAll) entry with `objects` at `rv` (a list
    /// taken in one piece). The first replace fixes the initial population (everything
    /// queued so far), unless a write came first. A key listed twice is listed once, with its
    /// last object, at the place of that last one.
    ///
    /// # Errors
    /// [`DeltaFifoError::Refused`] with the reason for each object whose key or transform
    /// failed; those are left out of the entry (the consumer then treats them as gone), the
    /// rest was queued.
    pub fn replace(&self, objects: Vec<Arc<T>>, rv: ResourceVersion) -> Result<(), DeltaFifoError> {
        self.replace_keeping(objects, rv, |_, obj| obj)
    }

    /// [`replace`](Self::replace), where `keep(key, obj)` may hand back an object the caller
    /// already holds instead of `obj` (say, its cached copy when the resource versions are
    /// equal), so the new copy is dropped at once.
    ///
    /// # Errors
    /// As [`replace`](Self::replace).
    pub fn replace_keeping(
        &self,
        objects: Vec<Arc<T>>,
        rv: ResourceVersion,
        mut keep: impl FnMut(&KeyText, Arc<T>) -> Arc<T>,
    ) -> Result<(), DeltaFifoError> {
        let mut listed = Vec::new();
        let refused = self.prepare(objects, &mut keep, &mut listed);
        self.queue_list(last_wins(listed), rv);
        if refused.is_empty() {
            Ok(())
        } else {
            Err(DeltaFifoError::Refused { refused })
        }
    }

    /// Queues one [`ReplacedAll`](Entry::ReplacedAll) entry with objects already keyed (and
    /// transformed, if they need it: the transformer does not run), as
    /// [`replace`](Self::replace) would. For a list that did not come from the source (say,
    /// a cache restored from a snapshot).
    pub fn replace_keyed(&self, objects: Vec<(KeyText, Arc<T>)>, rv: ResourceVersion) {
        self.queue_list(objects, rv);
    }

    fn queue_list(&self, objects: Vec<(KeyText, Arc<T>)>, rv: ResourceVersion) {
        let mut st = self.lock();
        let wakers = st.push(Entry::ReplacedAll(ReplacedAll {
            resource_version: rv,
            objects,
        }));
        if !st.populated {
            st.populated = true;
            st.initial = st.queue.len();
        }
        drop(st);
        wake(wakers);
    }

    /// A list taken page by page starts: the pages of an earlier attempt that was not
    /// finished are dropped. Nothing is queued until [`finish_list`](Self::finish_list).
    pub fn begin_list(&self) {
        let old = self.staged.lock().replace(Staged::new());
        drop(old);
    }

    /// Stages the next page of the list in progress (one starts if none is), as
    /// [`replace_keeping`](Self::replace_keeping) would take it. The consumer sees nothing of
    /// it until [`finish_list`](Self::finish_list). An object whose key the list staged before
    /// replaces the earlier one (a streaming list's initial events may repeat a key).
    ///
    /// # Errors
    /// As [`replace`](Self::replace): the refused objects are left out, the rest is staged.
    pub fn list_page(
        &self,
        objects: Vec<Arc<T>>,
        mut keep: impl FnMut(&KeyText, Arc<T>) -> Arc<T>,
    ) -> Result<(), DeltaFifoError> {
        let mut staged = self.staged.lock();
        let staged = staged.get_or_insert_with(Staged::new);
        let refused = self.prepare(objects, &mut keep, &mut staged.entries);
        if refused.is_empty() {
            Ok(())
        } else {
            Err(DeltaFifoError::Refused { refused })
        }
    }

    /// Takes `obj`'s key out of the list in progress (one starts if none is): a streaming
    /// list's initial event deleted it. A later page may list it again.
    ///
    /// # Errors
    /// The key accessor's failure; nothing changes.
    pub fn list_delete(&self, obj: &T) -> Result<(), DeltaFifoError> {
        let key = key_text::<T, M>(obj)?;
        self.staged
            .lock()
            .get_or_insert_with(Staged::new)
            .entries
            .push((key, None));
        Ok(())
    }

    /// How many entries the list in progress has staged (a repeated key, or a deleted one,
    /// counts each time until [`finish_list`](Self::finish_list)).
    pub fn staged_len(&self) -> usize {
        self.staged.lock().as_ref().map_or(0, |s| s.entries.len())
    }

    /// The list in progress is complete at `rv`: its pages are queued as one
    /// [`ReplacedAll`](Entry::ReplacedAll) entry (an empty list without any page), each key
    /// once, with the last object staged for it, at that object's place; a key whose last
    /// staged change was [`list_delete`](Self::list_delete) is left out.
    pub fn finish_list(&self, rv: ResourceVersion) {
        let staged = self.staged.lock().take();
        let objects = staged.map(Staged::into_list).unwrap_or_default();
        self.queue_list(objects, rv);
    }

    /// The list in progress failed: its pages are dropped; the consumer never saw them.
    pub fn abandon_list(&self) {
        let old = self.staged.lock().take();
        drop(old);
    }

    /// Queues one [`SyncAll`](Entry::SyncAll) entry, unless the newest entry already is one.
    #[doc(alias = "Resync")]
    pub fn resync(&self) {
        let mut st = self.lock();
        if matches!(st.queue.back(), Some(Entry::SyncAll)) {
            return;
        }
        let wakers = st.push(Entry::SyncAll);
        drop(st);
        wake(wakers);
    }

    /// Whether the initial population has been processed (see the type's documentation).
    pub fn has_synced(&self) -> bool {
        self.lock().has_synced()
    }

    /// Closes the queue: poppers get [`FifoClosed`](crate::FifoClosed) once it is empty.
    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        let wakers = std::mem::take(&mut st.wakers);
        drop(st);
        wake(wakers);
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// How many entries are queued (not counting a batch being processed).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no entry is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether nothing is queued and nothing is being processed.
    pub fn is_idle(&self) -> bool {
        self.lock().is_idle()
    }

    /// [`is_idle`](Self::is_idle) and [`has_synced`](Self::has_synced) under one lock.
    pub fn progress(&self) -> Progress {
        let st = self.lock();
        Progress {
            idle: st.is_idle(),
            synced: st.has_synced(),
        }
    }
}
