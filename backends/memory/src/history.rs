//! The pure core of the source: the current objects, the bounded window of past changes, and
//! reconstruction of the state at any version inside that window. No locks, no time.

use crate::MemoryError;
use kcache_core::{ObjectKey, ResourceVersion};
use kcache_reflector::WatchEvent;
use std::cmp::Ordering;
use std::collections::hash_map::Entry as Slot;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// The hasher of the object map (keys are the source's own; no untrusted input chooses them).
type Hasher = foldhash::fast::RandomState;

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One write, as kept in the history window.
#[derive(Debug)]
pub(crate) struct Change<T> {
    /// The version this write created.
    pub(crate) rv: u64,
    pub(crate) kind: ChangeKind,
    pub(crate) key: ObjectKey,
    /// The new state; for a deletion, the last state stamped with the deletion's version.
    pub(crate) obj: Arc<T>,
    /// The state before the write (`None` for a creation).
    pub(crate) prev: Option<Arc<T>>,
}

impl<T> Change<T> {
    /// The watch event that reports this change.
    pub(crate) fn event(&self) -> WatchEvent<T> {
        self.kind.event(self.obj.clone())
    }
}

impl ChangeKind {
    /// The watch event that reports a change of this kind to `obj`.
    pub(crate) fn event<T>(self, obj: Arc<T>) -> WatchEvent<T> {
        match self {
            Self::Added => WatchEvent::Added(obj),
            Self::Modified => WatchEvent::Modified(obj),
            Self::Deleted => WatchEvent::Deleted(obj),
        }
    }
}

/// What [`History::write`]'s caller decides: the version, kind and new state, or a refusal.
pub(crate) type Decision<T> = Result<(u64, ChangeKind, Arc<T>), MemoryError>;

/// A write done: its version, kind and new state.
pub(crate) type Written<T> = (u64, ChangeKind, Arc<T>);

/// A stored object and the version of the write that made it.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) obj: Arc<T>,
    pub(crate) rv: u64,
}

/// The versioned state: current objects plus the changes with versions `oldest + 1 ..= rv`.
///
/// Every write takes the next version, so the window is contiguous and the change with version
/// `v` sits at index `v - oldest - 1` of the ring.
///
/// The objects live in a hash map (a write looks its key up once); their keys are also kept in
/// key order, which only creations and deletions touch, for lists.
#[derive(Debug)]
pub(crate) struct History<T> {
    objects: HashMap<ObjectKey, Entry<T>, Hasher>,
    order: BTreeSet<ObjectKey>,
    changes: VecDeque<Change<T>>,
    rv: u64,
    oldest: u64,
    window: usize,
}

impl<T> History<T> {
    /// An empty state at version `start`, keeping up to `window` changes.
    pub(crate) fn new(start: u64, window: usize) -> Self {
        Self {
            objects: HashMap::default(),
            order: BTreeSet::new(),
            changes: VecDeque::new(),
            rv: start,
            oldest: start,
            window,
        }
    }

    /// The current version.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    /// The oldest version whose state can still be reconstructed.
    pub(crate) fn oldest(&self) -> u64 {
        self.oldest
    }

