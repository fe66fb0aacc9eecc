//! Replacing the whole content in place: one write lock, only what differs is touched, and the
//! caller learns what each listed object replaced (for its notifications).

use super::{State, ThreadSafeStore};
use crate::error::IndexFuncError;
use kcache_core::{KeyText, ObjectKey, ResourceVersion};
use std::any::TypeId;
use std::collections::HashSet;
use std::sync::Arc;

/// What a listed object did to the store in [`Indexer::swap_in`](crate::Indexer::swap_in).
#[derive(Debug)]
pub enum Swapped<T> {
    /// The key was not stored: the object was added.
    Added,
    /// The key was stored: the object replaced this one (the very same `Arc` when the caller
    /// listed the stored object again, which the store then left alone, indexes included).
    Updated(Arc<T>),
    /// An index function failed on the object: it was left out, and whatever the key held
    /// before was removed (it is in [`SwapOutcome::deleted`]).
    Refused(IndexFuncError),
}

/// The outcome of [`Indexer::swap_in`](crate::Indexer::swap_in).
#[derive(Debug)]
pub struct SwapOutcome<T> {
    /// The stored objects the list left out (or whose listed object was refused), with their
    /// keys, removed by the swap.
    pub deleted: Vec<(ObjectKey, Arc<T>)>,
    /// One entry per listed object, in list order.
    pub listed: Vec<Swapped<T>>,
}

impl<T> State<T> {
    /// Removes the object under `key` (if any) and its index entries.
    fn remove_key(&mut self, key: &str) -> Option<(ObjectKey, Arc<T>)> {
        let id = self.items.find(key)?;
        for ix in &mut self.indexes {
            ix.data.clear(id);
        }
        let (slot_key, obj) = self.items.remove(id)?;
        slot_key.to_key().map(|k| (k, obj))
    }
}

impl<T> ThreadSafeStore<T> {
    /// Makes the content exactly `items` (a later duplicate key is an update of the earlier
    /// one) as of `rv`, under one write lock, in place: keys not listed are removed, a listed
    /// object that is the very `Arc` already stored is left alone, every other one is written
    /// and re-indexed. No reader sees a state in between. Memory beyond the store: a set of
    /// the listed keys' texts (borrowed) and the outcome.
    pub(crate) fn swap_in(
        &self,
        items: &[(KeyText, Arc<T>)],
        rv: ResourceVersion,
        accessor: Option<TypeId>,
    ) -> SwapOutcome<T> {
        let listed_keys: HashSet<&str, foldhash::fast::RandomState> =
            items.iter().map(|(k, _)| k.as_str()).collect();
        let mut listed = Vec::with_capacity(items.len());
        let mut guard = self.state.write();
        let state = &mut *guard;
        let gone: Vec<_> = state
            .items
            .iter()
            .filter(|(_, s)| !listed_keys.contains(s.key.as_str()))
            .map(|(id, _)| id)
            .collect();
        let mut deleted = Vec::with_capacity(gone.len());
        for id in gone {
            for ix in &mut state.indexes {
                ix.data.clear(id);
            }
            if let Some((slot_key, obj)) = state.items.remove(id) {
                if let Some(key) = slot_key.to_key() {
                    deleted.push((key, obj));
                }
            }
        }
        for (key, obj) in items {
            let key = key.as_str();
            if let Some(id) = state.items.find(key) {
                if let Some(stored) = state.items.obj(id) {
                    if Arc::ptr_eq(stored, obj) {
                        listed.push(Swapped::Updated(stored.clone()));
                        continue;
                    }
                }
            }
            match state.write(key, obj.clone(), accessor) {
                Ok(Some(old)) => listed.push(Swapped::Updated(old)),
                Ok(None) => listed.push(Swapped::Added),
                Err(e) => {
                    deleted.extend(state.remove_key(key));
                    listed.push(Swapped::Refused(e));
                }
            }
        }
        state.rv = rv;
        drop(guard);
        SwapOutcome { deleted, listed }
    }
}
