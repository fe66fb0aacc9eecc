//! One secondary index: value -> set of keys, kept lean.
//!
//! Values are interned as `Arc<str>` (one allocation per distinct value, however many objects
//! share it) and keys are the store's own `ObjectKey`s (clones of one `Arc<str>`), so an object
//! costs one 16-byte key slot per value it is indexed under. A value held by a single object (the
//! common case for high-cardinality indexes) stores its key inline, without a set.

use crate::error::IndexFuncError;
use crate::indexers::IndexFunc;
use crate::sync::Arc;
use kcache_core::ObjectKey;
use std::collections::{HashMap, HashSet};

/// The hasher of every map in the crate.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The keys indexed under one value. Never empty: the last removal deletes the value.
#[derive(Debug)]
pub(crate) enum KeySet {
    One(ObjectKey),
    #[allow(
        clippy::box_collection,
        reason = "boxed, the enum is 24 bytes instead of 48: most values hold one key"
    )]
    Many(Box<HashSet<ObjectKey, Hasher>>),
}

impl KeySet {
    fn insert(&mut self, key: &ObjectKey) {
        match self {
            KeySet::One(k) if k == key => {}
            KeySet::One(k) => {
                let mut set = HashSet::with_capacity_and_hasher(2, Hasher::default());
                set.insert(k.clone());
                set.insert(key.clone());
                *self = KeySet::Many(Box::new(set));
            }
            KeySet::Many(set) => {
                if !set.contains(key) {
                    set.insert(key.clone());
                }
            }
        }
    }