    /// The version the next write will take.
    pub(crate) fn next_rv(&self) -> Result<u64, MemoryError> {
        self.rv
            .checked_add(1)
            .ok_or(MemoryError::ResourceVersionsExhausted)
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Entry<T>> {
        self.objects.get(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    /// The current objects in key order.
    pub(crate) fn objects(&self) -> impl Iterator<Item = &Arc<T>> + '_ {
        self.order
            .iter()
            .filter_map(|k| self.objects.get(k).map(|e| &e.obj))
    }

    /// One write to `key`, looking the key up once: `decide` sees the key, the stored entry (if any) and
    /// the version the write would take ([`History::next_rv`]), and returns the change's kind
    /// and new state (for a deletion, the last state stamped with that version), or refuses.
    /// The change is applied and recorded in the window (which is then trimmed); returns its
    /// version, kind and new state.
    ///
    /// `decide` must answer `Added` exactly when there is no entry, `Modified` or `Deleted`
    /// otherwise.
    pub(crate) fn write<F>(&mut self, key: ObjectKey, decide: F) -> Result<Written<T>, MemoryError>
    where
        F: FnOnce(&ObjectKey, Option<&Entry<T>>, Result<u64, MemoryError>) -> Decision<T>,
    {
        let next = self.next_rv();
        let (rv, kind, key, obj, prev) = match self.objects.entry(key) {
            Slot::Occupied(mut stored) => {
                let (rv, kind, obj) = decide(stored.key(), Some(stored.get()), next)?;
                let key = stored.key().clone();
                let prev = if kind == ChangeKind::Deleted {
                    self.order.remove(&key);
                    stored.remove().obj
                } else {
                    debug_assert_eq!(kind, ChangeKind::Modified);
                    let entry = stored.get_mut();
                    entry.rv = rv;
                    std::mem::replace(&mut entry.obj, obj.clone())
                };
                (rv, kind, key, obj, Some(prev))
            }
            Slot::Vacant(vacant) => {
                let (rv, kind, obj) = decide(vacant.key(), None, next)?;
                debug_assert_eq!(kind, ChangeKind::Added);
                let key = vacant.key().clone();
                vacant.insert(Entry {
                    obj: obj.clone(),
                    rv,
                });
                self.order.insert(key.clone());
                (rv, kind, key, obj, None)
            }
        };
        debug_assert_eq!(Some(rv), self.rv.checked_add(1));
        self.rv = rv;
        let written = (rv, kind, obj.clone());
        self.changes.push_back(Change {
            rv,
            kind,
            key,
            obj,
            prev,
        });
        while self.changes.len() > self.window {
            match self.changes.pop_front() {
                Some(evicted) => self.oldest = evicted.rv,
                None => break,
            }
        }
        Ok(written)
    }

    /// Checks that the state at `rv` is known: `Expired` before the window, `TooLarge` after now.
    pub(crate) fn check(&self, rv: u64) -> Result<(), MemoryError> {
        if rv > self.rv {
            Err(MemoryError::TooLargeResourceVersion {
                requested: rv.into(),
                current: self.rv.into(),
            })
        } else if rv < self.oldest {
            Err(MemoryError::Expired {
                requested: rv.into(),
                oldest: self.oldest.into(),
            })
        } else {
            Ok(())
        }
    }

    /// The changes after version `rv`, oldest first.
    pub(crate) fn changes_after(
        &self,
        rv: u64,
    ) -> Result<impl Iterator<Item = &Change<T>> + '_, MemoryError> {
        self.check(rv)?;
        let skip = usize::try_from(rv - self.oldest).unwrap_or(usize::MAX);
        Ok(self.changes.iter().skip(skip))
    }

    /// Up to `limit` objects of the state at version `rv` whose keys come after `after`, in key
    /// order, and the key to continue after when more remain.
    ///
    /// Built by overlaying the current objects with the states the changes after `rv` replaced,
    /// so a page costs O(changes since `rv` + page), never a copy of the whole state.
    pub(crate) fn page_at(
        &self,
        rv: u64,
        after: Option<&ObjectKey>,
        limit: Option<usize>,
    ) -> Result<(Vec<Arc<T>>, Option<ObjectKey>), MemoryError> {
        let mut overlay: BTreeMap<&ObjectKey, Option<&Arc<T>>> = BTreeMap::new();
        for c in self.changes_after(rv)? {
            overlay.entry(&c.key).or_insert(c.prev.as_ref());
        }
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut current = self
            .order
            .range::<ObjectKey, _>((lower, Bound::Unbounded))
            .filter_map(|k| self.objects.get(k).map(|e| (k, e)))
            .peekable();
        let mut past = overlay
            .range::<&ObjectKey, _>((lower.as_ref(), Bound::Unbounded))
            .peekable();
        let limit = limit.unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last: Option<&ObjectKey> = None;
        loop {
            let order = match (current.peek(), past.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((ck, _)), Some((pk, _))) => (*ck).cmp(**pk),
            };
            let next = match order {
                Ordering::Less => current.next().map(|(k, e)| (k, Some(&e.obj))),
                Ordering::Greater => past.next().map(|(k, o)| (*k, *o)),
                Ordering::Equal => {
                    current.next();
                    past.next().map(|(k, o)| (*k, *o))
                }
            };
            let Some((key, Some(obj))) = next else {
                continue;
            };
            if items.len() == limit {
                return Ok((items, last.cloned()));
            }
            items.push(obj.clone());
            last = Some(key);
        }
        Ok((items, None))
    }
}

