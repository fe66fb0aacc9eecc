//! [`MemorySource`]: the handle, its writes and reads, and the state it shares with watchers.

use crate::history::{parse_rv, ChangeKind, History};
use crate::sync::{Arc, Mutex};
use crate::watch::Slot;
use crate::{MemoryConfig, MemoryError, MetaMut};
use kcache_core::{Clock, ObjectAccessor, ObjectKey, ResourceVersion};
use std::fmt;
use std::marker::PhantomData;
use std::task::Waker;

/// An in-process, versioned source of objects that can be listed and watched.
///
/// Every write (`create`, `update`, `delete`) takes the next resource version (a `u64` counter,
/// rendered as decimal text; a new source is at version `1`, so the first write makes `2`), stamps
/// it into the object through [`MetaMut`] and records the change in a bounded history window.
/// The source implements [`ListWatcher`](kcache_reflector::ListWatcher), so a reflector (or any
/// client of the trait) can list and watch it exactly as it would a Kubernetes API server; see
/// the [crate documentation](crate) for the list and watch rules.
///
/// Clones are cheap and share one source. When the last clone is dropped, open watch streams end
/// cleanly after the events they hold.
///
/// Objects are stored as `Arc<T>`: what `create` returns, what `get` and `list` hand out and what
/// watch events carry are the same allocation.
///
/// # Concurrency
/// One mutex guards the state; writes are short (no I/O, no waiting on watchers: see
/// [`MemoryConfig::with_watcher_buffer`] for slow watchers). Events reach every watcher in version
/// order, whichever thread wrote them.
pub struct MemorySource<T, M = ObjectAccessor> {
    handle: Arc<Handle<T>>,
    _meta: PhantomData<fn() -> M>,
}

/// Dropping the last handle closes every watch.
struct Handle<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// What the handles and the watch streams share.
pub(crate) struct Shared<T> {
    pub(crate) config: MemoryConfig,
    pub(crate) state: Mutex<Inner<T>>,
}

pub(crate) struct Inner<T> {
    pub(crate) history: History<T>,
    watchers: Vec<(u64, Arc<Slot<T>>)>,
    next_watcher: u64,
}

impl<T> Inner<T> {
    /// Registers a watcher; from now on every write reaches its slot.
    pub(crate) fn add_watcher(&mut self, slot: Arc<Slot<T>>) -> u64 {
        let id = self.next_watcher;
        self.next_watcher += 1;
        self.watchers.push((id, slot));
        id
    }

    /// Hands the event of the write that made version `rv` to every live watcher (dropping the
    /// dead ones); returns the wakers to call once the lock is released.
    fn publish(&mut self, rv: u64, kind: ChangeKind, obj: &std::sync::Arc<T>) -> Vec<Waker> {
        let mut wakers = Vec::new();
        self.watchers.retain(|(_, slot)| {
            let (waker, live) = slot.push(kind.event(obj.clone()), rv);
            wakers.extend(waker);
            live
        });
        wakers
    }
}

impl<T> Shared<T> {
    pub(crate) fn remove_watcher(&self, id: u64) {
        self.state.lock().watchers.retain(|(i, _)| *i != id);
    }

    fn close(&self) {
        let slots = std::mem::take(&mut self.state.lock().watchers);
        for (_, slot) in slots {
            if let Some(w) = slot.close() {
                w.wake();
            }
        }
    }
}

/// The write a caller asked for.
enum Write<T> {
    Create(T),
    Update(T),
    Delete,
}

