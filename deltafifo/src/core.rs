//! The FIFO's bookkeeping as a plain data structure: no locks, no waiting, no user callbacks
//! except the `KnownObjects` view passed in. `DeltaFifo` drives it under its lock; the fuzz module
//! and the unit tests drive it directly.
//!
//! State: `items` (key -> pending deltas, oldest first, and whether the key belongs to the initial
//! population) and `queue` (keys in FIFO order) hold the same keys, each once. `in_flight` holds
//! the keys handed to a process function and not yet finished; such a key may be queued again (new
//! deltas arrived) but is not handed out again until it is finished. `initial_queued` counts the
//! queued keys of the first `replace` not yet taken; `initial_in_flight` those taken but not
//! finished.

use crate::deltas::DeltaList;
use crate::{Delta, DeltaType, Deltas};
use kcache_core::{KeyText, KnownObjects, ObjectKey};
use std::collections::VecDeque;
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

/// A queued key's pending deltas.
#[derive(Debug)]
struct Entry<T> {
    deltas: DeltaList<T>,
    /// Whether the key belongs to the initial population (the first `replace`).
    initial: bool,
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
    items: HashMap<ObjectKey, Entry<T>>,
    queue: VecDeque<ObjectKey>,
    in_flight: HashMap<ObjectKey, InFlight<T>>,
    populated: bool,
    initial_queued: usize,
    initial_in_flight: usize,
    closed: bool,
    emit_replaced: bool,
    /// The keys listed so far by the paged list in progress (`None`: none in progress).
    listing: Option<HashSet<ObjectKey>>,
}

impl<T> FifoCore<T> {
    pub(crate) fn new(emit_replaced: bool) -> Self {
        Self {
            items: HashMap::default(),
            queue: VecDeque::new(),
            in_flight: HashMap::default(),
            populated: false,
            initial_queued: 0,
            initial_in_flight: 0,
            closed: false,
            emit_replaced,
            listing: None,
        }
    }

