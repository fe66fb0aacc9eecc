//! One secondary index: value -> set of object ids, kept lean.
//!
//! Objects are named by their slot id in the store (a `u32`), not by their key, so an index
//! costs an object 4 bytes per value it is indexed under plus 4 bytes in the per-object column
//! that remembers which values it was indexed under. That column is what lets an update or a
//! delete find the old entries without calling the index function on the old object.
//!
//! Values are interned once as `Arc<str>` (however many objects share them) and named by a value
//! id. A value held by a single object stores its id inline, without a set.

use crate::column::Column;
use crate::error::{BoxError, IndexFuncError};
use crate::id::{to_u32, Id};
use crate::indexers::{Func, KeyHint};
use crate::sync::Arc;
use crate::Hasher;
use kcache_core::ObjectKey;
use std::collections::{HashMap, HashSet};

/// `of_key` entry of an object indexed under no value.
const NONE: u32 = u32::MAX;
/// `of_key` entry of an object indexed under several values (they are in `multi`).
const MULTI: u32 = u32::MAX - 1;

/// The object ids indexed under one value. Never empty: the last removal deletes the value.
#[derive(Debug)]
pub(crate) enum KeySet {
    One(Id),
    #[allow(
        clippy::box_collection,
        reason = "boxed, the enum is 16 bytes instead of 40: most values hold one key"
    )]
    Many(Box<HashSet<Id, Hasher>>),
}

impl KeySet {
    fn insert(&mut self, id: Id) {
        match self {
            KeySet::One(k) if *k == id => {}
            KeySet::One(k) => {
                let mut set = HashSet::with_capacity_and_hasher(2, Hasher::default());
                set.insert(*k);
                set.insert(id);
                *self = KeySet::Many(Box::new(set));
            }
            KeySet::Many(set) => {
                set.insert(id);
            }
        }
    }

