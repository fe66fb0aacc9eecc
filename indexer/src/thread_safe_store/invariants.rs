//! A self-check of the store's internal consistency, for tests, loom models and fuzzers.

use super::ThreadSafeStore;
use std::collections::BTreeSet;

impl<T> ThreadSafeStore<T> {
    /// Checks, under one read lock, that items and indexes agree exactly: every stored object is
    /// indexed under every value its index functions give, every index entry points at a stored
    /// object whose functions give that value, and no value has an empty key set.
    ///
    /// Meant for tests and fuzzers (it calls every index function on every object).
    ///
    /// # Errors
    /// A description of the first disagreement found.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let state = self.read();
        for ix in &state.indexes {
            let mut entries = 0usize;
            for (value, keys) in ix.entries() {
                if keys.len() == 0 {
                    return Err(format!(
                        "index {:?}: empty key set under {value:?}",
                        ix.name()
                    ));
                }
                for key in keys.iter() {
                    entries += 1;
                    let Some(obj) = state.items.get(key) else {
                        return Err(format!(
                            "index {:?}: {value:?} points at missing key {key}",
                            ix.name()
                        ));
                    };
                    let values = ix.compute(obj, Some(key)).map_err(|e| e.to_string())?;
                    if !values.iter().any(|v| **v == **value) {
                        return Err(format!(
                            "index {:?}: {key} is under {value:?} but yields {values:?}",
                            ix.name()
                        ));
                    }
                }
            }
            let mut expected = 0usize;
            for (key, obj) in &state.items {
                let values: BTreeSet<String> = ix
                    .compute(obj, Some(key))
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .collect();
                expected += values.len();
                for value in values {
                    if !ix.keys(&value).is_some_and(|set| set.contains(key)) {
                        return Err(format!(
                            "index {:?}: {key} yields {value:?} but is not indexed under it",
                            ix.name()
                        ));
                    }
                }
            }
            if entries != expected {
                return Err(format!(
                    "index {:?}: {entries} entries, {expected} expected",
                    ix.name()
                ));
            }
        }
        Ok(())
    }
}