    /// Removes `key`; returns whether the set is now empty.
    fn remove(&mut self, key: &ObjectKey) -> bool {
        match self {
            KeySet::One(k) => k == key,
            KeySet::Many(set) => {
                set.remove(key);
                match set.len() {
                    0 => true,
                    1 => {
                        let last = set.iter().next().cloned();
                        if let Some(last) = last {
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

    pub(crate) fn contains(&self, key: &ObjectKey) -> bool {
        match self {
            KeySet::One(k) => k == key,
            KeySet::Many(set) => set.contains(key),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &ObjectKey> + '_ {
        let (one, many) = match self {
            KeySet::One(k) => (Some(k), None),
            KeySet::Many(set) => (None, Some(set.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// The values an object had in an index before a write.
#[derive(Debug)]
pub(crate) enum OldValues {
    /// There was no stored object.
    None,
    /// The index function's values for the stored object.
    Known(Vec<String>),
    /// The index function failed on the stored object (it succeeded when the object was
    /// written, so it is not deterministic): remove the key wherever it appears.
    Unknown,
}

/// What one write does to one index, computed before anything changes.
#[derive(Debug)]
pub(crate) enum Plan {
    Unchanged,
    Change { old: OldValues, new: Vec<String> },
}

/// The entries of one index: value -> keys.
pub(crate) type Values = HashMap<Arc<str>, KeySet, Hasher>;

fn insert_value(values: &mut Values, key: &ObjectKey, value: String) {
    match values.get_mut(value.as_str()) {
        Some(set) => set.insert(key),
        None => {
            values.insert(Arc::from(value), KeySet::One(key.clone()));
        }
    }
}

/// One named index.
pub(crate) struct Index<T> {
    name: String,
    func: IndexFunc<T>,
    values: Values,
}

impl<T> Index<T> {
    pub(crate) fn new(name: String, func: IndexFunc<T>) -> Self {
        Self {
            name,
            func,
            values: HashMap::default(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Runs the index function, naming the index and key in the error.
    pub(crate) fn compute(
        &self,
        obj: &T,
        key: Option<&ObjectKey>,
    ) -> Result<Vec<String>, IndexFuncError> {
        (self.func)(obj).map_err(|source| IndexFuncError {
            index: self.name.clone(),
            key: key.cloned(),
            source,
        })
    }

    /// Decides what replacing `old` by `new` under `key` does to this index. Fails only when the
    /// function fails on `new`; nothing is changed either way.
    pub(crate) fn plan(
        &self,
        key: &ObjectKey,
        old: Option<&T>,
        new: Option<&T>,
    ) -> Result<Plan, IndexFuncError> {
        let new = match new {
            Some(obj) => self.compute(obj, Some(key))?,
            None => Vec::new(),
        };
        let old = match old {
            None => OldValues::None,
            Some(obj) => match (self.func)(obj) {
                Ok(values) if values == new => return Ok(Plan::Unchanged),
                Ok(values) => OldValues::Known(values),
                Err(_) => OldValues::Unknown,
            },
        };
        Ok(Plan::Change { old, new })
    }

    /// Applies a plan made by [`Index::plan`]. Calls no user code.
    pub(crate) fn apply(&mut self, key: &ObjectKey, plan: Plan) {
        let Plan::Change { old, new } = plan else {
            return;
        };
        match old {
            OldValues::None => {}
            OldValues::Known(values) => {
                for value in &values {
                    self.remove(key, value);
                }
            }
            OldValues::Unknown => self.values.retain(|_, set| !set.remove(key)),
        }
        for value in new {
            self.insert(key, value);
        }
    }

    fn insert(&mut self, key: &ObjectKey, value: String) {
        insert_value(&mut self.values, key, value);
    }

    fn remove(&mut self, key: &ObjectKey, value: &str) {
        if let Some(set) = self.values.get_mut(value) {
            if set.remove(key) {
                self.values.remove(value);
            }
        }
    }

    /// Computes this index from scratch over `items`, without touching the current entries.
    pub(crate) fn build<'a>(
        &self,
        items: impl Iterator<Item = (&'a ObjectKey, &'a Arc<T>)>,
    ) -> Result<Values, IndexFuncError>
    where
        T: 'a,
    {
        let mut values = Values::default();
        for (key, obj) in items {
            for value in self.compute(obj, Some(key))? {
                insert_value(&mut values, key, value);
            }
        }
        Ok(values)
    }

    /// Swaps in entries made by [`Index::build`].
    pub(crate) fn set_values(&mut self, values: Values) {
        self.values = values;
    }

    /// The keys under `value`, if any.
    pub(crate) fn keys(&self, value: &str) -> Option<&KeySet> {
        self.values.get(value)
    }

    /// Every value that currently has keys.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<str>> + '_ {
        self.values.keys()
    }

    /// Every (value, keys) entry.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&Arc<str>, &KeySet)> + '_ {
        self.values.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> ObjectKey {
        ObjectKey::new(s).unwrap()
    }

    fn index() -> Index<Vec<&'static str>> {
        Index::new(
            "t".into(),
            Box::new(|v: &Vec<&'static str>| Ok(v.iter().map(|s| s.to_string()).collect())),
        )
    }

    #[test]
    fn an_index_entry_stays_small() {
        // Value (16) + key set (24): the per-value cost the memory target relies on.
        assert!(std::mem::size_of::<KeySet>() <= 24);
        assert!(std::mem::size_of::<(Arc<str>, KeySet)>() <= 40);
    }

    #[test]
    fn a_key_set_grows_and_shrinks_back_to_one_inline_key() {
        let (a, b) = (key("a"), key("b"));
        let mut set = KeySet::One(a.clone());
        set.insert(&a);
        assert!(matches!(set, KeySet::One(_)));
        set.insert(&b);
        assert_eq!(set.len(), 2);
        assert!(!set.remove(&a));
        assert!(matches!(&set, KeySet::One(k) if *k == b));
        assert!(set.remove(&b));
    }

    #[test]
    fn values_are_interned_once_and_removed_when_empty() {
        let mut ix = index();
        let (a, b) = (key("a"), key("b"));
        let plan = ix.plan(&a, None, Some(&vec!["x", "x", "y"])).unwrap();
        ix.apply(&a, plan);
        let plan = ix.plan(&b, None, Some(&vec!["x"])).unwrap();
        ix.apply(&b, plan);
        assert_eq!(ix.keys("x").unwrap().len(), 2);
        let plan = ix.plan(&a, Some(&vec!["x", "x", "y"]), None).unwrap();
        ix.apply(&a, plan);
        assert!(ix.keys("y").is_none());
        assert_eq!(ix.keys("x").unwrap().iter().collect::<Vec<_>>(), [&b]);
    }

    #[test]
    fn an_unchanged_value_list_plans_nothing() {
        let ix = index();
        let plan = ix
            .plan(&key("a"), Some(&vec!["x"]), Some(&vec!["x"]))
            .unwrap();
        assert!(matches!(plan, Plan::Unchanged));
    }

    #[test]
    fn an_old_object_the_function_now_rejects_is_removed_by_scanning() {
        let mut ix: Index<u8> = Index::new(
            "t".into(),
            Box::new(|n: &u8| {
                if *n == 0 {
                    Err("zero".into())
                } else {
                    Ok(vec![n.to_string()])
                }
            }),
        );
        let a = key("a");
        let plan = ix.plan(&a, None, Some(&7)).unwrap();
        ix.apply(&a, plan);
        let plan = ix.plan(&a, Some(&0), Some(&3)).unwrap();
        ix.apply(&a, plan);
        assert!(ix.keys("7").is_none());
        assert!(ix.keys("3").unwrap().contains(&a));
    }
}