    /// Removes `id`; returns whether the set is now empty.
    fn remove(&mut self, id: Id) -> bool {
        match self {
            KeySet::One(k) => *k == id,
            KeySet::Many(set) => {
                set.remove(&id);
                match set.len() {
                    0 => true,
                    1 => {
                        if let Some(&last) = set.iter().next() {
                            *self = KeySet::One(last);
                        }
                        false
                    }
                    _ => false,
                }
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            KeySet::One(_) => 1,
            KeySet::Many(set) => set.len(),
        }
    }

    pub(crate) fn contains(&self, id: Id) -> bool {
        match self {
            KeySet::One(k) => *k == id,
            KeySet::Many(set) => set.contains(&id),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Id> + '_ {
        let (one, many) = match self {
            KeySet::One(k) => (Some(*k), None),
            KeySet::Many(set) => (None, Some(set.iter().copied())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// One value an object is about to be indexed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// A value the index already has.
    Known(u32),
    /// A new value: `text[start..end]` of the scratch buffer.
    New(u32, u32),
}

/// Reusable buffers for staging a write's index values (no allocation in the steady state).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pending: Vec<Pending>,
    /// End of each index's segment of `pending`.
    ends: Vec<usize>,
    text: String,
    vids: Vec<u32>,
}

impl Scratch {
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
        self.ends.clear();
        self.text.clear();
    }

    fn range(&self, i: usize) -> (usize, usize) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        (start, self.ends[i])
    }
}

#[derive(Debug)]
struct ValueEntry {
    value: Arc<str>,
    keys: KeySet,
}

/// The entries of one index.
#[derive(Debug, Default)]
pub(crate) struct IndexData {
    lookup: HashMap<Arc<str>, u32, Hasher>,
    values: Vec<Option<ValueEntry>>,
    free: Vec<u32>,
    /// Per object id: its single value id, [`NONE`] or [`MULTI`].
    of_key: Column<u32>,
    multi: HashMap<Id, Box<[u32]>, Hasher>,
}

impl IndexData {
    /// Appends the values `func` gives `obj` as the next segment of `scratch`, deduplicated
    /// (first occurrence kept), in time linear in the number of values.
    pub(crate) fn stage<T>(
        &self,
        func: &Func<T>,
        obj: &T,
        key: Option<KeyHint<'_>>,
        scratch: &mut Scratch,
    ) -> Result<(), BoxError> {
        let start = scratch.ends.last().copied().unwrap_or(0);
        let Scratch { pending, text, .. } = scratch;
        func.visit(obj, key, &mut |value: &str| {
            let p = match self.lookup.get(value) {
                Some(&vid) => Pending::Known(vid),
                None => {
                    let s = text.len();
                    text.push_str(value);
                    Pending::New(to_u32(s), to_u32(text.len()))
                }
            };
            pending.push(p);
        })?;
        dedup_segment(&mut scratch.pending, start, &scratch.text);
        scratch.ends.push(scratch.pending.len());
        Ok(())
    }

    fn old(&self, id: Id) -> &[u32] {
        match self.of_key.get(id as usize) {
            None | Some(&NONE) => &[],
            Some(&MULTI) => self.multi.get(&id).map_or(&[], |b| &b[..]),
            Some(v) => std::slice::from_ref(v),
        }
    }

    /// Indexes `id` under segment `i` of `scratch` (made by [`IndexData::stage`] for this index),
    /// and under nothing else. Calls no user code.
    pub(crate) fn set(&mut self, id: Id, scratch: &mut Scratch, i: usize) {
        let (start, end) = scratch.range(i);
        let Scratch {
            pending,
            text,
            vids,
            ..
        } = scratch;
        let new = &pending[start..end];
        let old = self.old(id);
        // `new` holds no duplicates: it equals `old` if it has as many values, all in `old`.
        let unchanged = new.len() == old.len() && {
            let old = SmallSet::new(old);
            new.iter()
                .all(|p| matches!(p, Pending::Known(v) if old.contains(*v)))
        };
        if unchanged {
            return;
        }
        vids.clear();
        for p in new {
            let vid = match *p {
                Pending::Known(vid) => {
                    if let Some(Some(entry)) = self.values.get_mut(vid as usize) {
                        entry.keys.insert(id);
                    }
                    vid
                }
                Pending::New(s, e) => self.intern(&text[s as usize..e as usize], id),
            };
            vids.push(vid);
        }
        let old = match self.of_key.get(id as usize).copied() {
            None | Some(NONE) => OldVids::None,
            Some(MULTI) => OldVids::Many(self.multi.remove(&id).unwrap_or_default()),
            Some(v) => OldVids::One(v),
        };
        let kept = SmallSet::new(vids);
        for &vid in old.as_slice() {
            if !kept.contains(vid) {
                self.unindex(id, vid);
            }
        }
        let slot = match vids.len() {
            0 => NONE,
            1 => vids[0],
            _ => {
                self.multi.insert(id, vids.as_slice().into());
                MULTI
            }
        };
        let at = id as usize;
        self.of_key.extend_to(at + 1, || NONE);
        if let Some(v) = self.of_key.get_mut(at) {
            *v = slot;
        }
    }

    /// Removes `id` from every value it is indexed under.
    pub(crate) fn clear(&mut self, id: Id) {
        let Some(slot) = self.of_key.get_mut(id as usize) else {
            return;
        };
        let old = match std::mem::replace(slot, NONE) {
            NONE => OldVids::None,
            MULTI => OldVids::Many(self.multi.remove(&id).unwrap_or_default()),
            v => OldVids::One(v),
        };
        for &vid in old.as_slice() {
            self.unindex(id, vid);
        }
    }

    fn intern(&mut self, value: &str, id: Id) -> u32 {
        let value: Arc<str> = Arc::from(value);
        let entry = ValueEntry {
            value: value.clone(),
            keys: KeySet::One(id),
        };
        let vid = match self.free.pop() {
            Some(vid) => {
                self.values[vid as usize] = Some(entry);
                vid
            }
            None => {
                self.values.push(Some(entry));
                to_u32(self.values.len() - 1)
            }
        };
        self.lookup.insert(value, vid);
        vid
    }

    fn unindex(&mut self, id: Id, vid: u32) {
        let Some(slot) = self.values.get_mut(vid as usize) else {
            return;
        };
        if slot.as_mut().is_some_and(|e| e.keys.remove(id)) {
            if let Some(entry) = slot.take() {
                self.lookup.remove(&entry.value);
            }
            self.free.push(vid);
        }
    }

    /// The ids under `value`, if any.
    pub(crate) fn keys(&self, value: &str) -> Option<&KeySet> {
        let vid = *self.lookup.get(value)?;
        self.values[vid as usize].as_ref().map(|e| &e.keys)
    }

    /// Every value that currently has keys.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<str>> + '_ {
        self.lookup.keys()
    }

    /// Every (value, ids) entry.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&Arc<str>, &KeySet)> + '_ {
        self.values.iter().flatten().map(|e| (&e.value, &e.keys))
    }

