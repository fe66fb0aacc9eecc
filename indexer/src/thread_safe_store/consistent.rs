//! Reading the whole store together with the version it is at, under one lock.

use super::ThreadSafeStore;
use kcache_core::ResourceVersion;
use std::sync::Arc;

impl<T> ThreadSafeStore<T> {
    /// Every object (in no particular order) and the store's
    /// [`last_store_sync_resource_version`](Self::last_store_sync_resource_version), read under
    /// one read lock: no write lands between the two, so the objects are exactly the store's
    /// state at that version. Only the `Arc`s are cloned; the lock is held for one pass over the
    /// items (a snapshot writer encodes the objects after it is released).
    ///
    /// # Examples
    /// ```
    /// use kcache_core::{ObjectKey, ResourceVersion};
    /// use kcache_indexer::ThreadSafeStore;
    /// use std::sync::Arc;
    ///
    /// let store = ThreadSafeStore::new();
    /// let items = vec![(ObjectKey::new("a")?, Arc::new(1)), (ObjectKey::new("b")?, Arc::new(2))];
    /// store.replace(items, ResourceVersion::new("7"))?;
    /// let (mut objects, rv) = store.list_with_resource_version();
    /// objects.sort();
    /// assert_eq!((objects, rv.as_str()), (vec![Arc::new(1), Arc::new(2)], "7"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list_with_resource_version(&self) -> (Vec<Arc<T>>, ResourceVersion) {
        let state = self.state.read();
        let mut out = Vec::with_capacity(state.items.len());
        out.extend(state.items.objs().cloned());
        (out, state.rv.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::ThreadSafeStore;
    use kcache_core::{ObjectKey, ResourceVersion};
    use std::sync::Arc;

    #[test]
    fn the_listed_objects_and_version_come_from_one_state_while_a_writer_runs() {
        // The writer stores value n under key n % 8 and bookmarks version n right after: a read
        // between the two sees the store's version one behind its newest value. Read under one
        // lock, the version is never older than the newest object minus one write, and never newer.
        let store = Arc::new(ThreadSafeStore::<u64>::new());
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                for n in 1..=20_000u64 {
                    let key = ObjectKey::new(format!("k{}", n % 8)).unwrap();
                    store.add(key, Arc::new(n)).unwrap();
                    store.bookmark(ResourceVersion::new(n.to_string()));
                }
            })
        };
        let mut reads = 0;
        while !writer.is_finished() || reads == 0 {
            let (objects, rv) = store.list_with_resource_version();
            let newest = objects.iter().map(|o| **o).max().unwrap_or(0);
            let rv: u64 = if rv.is_empty() {
                0
            } else {
                rv.as_str().parse().unwrap()
            };
            assert!(
                rv == newest || rv + 1 == newest,
                "version {rv} with newest object {newest}"
            );
            reads += 1;
        }
        writer.join().unwrap();
    }
}
