//! The FIFO's bookkeeping as a plain data structure: no locks, no waiting, no user callbacks
//! except the `KnownObjects` view passed in. `DeltaFifo` drives it under its lock; the fuzz module
//! and the unit tests drive it directly.
//!
//! State: `items` (key -> pending deltas, oldest first) and `queue` (keys in FIFO order) hold the
//! same keys, each once. `in_flight` holds the keys handed to a process function and not yet
//! finished; such a key may be queued again (new deltas arrived) but is not handed out again until
//! it is finished. `initial` holds the keys of the first `replace` not yet taken;
//! `initial_in_flight` counts those taken but not finished.

use crate::{Delta, DeltaType, Deltas};
use kcache_core::{KnownObjects, ObjectKey};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The hasher of the key-indexed maps and sets: foldhash, randomly seeded per process.
type Hasher = foldhash::fast::RandomState;
type HashMap<K, V> = std::collections::HashMap<K, V, Hasher>;
type HashSet<K> = std::collections::HashSet<K, Hasher>;

/// Capacity (in entries) above which a fully drained FIFO replaces its storage with fresh, empty
/// collections.
const SHRINK_ABOVE: usize = 1024;

/// A key handed to a process function.
#[derive(Debug)]
pub(crate) struct Taken<T> {
    pub(crate) key: ObjectKey,
    pub(crate) deltas: Deltas<T>,
    pub(crate) is_in_initial_list: bool,
}

/// What a popper should do next.
#[derive(Debug)]
pub(crate) enum Next<T> {
    /// Process this.
    Ready(Taken<T>),
    /// Nothing can be handed out now (empty, or every queued key is in flight): wait.
    Wait,
    /// Closed and nothing queued.
    Closed,
}

/// What the FIFO remembers of a key in flight.
#[derive(Debug)]
struct InFlight<T> {
    /// The state the newest handed-out delta carried (a tombstone's object is unwrapped).
    newest: Option<Arc<T>>,
    /// Whether the newest handed-out delta was a deletion.
    deleted: bool,
    /// Whether the key counts toward the initial population.
    initial: bool,
}

#[derive(Debug)]
pub(crate) struct FifoCore<T> {
    items: HashMap<ObjectKey, Vec<Delta<T>>>,
    queue: VecDeque<ObjectKey>,
    in_flight: BTreeMap<ObjectKey, InFlight<T>>,
    populated: bool,
    initial: HashSet<ObjectKey>,
    initial_in_flight: usize,
    closed: bool,
    emit_replaced: bool,
}

impl<T> FifoCore<T> {
    pub(crate) fn new(emit_replaced: bool) -> Self {
        Self {
            items: HashMap::default(),
            queue: VecDeque::new(),
            in_flight: BTreeMap::new(),
            populated: false,
            initial: HashSet::default(),
            initial_in_flight: 0,
            closed: false,
            emit_replaced,
        }
    }

    /// Appends `delta` to `key`'s list (queueing the key if it had none), then applies the only
    /// merge rule.
    fn enqueue(&mut self, key: ObjectKey, delta: Delta<T>) {
        match self.items.get_mut(&key) {
            Some(list) => {
                list.push(delta);
                dedup_trailing_deletes(list);
            }
            None => {
                self.items.insert(key.clone(), vec![delta]);
                self.queue.push_back(key);
            }
        }
    }

    /// Whether the FIFO has pending or in-flight deltas for `key`.
    fn is_pending(&self, key: &ObjectKey) -> bool {
        self.items.contains_key(key) || self.in_flight.contains_key(key)
    }

    pub(crate) fn add(&mut self, key: ObjectKey, obj: Arc<T>) {
        self.populated = true;
        self.enqueue(key, Delta::new(DeltaType::Added, obj));
    }

    pub(crate) fn update(&mut self, key: ObjectKey, obj: Arc<T>) {
        self.populated = true;
        self.enqueue(key, Delta::new(DeltaType::Updated, obj));
    }

