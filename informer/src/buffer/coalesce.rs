//! The bounded queue: at most one pending notification per key, merged by client-go's meaning.

use crate::event::{Event, Notification};
use kcache_core::KeyText;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Pending notifications, one per key, handed out in the order each key first became pending.
///
/// Each entry also remembers what the handler knew of the key before it (`known`): nothing
/// before an add, the old state before an update, the deleted state before a delete. A merge
/// that has to express "the handler knew X, the key now holds Y" builds its update from it.
pub(crate) struct Coalescing<T> {
    order: BTreeMap<u64, KeyText>,
    by_key: HashMap<KeyText, Entry<T>>,
    next_seq: u64,
}

struct Entry<T> {
    seq: u64,
    pending: Notification<T>,
    known: Option<Arc<T>>,
}

impl<T> Coalescing<T> {
    pub(crate) fn new() -> Self {
        Self {
            order: BTreeMap::new(),
            by_key: HashMap::new(),
            next_seq: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Queues `n`, merging it into the key's pending notification. Returns how many initial
    /// notifications the merge resolved without a delivery (0, 1 or 2).
    pub(crate) fn push(&mut self, n: Notification<T>) -> usize {
        match self.by_key.remove(&n.key) {
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.order.insert(seq, n.key.clone());
                let known = match &n.event {
                    Event::Added { .. } => None,
                    Event::Updated { old, .. } => Some(old.clone()),
                    Event::Deleted(d) => d.object().cloned(),
                };
                let entry = Entry {
                    seq,
                    pending: n,
                    known,
                };
                self.by_key.insert(entry.pending.key.clone(), entry);
                0
            }
            Some(Entry {
                seq,
                pending: old,
                known,
            }) => {
                let before = usize::from(old.initial) + usize::from(n.initial);
                match merge(old, n, known.as_ref()) {
                    Some(merged) => {
                        let after = usize::from(merged.initial);
                        let entry = Entry {
                            seq,
                            pending: merged,
                            known,
                        };
                        self.by_key.insert(entry.pending.key.clone(), entry);
                        before - after
                    }
                    None => {
                        self.order.remove(&seq);
                        before
                    }
                }
            }
        }
    }

    pub(crate) fn pop(&mut self) -> Option<Notification<T>> {
        let (_, key) = self.order.pop_first()?;
        self.by_key.remove(&key).map(|e| e.pending)
    }

    /// Drops everything; returns how many pending notifications were initial.
    pub(crate) fn clear(&mut self) -> usize {
        let initial = self.by_key.values().filter(|e| e.pending.initial).count();
        self.order.clear();
        self.by_key.clear();
        initial
    }
}

/// The notification that stands for `old` followed by `new` (same key) for a handler that only
/// needs the latest state, or `None` when they cancel out. `known` is what the handler knew of
/// the key before `old`.
fn merge<T>(
    old: Notification<T>,
    new: Notification<T>,
    known: Option<&Arc<T>>,
) -> Option<Notification<T>> {
    let key = new.key;
    let event = match (old.event, new.event) {
        // Still unknown to the handler: it stays an add, with the newest object.
        (
            Event::Added {
                is_in_initial_list, ..
            },
            Event::Updated { new: obj, .. },
        ) => Event::Added {
            obj,
            is_in_initial_list,
        },
        (
            Event::Added {
                is_in_initial_list: a,
                ..
            },
            Event::Added {
                obj,
                is_in_initial_list: b,
            },
        ) => Event::Added {
            obj,
            is_in_initial_list: a || b,
        },
        // The handler never learned of the object: nothing to tell.
        (Event::Added { .. }, Event::Deleted(_)) => return None,
        // The handler knows `old`; the newest state is what it needs.
        (Event::Updated { old: prev, .. }, Event::Updated { new: obj, .. })
        | (Event::Updated { old: prev, .. }, Event::Added { obj, .. }) => Event::Updated {
            old: prev,
            new: obj,
        },
        (Event::Updated { .. }, Event::Deleted(d)) | (Event::Deleted(_), Event::Deleted(d)) => {
            Event::Deleted(d)
        }
        // Deleted, then back: the handler still holds what it knew, so it gets an update from
        // that (or an add when it knew nothing).
        (Event::Deleted(_), Event::Added { obj, .. })
        | (Event::Deleted(_), Event::Updated { new: obj, .. }) => match known {
            Some(prev) => Event::Updated {
                old: prev.clone(),
                new: obj,
            },
            None => Event::Added {
                obj,
                is_in_initial_list: false,
            },
        },
    };
    let initial = (old.initial || new.initial) && matches!(event, Event::Added { .. });
    Some(Notification {
        key,
        event,
        initial,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DeletedObject;
    use std::sync::Arc;

    fn key(k: &str) -> kcache_core::ObjectKey {
        kcache_core::ObjectKey::new(k).unwrap()
    }
    fn add(k: &str, v: u32, initial: bool) -> Notification<u32> {
        Notification::new(
            key(k).into(),
            Event::Added {
                obj: Arc::new(v),
                is_in_initial_list: initial,
            },
        )
    }
    fn upd(k: &str, a: u32, b: u32) -> Notification<u32> {
        Notification::new(
            key(k).into(),
            Event::Updated {
                old: Arc::new(a),
                new: Arc::new(b),
            },
        )
    }
    fn del(k: &str, v: u32) -> Notification<u32> {
        Notification::new(
            key(k).into(),
            Event::Deleted(DeletedObject::observed(key(k), Arc::new(v))),
        )
    }

    #[test]
    fn update_after_an_undelivered_add_stays_an_add_with_the_newest_object() {
        let mut q = Coalescing::new();
        assert_eq!(q.push(add("a", 1, true)), 0);
        assert_eq!(q.push(upd("a", 1, 2)), 0);
        assert_eq!(q.len(), 1);
        let n = q.pop().unwrap();
        assert!(n.initial);
        assert_eq!(
            n.event,
            Event::Added {
                obj: Arc::new(2),
                is_in_initial_list: true
            }
        );
    }

    #[test]
    fn delete_of_an_undelivered_add_cancels_out_and_resolves_its_initial_count() {
        let mut q = Coalescing::new();
        q.push(add("a", 1, true));
        assert_eq!(q.push(del("a", 1)), 1);
        assert_eq!(q.len(), 0);
        assert!(q.pop().is_none());
    }

    #[test]
    fn delete_after_update_becomes_the_delete() {
        let mut q = Coalescing::new();
        q.push(upd("a", 1, 2));
        q.push(upd("a", 2, 3));
        q.push(del("a", 3));
        assert!(matches!(q.pop().unwrap().event, Event::Deleted(_)));
    }

    #[test]
    fn updates_merge_from_the_oldest_old_to_the_newest_new() {
        let mut q = Coalescing::new();
        q.push(upd("a", 1, 2));
        q.push(upd("a", 2, 3));
        assert_eq!(
            q.pop().unwrap().event,
            Event::Updated {
                old: Arc::new(1),
                new: Arc::new(3)
            }
        );
    }

    #[test]
    fn delete_then_add_becomes_an_update_from_the_deleted_state() {
        let mut q = Coalescing::new();
        q.push(del("a", 1));
        q.push(add("a", 5, false));
        assert_eq!(
            q.pop().unwrap().event,
            Event::Updated {
                old: Arc::new(1),
                new: Arc::new(5)
            }
        );
    }

    #[test]
    fn a_key_keeps_its_place_when_merged() {
        let mut q = Coalescing::new();
        q.push(upd("a", 1, 2));
        q.push(upd("b", 1, 2));
        q.push(upd("a", 2, 3));
        assert_eq!(q.pop().unwrap().key.as_str(), "a");
        assert_eq!(q.pop().unwrap().key.as_str(), "b");
    }
}