    /// The values `id` is recorded under.
    pub(crate) fn recorded(&self, id: Id) -> impl Iterator<Item = &str> + '_ {
        self.old(id)
            .iter()
            .filter_map(|&vid| self.values.get(vid as usize)?.as_ref())
            .map(|e| &*e.value)
    }

    /// Internal consistency: lookup and entries agree, every id in a set records that value.
    pub(crate) fn check(&self) -> Result<(), String> {
        let live = self.values.iter().flatten().count();
        if live != self.lookup.len() {
            return Err(format!(
                "{live} value entries, {} looked up",
                self.lookup.len()
            ));
        }
        for (value, &vid) in &self.lookup {
            let entry = self.values.get(vid as usize).and_then(Option::as_ref);
            if entry.is_none_or(|e| e.value != *value) {
                return Err(format!("value {value:?} looks up the wrong entry"));
            }
            for id in entry.into_iter().flat_map(|e| e.keys.iter()) {
                if !self.old(id).contains(&vid) {
                    return Err(format!("id {id} is under {value:?} but does not record it"));
                }
            }
        }
        Ok(())
    }
}

/// Up to this many values, duplicates are found by comparing every pair (cheaper than hashing
/// for the one to three values of a typical index); beyond it, by hashing, so a function that
/// returns many values costs linear time, not quadratic.
const LINEAR_MAX: usize = 16;

