//! loom model of a relist's swap (`Indexer::swap_in`): a reader never sees a mixed state.
//!
//! Run with
//! `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target-loom
//! cargo test --release -p kcache-indexer --test loom_swap`.
#![cfg(kcache_loom)]

use kcache_core::sync::{thread, Arc as LoomArc};
use kcache_core::{KeyText, Object, ResourceVersion};
use kcache_indexer::{Indexer, Indexers};
use std::sync::Arc;

#[derive(Debug)]
struct Obj {
    name: &'static str,
    generation: u32,
}

impl Object for Obj {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        u64::from(self.generation).into()
    }
}

fn obj(name: &'static str, generation: u32) -> Arc<Obj> {
    Arc::new(Obj { name, generation })
}

/// The old state: a, b, c at generation 1. The new list: a unchanged (the same `Arc`), b gone,
/// c changed, d new, all indexed by generation.
fn setup() -> (Indexer<Obj>, Vec<(KeyText, Arc<Obj>)>) {
    let cache: Indexer<Obj> = Indexer::with_indexers(
        Indexers::new().with("gen", |o: &Obj| Ok(vec![o.generation.to_string()])),
    );
    let a = obj("a", 1);
    cache.add(a.clone()).unwrap();
    cache.add(obj("b", 1)).unwrap();
    cache.add(obj("c", 1)).unwrap();
    let list = vec![
        (KeyText::new("a").unwrap(), a),
        (KeyText::new("c").unwrap(), obj("c", 2)),
        (KeyText::new("d").unwrap(), obj("d", 2)),
    ];
    (cache, list)
}

/// Names and generations, sorted.
fn state(objs: &[Arc<Obj>]) -> Vec<(&'static str, u32)> {
    let mut v: Vec<_> = objs.iter().map(|o| (o.name, o.generation)).collect();
    v.sort_unstable();
    v
}

const OLD: [(&str, u32); 3] = [("a", 1), ("b", 1), ("c", 1)];
const NEW: [(&str, u32); 3] = [("a", 1), ("c", 2), ("d", 2)];

#[test]
fn a_reader_sees_the_old_state_or_the_new_one_never_a_mix() {
    loom::model(|| {
        let (cache, list) = setup();
        let cache = LoomArc::new(cache);
        let writer = {
            let cache = cache.clone();
            thread::spawn(move || {
                let outcome = cache.swap_in(&list, "9".into());
                assert_eq!(outcome.deleted.len(), 1);
            })
        };
        // A full list, then an index query: each is one state, old or new.
        let listed = state(&cache.list());
        assert!(listed == OLD || listed == NEW, "a mixed list: {listed:?}");
        let gen2 = state(&cache.by_index("gen", "2").unwrap());
        assert!(
            gen2.is_empty() || gen2 == [("c", 2), ("d", 2)],
            "a mixed index: {gen2:?}"
        );
        writer.join().unwrap();
        assert_eq!(state(&cache.list()), NEW);
        assert_eq!(cache.last_store_sync_resource_version().as_str(), "9");
    });
}