    /// Appends `delta` to `key`'s list (queueing the key if it had none), then applies the only
    /// merge rule.
    fn enqueue(&mut self, key: ObjectKey, delta: Delta<T>) {
        // One hash and probe whether the key is queued or not.
        match self.items.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut queued) => {
                let entry = queued.get_mut();
                entry.deltas.push(delta);
                dedup_trailing_deletes(&mut entry.deltas);
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                self.queue.push_back(slot.key().clone());
                slot.insert(Entry {
                    deltas: DeltaList::one(delta),
                    initial: false,
                });
            }
        }
    }

    /// [`enqueue`](Self::enqueue) for a key given as text (inline when short): builds the
    /// `ObjectKey` only when the key is not queued yet.
    fn enqueue_text(&mut self, key: KeyText, delta: Delta<T>) {
        if let Some(entry) = self.items.get_mut(key.as_str()) {
            entry.deltas.push(delta);
            dedup_trailing_deletes(&mut entry.deltas);
        } else {
            self.enqueue(key.into_key(), delta);
        }
    }

    /// Appends an `Added` delta.
    pub(crate) fn add(&mut self, key: impl Into<KeyText>, obj: Arc<T>) {
        self.populated = true;
        self.enqueue_text(key.into(), Delta::new(DeltaType::Added, obj));
    }

    /// Appends an `Updated` delta.
    pub(crate) fn update(&mut self, key: impl Into<KeyText>, obj: Arc<T>) {
        self.populated = true;
        self.enqueue_text(key.into(), Delta::new(DeltaType::Updated, obj));
    }

    /// Whether the FIFO has pending or in-flight deltas for `key`.
    fn is_pending(&self, key: &ObjectKey) -> bool {
        self.items.contains_key(key) || self.in_flight.contains_key(key)
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
        // A whole list supersedes a paged one in progress.
        self.listing = None;
        let ty = self.listed_type();
        // The keys queued before the list, in queue order: those the list leaves out get
        // tombstones. (Every listed key ends up queued, so afterwards "queued" covers "listed".)
        let prior: Vec<ObjectKey> = self.queue.iter().cloned().collect();
        let mut unlisted: HashSet<&ObjectKey> = prior.iter().collect();
        for (key, obj) in listed {
            if !unlisted.is_empty() {
                unlisted.remove(&key);
            }
            self.enqueue(key, Delta::new(ty, obj));
        }
        let unlisted: Vec<ObjectKey> = prior
            .iter()
            .filter(|k| unlisted.contains(k))
            .cloned()
            .collect();
        // Every listed key is queued now, so the in-flight and known passes need no listed set.
        self.tombstone_unlisted(unlisted, &|_| false, known);
    }

    /// The delta type of a listed object.
    fn listed_type(&self) -> DeltaType {
        if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        }
    }

    /// A paged list attempt starts: nothing counts as listed yet (a failed attempt's keys no
    /// longer do).
    pub(crate) fn list_begin(&mut self) {
        self.listing = Some(HashSet::default());
    }

    /// The paged list attempt failed: forget its listed keys (what it queued stays queued).
    pub(crate) fn list_abandon(&mut self) {
        self.listing = None;
    }

    /// Whether the next listed objects belong to the initial population (no list finished yet,
    /// and no add, update or delete came first).
    pub(crate) fn lists_initial(&self) -> bool {
        !self.populated
    }

    /// A page of the paged list in progress (one is started if none is): queues `Replaced` (or
    /// `Sync`) for each object, as `replace` does for its list; during the first list the keys
    /// count toward the initial population at once.
    pub(crate) fn list_page(&mut self, page: Vec<(ObjectKey, Arc<T>)>) {
        let ty = self.listed_type();
        let mut listed = self.listing.take().unwrap_or_default();
        listed.reserve(page.len());
        for (key, obj) in page {
            listed.insert(key.clone());
            if self.populated {
                self.enqueue(key, Delta::new(ty, obj));
            } else {
                self.enqueue(key.clone(), Delta::new(ty, obj));
                if let Some(entry) = self.items.get_mut(&key) {
                    if !entry.initial {
                        entry.initial = true;
                        self.initial_queued += 1;
                    }
                }
            }
        }
        self.listing = Some(listed);
    }

    /// Records the keys of a page the consumer applied directly (see
    /// `DeltaFifo::list_page_or_apply`).
    pub(crate) fn list_applied<'a>(&mut self, keys: impl ExactSizeIterator<Item = &'a ObjectKey>) {
        let listed = self.listing.get_or_insert_with(HashSet::default);
        listed.reserve(keys.len());
        for key in keys {
            listed.insert(key.clone());
        }
    }

    /// The paged list is complete: tombstones for every key not listed since `list_begin`, by
    /// `replace`'s rules and in its order (queued keys, from their newest queued state; keys in
    /// flight, from the state handed out; known keys with nothing pending, from the known
    /// state); the first list fixes the initial population. Without a list in progress, the
    /// list was empty.
    pub(crate) fn list_finish(&mut self, known: Option<&dyn KnownObjects<T>>) {
        let listed = self.listing.take().unwrap_or_default();
        let unlisted: Vec<ObjectKey> = self
            .queue
            .iter()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        self.tombstone_unlisted(unlisted, &|k| listed.contains(k), known);
    }

    /// The end of a complete list (whole or paged), by client-go's `Replace` rules and in its
    /// order: tombstones for the queued keys it left out (`unlisted_queued`, in queue order,
    /// from their newest queued state), then for keys in flight that are neither queued nor
    /// `listed` (their consumer may not have recorded them in the known objects yet, so from the
    /// state handed out; a key whose newest handed-out delta was a deletion needs nothing more;
    /// in key order, so a relist's output does not depend on hashing), then for known keys the
    /// list left out with nothing pending (from the known state). The first list fixes the
    /// initial population.
    fn tombstone_unlisted(
        &mut self,
        unlisted_queued: Vec<ObjectKey>,
        listed: &dyn Fn(&str) -> bool,
        known: Option<&dyn KnownObjects<T>>,
    ) {
        for key in unlisted_queued {
            let newest = self
                .items
                .get(&key)
                .and_then(|e| e.deltas.last())
                .and_then(|d| d.object.object())
                .cloned();
            self.enqueue(key.clone(), Delta::tombstone(key, newest));
        }
        let mut flying: Vec<(ObjectKey, Option<Arc<T>>)> = self
            .in_flight
            .iter()
            .filter(|(k, f)| !f.deleted && !self.items.contains_key(*k) && !listed(k.as_str()))
            .map(|(k, f)| (k.clone(), f.newest.clone()))
            .collect();
        flying.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (key, obj) in flying {
            self.enqueue(key.clone(), Delta::tombstone(key, obj));
        }
        if let Some(known) = known {
            // Only the known keys the list left out are built (after a relist, usually none).
            for key in known.unlisted_keys(listed) {
                if self.is_pending(&key) {
                    continue;
                }
                let obj = known.get_by_key(&key);
                self.enqueue(key.clone(), Delta::tombstone(key, obj));
            }
        }
        if !self.populated {
            self.populated = true;
            for entry in self.items.values_mut() {
                entry.initial = true;
            }
            self.initial_queued = self.items.len();
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
        let pos = if self.in_flight.is_empty() {
            (!self.queue.is_empty()).then_some(0)
        } else {
            self.queue
                .iter()
                .position(|k| !self.in_flight.contains_key(k))
        };
        let Some(pos) = pos else {
            return if self.closed && self.queue.is_empty() {
                Next::Closed
            } else {
                Next::Wait
            };
        };
        let Some(key) = self.queue.remove(pos) else {
            return Next::Wait;
        };
        let (deltas, initial) = match self.items.remove(&key) {
            Some(entry) => (entry.deltas.handed_out(key.clone()), entry.initial),
            None => (Deltas::default(), false),
        };
        if initial {
            self.initial_queued = self.initial_queued.saturating_sub(1);
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
            deltas,
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

    /// Gives back a taken key that was not processed (its batch's process function panicked
    /// before reaching it): it is no longer in flight, it goes back to the front of the queue
    /// (moved there if new deltas queued it meanwhile), its deltas ahead of any that arrived
    /// since, with its initial flag. (Moving a queued key is linear in the queue's length; this
    /// only runs after a panic.)
    pub(crate) fn untake(&mut self, taken: Taken<T>) {
        let Taken {
            key,
            deltas,
            is_in_initial_list: initial,
        } = taken;
        if self.in_flight.remove(&key).is_some() && initial {
            self.initial_in_flight = self.initial_in_flight.saturating_sub(1);
        }
        if initial {
            self.initial_queued += 1;
        }
        match self.items.get_mut(&key) {
            Some(entry) => {
                let newer = std::mem::replace(&mut entry.deltas, deltas.into_list());
                for delta in newer {
                    entry.deltas.push(delta);
                    dedup_trailing_deletes(&mut entry.deltas);
                }
                if entry.initial {
                    // Cannot happen (a key taken once is never initial again); keep the count
                    // right regardless.
                    self.initial_queued = self.initial_queued.saturating_sub(1);
                }
                entry.initial |= initial;
                if let Some(pos) = self.queue.iter().position(|k| *k == key) {
                    self.queue.remove(pos);
                }
                self.queue.push_front(key);
            }
            None => {
                let deltas = deltas.into_list();
                self.items.insert(key.clone(), Entry { deltas, initial });
                self.queue.push_front(key);
            }
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
        if self.in_flight.capacity() > SHRINK_ABOVE {
            self.in_flight = HashMap::default();
        }
    }

    /// True once an add/update/delete came before any replace, or every key of the first replace
    /// was processed.
    pub(crate) fn has_synced(&self) -> bool {
        self.populated && self.initial_queued == 0 && self.initial_in_flight == 0
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
    #[cfg(any(test, feature = "fuzz"))]
    pub(crate) fn snapshot(&self) -> Vec<(ObjectKey, Vec<Delta<T>>)> {
        self.queue
            .iter()
            .map(|k| {
                let deltas = self.items.get(k).map(|e| e.deltas.to_vec());
                (k.clone(), deltas.unwrap_or_default())
            })
            .collect()
    }

    /// Checks the structural invariants, describing the first one broken.
    #[cfg(any(test, feature = "fuzz"))]
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let mut seen = HashSet::default();
        for k in &self.queue {
            if !seen.insert(k) {
                return Err(format!("key {k:?} is in the queue twice"));
            }
            match self.items.get(k).map(|e| &e.deltas) {
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
        let initial_queued = self.items.values().filter(|e| e.initial).count();
        if initial_queued != self.initial_queued {
            return Err("initial queued count disagrees with the queued keys".to_owned());
        }
        if self.has_synced() && (!self.populated || initial_queued != 0) {
            return Err("synced before the initial population was processed".to_owned());
        }
        Ok(())
    }
}

/// client-go's only merge rule: two trailing `Deleted` deltas collapse into one, keeping the
/// older unless it is a tombstone (a real object beats a tombstone; of two tombstones the newer
/// wins).
fn dedup_trailing_deletes<T>(list: &mut DeltaList<T>) {
    let n = list.len();
    if n < 2
        || list[n - 1].delta_type != DeltaType::Deleted
        || list[n - 2].delta_type != DeltaType::Deleted
    {
        return;
    }
    if let Some(newer) = list.pop() {
        if let Some(older) = list.as_mut_slice().get_mut(n - 2) {
            if older.object.is_tombstone() {
                *older = newer;
            }
        }
    }
}

#[cfg(test)]
mod tests;