// Counts the equality probes of the dedup and membership checks on this thread, so a test can
// tell linear from quadratic work without timing anything.
#[cfg(test)]
thread_local! {
    static PROBES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[inline]
fn probe() {
    #[cfg(test)]
    PROBES.with(|p| p.set(p.get() + 1));
}

/// Removes later duplicates from `pending[start..]` (a `New` value is compared by its text in
/// `text`), keeping the first occurrence of each and the order.
fn dedup_segment(pending: &mut Vec<Pending>, start: usize, text: &str) {
    let value = |p: &Pending| match *p {
        Pending::Known(v) => Err(v),
        Pending::New(s, e) => Ok(&text[s as usize..e as usize]),
    };
    let len = pending.len() - start;
    if len < 2 {
        return;
    }
    let mut write = start;
    if len <= LINEAR_MAX {
        for read in start..pending.len() {
            let p = pending[read];
            let dup = pending[start..write].iter().any(|q| {
                probe();
                value(q) == value(&p)
            });
            if !dup {
                pending[write] = p;
                write += 1;
            }
        }
    } else {
        let mut known: HashSet<u32, Hasher> =
            HashSet::with_capacity_and_hasher(len, Hasher::default());
        let mut new: HashSet<&str, Hasher> =
            HashSet::with_capacity_and_hasher(len, Hasher::default());
        for read in start..pending.len() {
            let p = pending[read];
            probe();
            let first = match value(&p) {
                Err(v) => known.insert(v),
                Ok(t) => new.insert(t),
            };
            if first {
                pending[write] = p;
                write += 1;
            }
        }
    }
    pending.truncate(write);
}

/// A set of value ids for membership tests: a scan when small, a hash set when large.
enum SmallSet<'a> {
    Scan(&'a [u32]),
    Hashed(HashSet<u32, Hasher>),
}

impl<'a> SmallSet<'a> {
    fn new(ids: &'a [u32]) -> Self {
        if ids.len() <= LINEAR_MAX {
            SmallSet::Scan(ids)
        } else {
            SmallSet::Hashed(ids.iter().copied().collect())
        }
    }

    fn contains(&self, id: u32) -> bool {
        match self {
            SmallSet::Scan(ids) => ids.iter().any(|&v| {
                probe();
                v == id
            }),
            SmallSet::Hashed(set) => {
                probe();
                set.contains(&id)
            }
        }
    }
}

enum OldVids {
    None,
    One(u32),
    Many(Box<[u32]>),
}

impl OldVids {
    fn as_slice(&self) -> &[u32] {
        match self {
            OldVids::None => &[],
            OldVids::One(v) => std::slice::from_ref(v),
            OldVids::Many(b) => b,
        }
    }
}

/// One named index.
pub(crate) struct Index<T> {
    name: String,
    func: Func<T>,
    pub(crate) data: IndexData,
}

impl<T> Index<T> {
    pub(crate) fn new(name: String, func: Func<T>) -> Self {
        Self {
            name,
            func,
            data: IndexData::default(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn func(&self) -> &Func<T> {
        &self.func
    }

    /// Wraps a failure of this index's function.
    pub(crate) fn error(&self, key: Option<&str>, source: BoxError) -> IndexFuncError {
        IndexFuncError {
            index: self.name.clone(),
            key: key.and_then(|k| ObjectKey::new(k).ok()),
            source,
        }
    }

    /// Runs the index function into a list (for checks and probes).
    pub(crate) fn compute(
        &self,
        obj: &T,
        key: Option<&str>,
    ) -> Result<Vec<String>, IndexFuncError> {
        let mut out = Vec::new();
        self.func
            .visit(obj, None, &mut |v| out.push(v.to_owned()))
            .map_err(|e| self.error(key, e))?;
        Ok(out)
    }

    /// Computes this index from scratch over `items`, without touching the current entries.
    pub(crate) fn build<'a>(
        &self,
        items: impl Iterator<Item = (Id, &'a str, &'a Arc<T>)>,
        hint: Option<std::any::TypeId>,
        scratch: &mut Scratch,
    ) -> Result<IndexData, IndexFuncError>
    where
        T: 'a,
    {
        let mut data = IndexData::default();
        for (id, key, obj) in items {
            scratch.clear();
            data.stage(&self.func, obj, hint.map(|a| (key, a)), scratch)
                .map_err(|e| self.error(Some(key), e))?;
            data.set(id, scratch, 0);
        }
        scratch.clear();
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn func() -> Func<Vec<&'static str>> {
        Func::Values(Box::new(|v: &Vec<&'static str>| {
            Ok(v.iter().map(|s| s.to_string()).collect())
        }))
    }

    fn write(data: &mut IndexData, id: Id, obj: &Vec<&'static str>) {
        let mut scratch = Scratch::default();
        data.stage(&func(), obj, None, &mut scratch).unwrap();
        data.set(id, &mut scratch, 0);
        data.check().unwrap();
    }

    #[test]
    fn an_index_entry_stays_small() {
        assert!(std::mem::size_of::<KeySet>() <= 16);
        assert!(std::mem::size_of::<Option<ValueEntry>>() <= 32);
    }

    #[test]
    fn a_key_set_grows_and_shrinks_back_to_one_inline_key() {
        let mut set = KeySet::One(1);
        set.insert(1);
        assert!(matches!(set, KeySet::One(_)));
        set.insert(2);
        assert_eq!(set.len(), 2);
        assert!(!set.remove(1));
        assert!(matches!(set, KeySet::One(2)));
        assert!(set.remove(2));
    }

    #[test]
    fn values_are_interned_once_and_removed_when_empty() {
        let mut ix = IndexData::default();
        write(&mut ix, 0, &vec!["x", "x", "y"]);
        write(&mut ix, 1, &vec!["x"]);
        assert_eq!(ix.keys("x").unwrap().len(), 2);
        ix.clear(0);
        ix.check().unwrap();
        assert!(ix.keys("y").is_none());
        assert_eq!(ix.keys("x").unwrap().iter().collect::<Vec<_>>(), [1]);
        write(&mut ix, 0, &vec!["z", "x"]);
        write(&mut ix, 0, &vec!["x", "w"]);
        assert!(ix.keys("z").is_none());
        assert_eq!(ix.recorded(0).collect::<Vec<_>>(), ["x", "w"]);
    }

    /// The probes one write of `obj` over `before` costs (stage + set).
    fn probes_of_write(before: &[String], obj: &[String]) -> u64 {
        let f: Func<Vec<String>> = Func::Values(Box::new(|v: &Vec<String>| Ok(v.clone())));
        let mut ix = IndexData::default();
        let mut scratch = Scratch::default();
        ix.stage(&f, &before.to_vec(), None, &mut scratch).unwrap();
        ix.set(0, &mut scratch, 0);
        scratch.clear();
        PROBES.with(|p| p.set(0));
        ix.stage(&f, &obj.to_vec(), None, &mut scratch).unwrap();
        ix.set(0, &mut scratch, 0);
        let probes = PROBES.with(std::cell::Cell::get);
        ix.check().unwrap();
        probes
    }

    #[test]
    fn indexing_many_values_costs_linear_not_quadratic_probes() {
        for n in [1_000usize, 8_000] {
            let distinct: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            let shifted: Vec<String> = (n / 2..n + n / 2).map(|i| format!("v{i}")).collect();
            let repeated: Vec<String> = (0..n).map(|i| format!("v{}", i % 7)).collect();
            let cases = [
                ("add, distinct new values", &[][..], &distinct[..]),
                ("add, one value repeated", &[], &repeated),
                ("update, same values", &distinct, &distinct),
                ("update, half the values replaced", &distinct, &shifted),
            ];
            for (what, before, obj) in cases {
                let probes = probes_of_write(before, obj);
                // Linear: a few probes per value. Quadratic would be about n²/2.
                assert!(
                    probes <= 4 * n as u64,
                    "{what}, {n} values: {probes} probes"
                );
            }
        }
    }

    #[test]
    fn duplicates_are_dropped_in_order_on_both_paths() {
        for n in [3usize, 16, 17, 100] {
            let mut values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            values.extend((0..n).rev().map(|i| format!("v{i}")));
            let f: Func<Vec<String>> = Func::Values(Box::new(|v: &Vec<String>| Ok(v.clone())));
            let mut ix = IndexData::default();
            let mut scratch = Scratch::default();
            // First as new values, then again as known ones.
            for _ in 0..2 {
                scratch.clear();
                ix.stage(&f, &values, None, &mut scratch).unwrap();
                ix.set(0, &mut scratch, 0);
                ix.check().unwrap();
                let recorded: Vec<&str> = ix.recorded(0).collect();
                let expected: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
                assert_eq!(recorded, expected, "{n}");
            }
        }
    }

    #[test]
    fn an_unchanged_value_list_changes_nothing() {
        let mut ix = IndexData::default();
        write(&mut ix, 3, &vec!["x"]);
        write(&mut ix, 3, &vec!["x"]);
        assert_eq!(ix.keys("x").unwrap().iter().collect::<Vec<_>>(), [3]);
        write(&mut ix, 3, &vec![]);
        assert!(ix.keys("x").is_none());
    }
}