    /// Queues a deletion, unless the key was never seen: not pending and (with known objects) not
    /// known either. Returns whether a delta was queued. Marks the FIFO populated either way.
    pub(crate) fn delete(
        &mut self,
        key: ObjectKey,
        obj: Arc<T>,
        known: Option<&dyn KnownObjects<T>>,
    ) -> bool {
        self.populated = true;
        let seen = self.is_pending(&key) || known.is_some_and(|k| k.get_by_key(&key).is_some());
        if seen {
            self.enqueue(key, Delta::new(DeltaType::Deleted, obj));
        }
        seen
    }

    /// A list or relist: `listed` is the complete state (keys already computed, objects already
    /// transformed).
    pub(crate) fn replace(
        &mut self,
        listed: Vec<(ObjectKey, Arc<T>)>,
        known: Option<&dyn KnownObjects<T>>,
    ) {
        let ty = if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut keys = HashSet::with_capacity_and_hasher(listed.len(), Hasher::default());
        for (key, obj) in listed {
            keys.insert(key.clone());
            self.enqueue(key, Delta::new(ty, obj));
        }
        // Queued keys missing from the list: tombstone from the newest queued state.
        let queued: Vec<(ObjectKey, Option<Arc<T>>)> = self
            .queue
            .iter()
            .filter(|k| !keys.contains(*k))
            .map(|k| {
                let newest = self
                    .items
                    .get(k)
                    .and_then(|d| d.last())
                    .and_then(|d| d.object.object());
                (k.clone(), newest.cloned())
            })
            .collect();
        for (key, obj) in queued {
            self.enqueue(key.clone(), Delta::tombstone(key, obj));
        }
        // In-flight keys missing from the list and not queued: their consumer may not have
        // recorded them in the known objects yet, so decide from what was handed out. A key whose
        // newest handed-out delta was a deletion needs nothing more.
        let flying: Vec<(ObjectKey, Option<Arc<T>>)> = self
            .in_flight
            .iter()
            .filter(|(k, f)| !f.deleted && !keys.contains(*k) && !self.items.contains_key(*k))
            .map(|(k, f)| (k.clone(), f.newest.clone()))
            .collect();
        for (key, obj) in flying {
            self.enqueue(key.clone(), Delta::tombstone(key, obj));
        }
        // Known keys missing from the list with nothing pending: tombstone from the known state.
        if let Some(known) = known {
            for key in known.list_keys() {
                if keys.contains(&key) || self.is_pending(&key) {
                    continue;
                }
                let obj = known.get_by_key(&key);
                self.enqueue(key.clone(), Delta::tombstone(key, obj));
            }
        }
        if !self.populated {
            self.populated = true;
            self.initial = self.queue.iter().cloned().collect();
        }
    }

    /// Queues `Sync` for every known key with nothing pending or in flight.
    pub(crate) fn resync(&mut self, known: Option<&dyn KnownObjects<T>>) {
        let Some(known) = known else { return };
        for key in known.list_keys() {
            if self.is_pending(&key) {
                continue;
            }
            if let Some(obj) = known.get_by_key(&key) {
                self.enqueue(key, Delta::new(DeltaType::Sync, obj));
            }
        }
    }

    /// Takes the oldest queued key that is not in flight.
    pub(crate) fn next(&mut self) -> Next<T> {
        let Some(pos) = self
            .queue
            .iter()
            .position(|k| !self.in_flight.contains_key(k))
        else {
            return if self.closed && self.queue.is_empty() {
                Next::Closed
            } else {
                Next::Wait
            };
        };
        let Some(key) = self.queue.remove(pos) else {
            return Next::Wait;
        };
        let deltas = self.items.remove(&key).unwrap_or_default();
        let initial = self.initial.remove(&key);
        if initial {
            self.initial_in_flight += 1;
        }
        let newest = deltas.last();
        let flight = InFlight {
            newest: newest.and_then(|d| d.object.object()).cloned(),
            deleted: newest.is_some_and(|d| d.delta_type == DeltaType::Deleted),
            initial,
        };
        self.in_flight.insert(key.clone(), flight);
        Next::Ready(Taken {
            key,
            deltas: Deltas::from(deltas),
            is_in_initial_list: initial,
        })
    }

