//! The reference model: the DeltaFifo rules written as naively as possible (one vector of
//! `(key, deltas)` in queue order, linear searches), so it shares no structure with `core`.

use super::FuzzObj;
use crate::{Delta, DeltaType};
use kcache_core::ObjectKey;
use std::collections::BTreeMap;
use std::sync::Arc;

type D = Delta<FuzzObj>;

/// What the model hands out on a pop.
#[derive(Debug, PartialEq)]
pub(super) enum ModelNext {
    Ready(ObjectKey, Vec<D>, bool),
    Wait,
    Closed,
}

#[derive(Debug, Default)]
pub(super) struct Model {
    /// Queued keys in FIFO order with their deltas.
    pub(super) queue: Vec<(ObjectKey, Vec<D>)>,
    /// Keys handed out and not finished: key, handed-out deltas, counted as initial.
    in_flight: Vec<(ObjectKey, Vec<D>, bool)>,
    pub(super) populated: bool,
    /// Keys of the first replace not yet handed out.
    initial: Vec<ObjectKey>,
    pub(super) closed: bool,
    emit_replaced: bool,
    /// The keys listed so far by the paged list in progress, if one is.
    listing: Option<Vec<ObjectKey>>,
}

fn newest_state(deltas: &[D]) -> Option<Arc<FuzzObj>> {
    deltas.last().and_then(|d| d.object.object().cloned())
}

impl Model {
    pub(super) fn new(emit_replaced: bool) -> Self {
        Self {
            emit_replaced,
            ..Self::default()
        }
    }

    fn queued(&self, key: &ObjectKey) -> bool {
        self.queue.iter().any(|(k, _)| k == key)
    }

    fn pending(&self, key: &ObjectKey) -> bool {
        self.queued(key) || self.in_flight.iter().any(|(k, _, _)| k == key)
    }

    fn push(&mut self, key: ObjectKey, delta: D) {
        let Some((_, list)) = self.queue.iter_mut().find(|(k, _)| *k == key) else {
            self.queue.push((key, vec![delta]));
            return;
        };
        let last_deleted = list
            .last()
            .is_some_and(|d| d.delta_type == DeltaType::Deleted);
        if last_deleted && delta.delta_type == DeltaType::Deleted {
            let n = list.len();
            // Two deletions: the older survives unless it is a tombstone.
            if list[n - 1].object.is_tombstone() {
                list[n - 1] = delta;
            }
        } else {
            list.push(delta);
        }
    }

    pub(super) fn add(&mut self, key: ObjectKey, obj: Arc<FuzzObj>, ty: DeltaType) {
        self.populated = true;
        self.push(key, Delta::new(ty, obj));
    }

    pub(super) fn delete(
        &mut self,
        key: ObjectKey,
        obj: Arc<FuzzObj>,
        known: Option<&BTreeMap<ObjectKey, Arc<FuzzObj>>>,
    ) {
        self.populated = true;
        if self.pending(&key) || known.is_some_and(|k| k.contains_key(&key)) {
            self.push(key, Delta::new(DeltaType::Deleted, obj));
        }
    }