impl<T, M> MemorySource<T, M>
where
    T: Clone + Send + Sync + 'static,
    M: MetaMut<T>,
{
    /// An empty source with the default [`MemoryConfig`] (real clock).
    pub fn new() -> Self {
        Self::with_config(MemoryConfig::new())
    }

    /// An empty source with the default settings on `clock`.
    pub fn with_clock(clock: impl Clock) -> Self {
        Self::with_config(MemoryConfig::new().with_clock(clock))
    }

    /// An empty source with `config`.
    pub fn with_config(config: MemoryConfig) -> Self {
        let history = History::new(1, config.history_window);
        let state = Mutex::new(Inner {
            history,
            watchers: Vec::new(),
            next_watcher: 0,
        });
        let shared = Arc::new(Shared { config, state });
        Self {
            handle: Arc::new(Handle { shared }),
            _meta: PhantomData,
        }
    }

    /// Stores a new object under its key, stamped with the next resource version (whatever
    /// version it carried is overwritten). Watchers see `Added`.
    ///
    /// # Errors
    /// [`MemoryError::AlreadyExists`]; [`MemoryError::Key`] when the object's key cannot be read.
    pub fn create(&self, obj: T) -> Result<std::sync::Arc<T>, MemoryError> {
        let key = M::key(&obj)?;
        self.write(key, None, Write::Create(obj))
    }

    /// Replaces the stored object with the same key, stamped with the next resource version.
    /// Watchers see `Modified`.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`]; [`MemoryError::Key`] when the object's key cannot be read.
    pub fn update(&self, obj: T) -> Result<std::sync::Arc<T>, MemoryError> {
        let key = M::key(&obj)?;
        self.write(key, None, Write::Update(obj))
    }

    /// [`update`](Self::update) with optimistic concurrency: only if the stored object's
    /// resource version is `expected` (Kubernetes' update with `metadata.resourceVersion` set).
    ///
    /// # Errors
    /// [`MemoryError::Conflict`] when the stored version differs (or `expected` is not one of
    /// this source's versions); otherwise as [`update`](Self::update).
    pub fn update_if(
        &self,
        obj: T,
        expected: &ResourceVersion,
    ) -> Result<std::sync::Arc<T>, MemoryError> {
        let key = M::key(&obj)?;
        self.write(key, Some(expected), Write::Update(obj))
    }

    /// Removes the object stored under `key` (`"namespace/name"` or `"name"`) and returns its last
    /// state, stamped with the deletion's resource version: the object watchers see in `Deleted`.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`]; [`MemoryError::Key`] when `key` is malformed.
    pub fn delete(&self, key: &str) -> Result<std::sync::Arc<T>, MemoryError> {
        self.write(ObjectKey::new(key)?, None, Write::Delete)
    }

    /// [`delete`](Self::delete) only if the stored object's resource version is `expected`.
    ///
    /// # Errors
    /// [`MemoryError::Conflict`]; otherwise as [`delete`](Self::delete).
    pub fn delete_if(
        &self,
        key: &str,
        expected: &ResourceVersion,
    ) -> Result<std::sync::Arc<T>, MemoryError> {
        self.write(ObjectKey::new(key)?, Some(expected), Write::Delete)
    }

    fn write(
        &self,
        key: ObjectKey,
        expected: Option<&ResourceVersion>,
        write: Write<T>,
    ) -> Result<std::sync::Arc<T>, MemoryError> {
        let (stored, wakers) = {
            let mut inner = self.shared().state.lock();
            let (rv, kind, obj) = inner.history.write(key, |key, entry, next| {
                let key = || key.clone();
                match (&write, entry) {
                    (Write::Create(_), Some(_)) => {
                        return Err(MemoryError::AlreadyExists { key: key() })
                    }
                    (Write::Update(_) | Write::Delete, None) => {
                        return Err(MemoryError::NotFound { key: key() })
                    }
                    _ => {}
                }
                if let (Some(expected), Some(entry)) = (expected, entry) {
                    if parse_rv(expected).ok().flatten() != Some(entry.rv) {
                        return Err(MemoryError::Conflict {
                            key: key(),
                            expected: expected.clone(),
                            stored: entry.rv.into(),
                        });
                    }
                }
                let rv = next?;
                let (kind, mut obj) = match (write, entry) {
                    (Write::Create(obj), _) => (ChangeKind::Added, obj),
                    (Write::Update(obj), _) => (ChangeKind::Modified, obj),
                    (Write::Delete, Some(last)) => (ChangeKind::Deleted, T::clone(&last.obj)),
                    (Write::Delete, None) => return Err(MemoryError::NotFound { key: key() }),
                };
                M::set_resource_version(&mut obj, rv.into());
                Ok((rv, kind, std::sync::Arc::new(obj)))
            })?;
            let wakers = inner.publish(rv, kind, &obj);
            (obj, wakers)
        };
        for w in wakers {
            w.wake();
        }
        Ok(stored)
    }
}

impl<T, M> MemorySource<T, M> {
    pub(crate) fn shared(&self) -> &Arc<Shared<T>> {
        &self.handle.shared
    }

    /// The object stored under `key`, if any.
    pub fn get(&self, key: &str) -> Option<std::sync::Arc<T>> {
        self.shared()
            .state
            .lock()
            .history
            .get(key)
            .map(|e| e.obj.clone())
    }

    /// Every stored object, in key order.
    pub fn list_all(&self) -> Vec<std::sync::Arc<T>> {
        self.shared()
            .state
            .lock()
            .history
            .objects()
            .cloned()
            .collect()
    }

    /// The current resource version: that of the last write (`"1"` for a new source).
    pub fn resource_version(&self) -> ResourceVersion {
        self.shared().state.lock().history.rv().into()
    }

    /// The oldest resource version a watch can start from or an exact list can be served at;
    /// older ones get [`MemoryError::Expired`].
    pub fn oldest_resource_version(&self) -> ResourceVersion {
        self.shared().state.lock().history.oldest().into()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.shared().state.lock().history.len()
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many watch streams are open (evicted and ended ones are not counted).
    pub fn watcher_count(&self) -> usize {
        self.shared().state.lock().watchers.len()
    }

    /// How many live events wait, over all watchers, for their streams to take them.
    pub fn pending_events(&self) -> usize {
        let inner = self.shared().state.lock();
        inner.watchers.iter().map(|(_, slot)| slot.pending()).sum()
    }

    /// The settings.
    pub fn config(&self) -> &MemoryConfig {
        &self.shared().config
    }
}

impl<T, M> Clone for MemorySource<T, M> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
            _meta: PhantomData,
        }
    }
}

impl<T, M> Default for MemorySource<T, M>
where
    T: Clone + Send + Sync + 'static,
    M: MetaMut<T>,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T, M> fmt::Debug for MemorySource<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared().state.lock();
        f.debug_struct("MemorySource")
            .field("resource_version", &inner.history.rv())
            .field("oldest_resource_version", &inner.history.oldest())
            .field("objects", &inner.history.len())
            .field("watchers", &inner.watchers.len())
            .finish()
    }
}