    /// The process function for `key` returned (successfully or not) or panicked.
    pub(crate) fn finish(&mut self, key: &ObjectKey) {
        if let Some(f) = self.in_flight.remove(key) {
            if f.initial {
                self.initial_in_flight = self.initial_in_flight.saturating_sub(1);
            }
        }
        if self.is_idle() {
            self.release_drained();
        }
    }

    /// Fully drained (nothing queued, nothing in flight): gives back the storage a large burst
    /// (typically the first `replace`) left behind. Only at empty, so a draining queue never
    /// rehashes or reallocates on its way down. (A hash map's reported capacity understates its
    /// table once removals left tombstones, so a table just above the threshold may be kept.)
    fn release_drained(&mut self) {
        if self.items.capacity() > SHRINK_ABOVE {
            self.items = HashMap::default();
        }
        if self.queue.capacity() > SHRINK_ABOVE {
            self.queue = VecDeque::new();
        }
        if self.initial.capacity() > SHRINK_ABOVE {
            self.initial = HashSet::default();
        }
    }

    /// True once an add/update/delete came before any replace, or every key of the first replace
    /// was processed.
    pub(crate) fn has_synced(&self) -> bool {
        self.populated && self.initial.is_empty() && self.initial_in_flight == 0
    }

    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Nothing queued and nothing handed out and not yet finished.
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.in_flight.is_empty()
    }

    /// Number of queued keys (in-flight keys not counted unless queued again).
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The queued keys in FIFO order, each with its pending deltas.
    pub(crate) fn snapshot(&self) -> Vec<(ObjectKey, Vec<Delta<T>>)> {
        self.queue
            .iter()
            .map(|k| (k.clone(), self.items.get(k).cloned().unwrap_or_default()))
            .collect()
    }

    /// Checks the structural invariants, describing the first one broken.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let mut seen = HashSet::default();
        for k in &self.queue {
            if !seen.insert(k) {
                return Err(format!("key {k:?} is in the queue twice"));
            }
            match self.items.get(k) {
                None => return Err(format!("queued key {k:?} has no deltas")),
                Some(d) if d.is_empty() => {
                    return Err(format!("queued key {k:?} has empty deltas"))
                }
                Some(d) => {
                    if d.windows(2).any(|w| {
                        w[0].delta_type == DeltaType::Deleted
                            && w[1].delta_type == DeltaType::Deleted
                    }) {
                        return Err(format!("key {k:?} holds two adjacent Deleted deltas"));
                    }
                }
            }
        }
        if seen.len() != self.items.len() {
            return Err("items hold a key that is not queued".to_owned());
        }
        let initial_flying = self.in_flight.values().filter(|f| f.initial).count();
        if initial_flying != self.initial_in_flight {
            return Err("initial in-flight count disagrees with the in-flight keys".to_owned());
        }
        if self.initial.iter().any(|k| !self.items.contains_key(k)) {
            return Err("an initial key not yet taken is not queued".to_owned());
        }
        if self.has_synced() && (!self.populated || !self.initial.is_empty()) {
            return Err("synced before the initial population was processed".to_owned());
        }
        Ok(())
    }
}

/// client-go's only merge rule: two trailing `Deleted` deltas collapse into one, keeping the
/// older unless it is a tombstone (a real object beats a tombstone; of two tombstones the newer
/// wins).
fn dedup_trailing_deletes<T>(list: &mut Vec<Delta<T>>) {
    let n = list.len();
    if n < 2
        || list[n - 1].delta_type != DeltaType::Deleted
        || list[n - 2].delta_type != DeltaType::Deleted
    {
        return;
    }
    if let Some(newer) = list.pop() {
        if list[n - 2].object.is_tombstone() {
            list[n - 2] = newer;
        }
    }
}

#[cfg(test)]
mod tests;