/// Parses a resource version of this source: `None` for the empty version.
pub(crate) fn parse_rv(rv: &ResourceVersion) -> Result<Option<u64>, MemoryError> {
    if rv.is_empty() {
        return Ok(None);
    }
    rv.as_str()
        .parse::<u64>()
        .map(Some)
        .map_err(|_| MemoryError::InvalidResourceVersion(rv.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(name).unwrap_or_else(|e| panic!("{e}"))
    }

    fn write(h: &mut History<u32>, name: &str, value: Option<u32>) {
        let written = h.write(key(name), |_, prev, rv| {
            let rv = rv?;
            Ok(match (value, prev) {
                (Some(v), None) => (rv, ChangeKind::Added, Arc::new(v)),
                (Some(v), Some(_)) => (rv, ChangeKind::Modified, Arc::new(v)),
                (None, Some(p)) => (rv, ChangeKind::Deleted, p.obj.clone()),
                (None, None) => panic!("delete of a missing key"),
            })
        });
        written.unwrap_or_else(|e| panic!("{e}"));
    }

    fn values(page: (Vec<Arc<u32>>, Option<ObjectKey>)) -> (Vec<u32>, Option<String>) {
        (
            page.0.iter().map(|v| **v).collect(),
            page.1.map(|k| k.as_str().to_owned()),
        )
    }

    #[test]
    fn a_window_of_zero_serves_only_the_current_version() {
        let mut h = History::new(1, 0);
        write(&mut h, "a", Some(1));
        write(&mut h, "a", Some(2));
        assert_eq!((h.rv(), h.oldest()), (3, 3));
        assert!(matches!(
            h.page_at(2, None, None),
            Err(MemoryError::Expired { .. })
        ));
        assert_eq!(
            values(h.page_at(3, None, None).unwrap_or_default()),
            (vec![2], None)
        );
        assert_eq!(h.changes_after(3).map(Iterator::count).ok(), Some(0));
    }

    #[test]
    fn pages_merge_current_objects_with_replaced_states_in_key_order() {
        let mut h = History::new(1, 10);
        for (name, v) in [("a", 1), ("c", 3), ("e", 5)] {
            write(&mut h, name, Some(v)); // rv 2, 3, 4
        }
        write(&mut h, "c", None); // 5
        write(&mut h, "b", Some(2)); // 6
        write(&mut h, "e", Some(50)); // 7
        write(&mut h, "e", Some(500)); // 8
        assert_eq!(
            values(h.page_at(4, None, Some(2)).unwrap_or_default()),
            (vec![1, 3], Some("c".into()))
        );
        let after_c = h.page_at(4, Some(&key("c")), Some(2)).unwrap_or_default();
        assert_eq!(values(after_c), (vec![5], None));
        assert_eq!(
            values(h.page_at(8, None, None).unwrap_or_default()),
            (vec![1, 2, 500], None)
        );
        assert_eq!(
            values(h.page_at(7, Some(&key("a")), Some(5)).unwrap_or_default()),
            (vec![2, 50], None)
        );
    }

    #[test]
    fn resource_versions_parse_as_decimal_counters() {
        assert_eq!(parse_rv(&ResourceVersion::default()), Ok(None));
        assert_eq!(parse_rv(&ResourceVersion::from("17")), Ok(Some(17)));
        assert!(parse_rv(&ResourceVersion::from("-1")).is_err());
        assert!(parse_rv(&ResourceVersion::from("1.5")).is_err());
    }
}
