//! `Items`: the stored objects and their keys, numbered by id.

use super::SlotKey;
use crate::column::Column;
use crate::id::{to_u32, Id};
use crate::sync::Arc;
use crate::Hasher;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::BuildHasher;

/// A stored object and its key, as seen through [`Items::slot`].
pub(crate) struct Slot<'a, T> {
    pub(crate) key: &'a SlotKey,
    pub(crate) obj: &'a Arc<T>,
}

impl<T> Clone for Slot<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Slot<'_, T> {}

/// The stored objects, numbered by id (the slot number the indexes refer to), found by key
/// through a table of 32-bit key hashes (8 bytes an object; the rare keys whose hash is taken
/// spill into a small map).
///
/// Objects and keys are two [`Column`]s: 8 bytes an object for the object's `Arc` (all that
/// `by_index` and `list` read) and 24 for its key ([`SlotKey`]: the text itself when short). A
/// free id (recycled by the next insert) holds no object and an empty key.
pub(crate) struct Items<T> {
    hasher: Hasher,
    by_hash: HashMap<u32, Id, Hasher>,
    spill: HashMap<Box<str>, Id, Hasher>,
    objs: Column<Option<Arc<T>>>,
    keys: Column<SlotKey>,
    free: Vec<Id>,
    len: usize,
}

impl<T> Items<T> {
    pub(crate) fn new() -> Self {
        Self {
            hasher: Hasher::default(),
            by_hash: HashMap::default(),
            spill: HashMap::default(),
            objs: Column::default(),
            keys: Column::default(),
            free: Vec::new(),
            len: 0,
        }
    }

    fn h32(&self, key: &[u8]) -> u32 {
        // Tests and fuzzers keep 3 bits, so that most keys collide and the spill map is exercised.
        const MASK: u32 = if cfg!(any(test, fuzzing)) {
            0x7
        } else {
            u32::MAX
        };
        self.hasher.hash_one(key) as u32 & MASK
    }

    /// The id of the object under `key`.
    pub(crate) fn find(&self, key: &str) -> Option<Id> {
        let id = *self.by_hash.get(&self.h32(key.as_bytes()))?;
        if self
            .slot(id)
            .is_some_and(|s| s.key.as_bytes() == key.as_bytes())
        {
            return Some(id);
        }
        if self.spill.is_empty() {
            None
        } else {
            self.spill.get(key).copied()
        }
    }

    /// The object with id `id` (reads only the objects' column).
    pub(crate) fn obj(&self, id: Id) -> Option<&Arc<T>> {
        self.objs.get(id as usize)?.as_ref()
    }

    /// The object with id `id` and its key.
    pub(crate) fn slot(&self, id: Id) -> Option<Slot<'_, T>> {
        Some(Slot {
            obj: self.obj(id)?,
            key: self.keys.get(id as usize)?,
        })
    }

    /// Stores a new key (known to be absent), copying its text.
    pub(crate) fn insert_new(&mut self, key: &str, obj: Arc<T>) -> Id {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = to_u32(self.objs.len());
                self.objs.push(None);
                self.keys.push(SlotKey::EMPTY);
                id
            }
        };
        let h = self.h32(key.as_bytes());
        match self.by_hash.entry(h) {
            Entry::Vacant(e) => {
                e.insert(id);
            }
            Entry::Occupied(_) => {
                self.spill.insert(key.into(), id);
            }
        }
        if let Some(o) = self.objs.get_mut(id as usize) {
            *o = Some(obj);
        }
        if let Some(k) = self.keys.get_mut(id as usize) {
            *k = SlotKey::new(key);
        }
        self.len += 1;
        id
    }

    /// Replaces the object with id `id`, returning the old one.
    pub(crate) fn replace_obj(&mut self, id: Id, obj: Arc<T>) -> Option<Arc<T>> {
        let slot = self.objs.get_mut(id as usize)?.as_mut()?;
        Some(std::mem::replace(slot, obj))
    }

    /// Removes the object with id `id`, returning it with its key.
    pub(crate) fn remove(&mut self, id: Id) -> Option<(SlotKey, Arc<T>)> {
        let obj = self.objs.get_mut(id as usize)?.take()?;
        let key = self
            .keys
            .get_mut(id as usize)
            .map(|k| std::mem::replace(k, SlotKey::EMPTY))
            .unwrap_or(SlotKey::EMPTY);
        let h = self.h32(key.as_bytes());
        if self.by_hash.get(&h) == Some(&id) {
            let heir = self
                .spill
                .iter()
                .find(|(k, _)| self.h32(k.as_bytes()) == h)
                .map(|(k, &i)| (k.clone(), i));
            match heir {
                Some((k, i)) => {
                    self.spill.remove(&k);
                    self.by_hash.insert(h, i);
                }
                None => {
                    self.by_hash.remove(&h);
                }
            }
        } else {
            self.spill.remove(key.as_str());
        }
        self.free.push(id);
        self.len -= 1;
        Some((key, obj))
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every stored object, in id order (reads only the objects' column).
    pub(crate) fn objs(&self) -> impl Iterator<Item = &Arc<T>> + '_ {
        self.objs.iter().flatten()
    }

    /// Every (id, slot), in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Id, Slot<'_, T>)> + '_ {
        self.objs
            .iter()
            .zip(self.keys.iter())
            .enumerate()
            .filter_map(|(i, (obj, key))| {
                Some((
                    to_u32(i),
                    Slot {
                        obj: obj.as_ref()?,
                        key,
                    },
                ))
            })
    }

    /// Internal consistency of the key table.
    pub(crate) fn check(&self) -> Result<(), String> {
        let live = self.objs().count();
        if live != self.len || self.by_hash.len() + self.spill.len() != live {
            return Err(format!(
                "{live} slots, len {}, {} + {} keys",
                self.len,
                self.by_hash.len(),
                self.spill.len()
            ));
        }
        if self.objs.len() != self.keys.len() || self.objs.len() != live + self.free.len() {
            return Err(format!(
                "{} objects, {} keys, {live} live, {} free",
                self.objs.len(),
                self.keys.len(),
                self.free.len()
            ));
        }
        for (id, slot) in self.iter() {
            if self.find(slot.key.as_str()) != Some(id) {
                return Err(format!("key {} does not find its slot", slot.key));
            }
        }
        for &id in &self.free {
            if self.obj(id).is_some() || self.keys.get(id as usize) != Some(&SlotKey::EMPTY) {
                return Err(format!("free id {id} holds an object or a key"));
            }
        }
        Ok(())
    }
}