    fn listed_type(&self) -> DeltaType {
        if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        }
    }

    pub(super) fn replace(
        &mut self,
        listed: Vec<(ObjectKey, Arc<FuzzObj>)>,
        known: Option<&BTreeMap<ObjectKey, Arc<FuzzObj>>>,
    ) {
        self.listing = None;
        let ty = self.listed_type();
        let listed_keys: Vec<ObjectKey> = listed.iter().map(|(k, _)| k.clone()).collect();
        for (key, obj) in listed {
            self.push(key, Delta::new(ty, obj));
        }
        self.settle(&listed_keys, known);
    }

    /// Whether a direct apply may happen now: nothing queued, nothing in flight, not closed.
    pub(super) fn idle(&self) -> bool {
        self.queue.is_empty() && self.in_flight.is_empty() && !self.closed
    }

    pub(super) fn list_begin(&mut self) {
        self.listing = Some(Vec::new());
    }

    pub(super) fn list_abandon(&mut self) {
        self.listing = None;
    }

    /// A page queued: as `replace` queues its objects; during the first list each key counts
    /// as initial once.
    pub(super) fn list_page(&mut self, page: Vec<(ObjectKey, Arc<FuzzObj>)>) {
        let ty = self.listed_type();
        self.listing.get_or_insert_with(Vec::new);
        for (key, obj) in page {
            self.listing.get_or_insert_with(Vec::new).push(key.clone());
            if !self.populated && !self.initial.contains(&key) {
                self.initial.push(key.clone());
            }
            self.push(key, Delta::new(ty, obj));
        }
    }

    /// A page the consumer applied directly: its keys count as listed.
    pub(super) fn list_applied(&mut self, keys: impl IntoIterator<Item = ObjectKey>) {
        self.listing.get_or_insert_with(Vec::new).extend(keys);
    }

    pub(super) fn list_finish(&mut self, known: Option<&BTreeMap<ObjectKey, Arc<FuzzObj>>>) {
        let listed = self.listing.take().unwrap_or_default();
        self.settle(&listed, known);
    }

    /// The end of a complete list: tombstones for what it left out (queued keys, then keys in
    /// flight, then known keys), and the first list fixes the initial population.
    fn settle(
        &mut self,
        listed_keys: &[ObjectKey],
        known: Option<&BTreeMap<ObjectKey, Arc<FuzzObj>>>,
    ) {
        let vanished: Vec<(ObjectKey, Option<Arc<FuzzObj>>)> = self
            .queue
            .iter()
            .filter(|(k, _)| !listed_keys.contains(k))
            .map(|(k, d)| (k.clone(), newest_state(d)))
            .collect();
        for (key, obj) in vanished {
            self.push(key.clone(), Delta::tombstone(key, obj));
        }
        let mut flying: Vec<(ObjectKey, Option<Arc<FuzzObj>>)> = self
            .in_flight
            .iter()
            .filter(|(k, d, _)| {
                let deleted = d.last().is_some_and(|x| x.delta_type == DeltaType::Deleted);
                !deleted && !listed_keys.contains(k) && !self.queued(k)
            })
            .map(|(k, d, _)| (k.clone(), newest_state(d)))
            .collect();
        flying.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, obj) in flying {
            self.push(key.clone(), Delta::tombstone(key, obj));
        }
        if let Some(known) = known {
            for (key, obj) in known {
                if !listed_keys.contains(key) && !self.pending(key) {
                    self.push(
                        key.clone(),
                        Delta::tombstone(key.clone(), Some(obj.clone())),
                    );
                }
            }
        }
        if !self.populated {
            self.populated = true;
            self.initial = self.queue.iter().map(|(k, _)| k.clone()).collect();
        }
    }

    pub(super) fn resync(&mut self, known: Option<&BTreeMap<ObjectKey, Arc<FuzzObj>>>) {
        for (key, obj) in known.into_iter().flatten() {
            if !self.pending(key) {
                self.push(key.clone(), Delta::new(DeltaType::Sync, obj.clone()));
            }
        }
    }

    pub(super) fn next(&mut self) -> ModelNext {
        let flying = |k: &ObjectKey| self.in_flight.iter().any(|(f, _, _)| f == k);
        let Some(pos) = self.queue.iter().position(|(k, _)| !flying(k)) else {
            return if self.closed && self.queue.is_empty() {
                ModelNext::Closed
            } else {
                ModelNext::Wait
            };
        };
        let (key, deltas) = self.queue.remove(pos);
        let initial = self.initial.contains(&key);
        self.initial.retain(|k| *k != key);
        self.in_flight.push((key.clone(), deltas.clone(), initial));
        ModelNext::Ready(key, deltas, initial)
    }

    pub(super) fn finish(&mut self, key: &ObjectKey) {
        self.in_flight.retain(|(k, _, _)| k != key);
    }

    pub(super) fn has_synced(&self) -> bool {
        self.populated && self.initial.is_empty() && !self.in_flight.iter().any(|(_, _, i)| *i)
    }
}
