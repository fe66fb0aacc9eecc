//! A self-check of the store's internal consistency, for tests, loom models and fuzzers.

use super::ThreadSafeStore;
use std::collections::BTreeSet;

impl<T> ThreadSafeStore<T> {
    /// Checks, under one read lock, that items and indexes agree exactly: every stored object is
    /// indexed under every value its index functions give (and records exactly those values),
    /// every index entry points at a stored object whose functions give that value, no value has
    /// an empty key set, and every key finds its object.
    ///
    /// Meant for tests and fuzzers (it calls every index function on every object).
    ///
    /// # Errors
    /// A description of the first disagreement found.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let state = self.read();
        state.items.check()?;
        for ix in &state.indexes {
            ix.data
                .check()
                .map_err(|e| format!("index {:?}: {e}", ix.name()))?;
            let mut entries = 0usize;
            for (value, ids) in ix.data.entries() {
                if ids.len() == 0 {
                    return Err(format!(
                        "index {:?}: empty key set under {value:?}",
                        ix.name()
                    ));
                }
                for id in ids.iter() {
                    entries += 1;
                    let Some(slot) = state.items.slot(id) else {
                        return Err(format!(
                            "index {:?}: {value:?} points at missing id {id}",
                            ix.name()
                        ));
                    };
                    let key = slot.key.as_str();
                    let values = ix.compute(slot.obj, Some(key)).map_err(|e| e.to_string())?;
                    if !values.iter().any(|v| **v == **value) {
                        return Err(format!(
                            "index {:?}: {key} is under {value:?} but yields {values:?}",
                            ix.name()
                        ));
                    }
                }
            }
            let mut expected = 0usize;
            for (id, slot) in state.items.iter() {
                let key = slot.key.as_str();
                let values: BTreeSet<String> = ix
                    .compute(slot.obj, Some(key))
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .collect();
                let recorded: BTreeSet<String> = ix.data.recorded(id).map(str::to_owned).collect();
                if recorded != values {
                    return Err(format!(
                        "index {:?}: {key} yields {values:?} but records {recorded:?}",
                        ix.name()
                    ));
                }
                expected += values.len();
                for value in values {
                    if !ix.data.keys(&value).is_some_and(|set| set.contains(id)) {
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
