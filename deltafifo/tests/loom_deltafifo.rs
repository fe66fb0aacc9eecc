//! loom models of the DeltaFifo under concurrent writers and poppers.
//!
//! Run with
//! `RUSTFLAGS="--cfg kcache_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target-loom cargo test --release -p kcache-deltafifo --test loom_deltafifo`.
#![cfg(kcache_loom)]

use kcache_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kcache_core::sync::{thread, Arc, Mutex};
use kcache_core::{KnownObjects, Object, ObjectKey, ResourceVersion};
use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, PopError};
use std::collections::BTreeMap;

#[derive(Debug, PartialEq)]
struct Obj {
    name: &'static str,
    val: u32,
}

impl Object for Obj {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::default()
    }
}

fn obj(name: &'static str, val: u32) -> std::sync::Arc<Obj> {
    std::sync::Arc::new(Obj { name, val })
}

/// The consumer's store, applied the way an informer applies deltas.
#[derive(Default)]
struct Store(Mutex<BTreeMap<ObjectKey, u32>>);

impl Store {
    fn apply(&self, deltas: &Deltas<Obj>) {
        let mut map = self.0.lock();
        for d in deltas {
            let Some(o) = d.object.object() else { continue };
            let key = ObjectKey::new(o.name).unwrap();
            if d.delta_type == DeltaType::Deleted {
                map.remove(&key);
            } else {
                map.insert(key, o.val);
            }
        }
    }
}

impl KnownObjects<Obj> for Store {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.lock().keys().cloned().collect()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<std::sync::Arc<Obj>> {
        let v = *self.0.lock().get(key)?;
        let name = if key.as_str() == "a" { "a" } else { "b" };
        Some(obj(name, v))
    }
}

/// Pops until closed; per key, checks that no second popper holds it at the same time.
fn drain(fifo: &DeltaFifo<Obj>, busy: &[AtomicBool; 2], seen: &AtomicUsize, store: &Store) {
    loop {
        let r = fifo.pop(|deltas, _| {
            let name = deltas
                .newest()
                .and_then(|d| d.object.object())
                .map_or("a", |o| o.name);
            let flag = &busy[usize::from(name != "a")];
            assert!(
                !flag.swap(true, Ordering::SeqCst),
                "{name} handed to two poppers at once"
            );
            seen.fetch_add(deltas.len(), Ordering::SeqCst);
            store.apply(&deltas);
            flag.store(false, Ordering::SeqCst);
            Ok::<(), ()>(())
        });
        match r {
            Ok(()) => {}
            Err(PopError::Closed) => return,
            Err(PopError::Process(())) => unreachable!("the process function never fails"),
        }
    }
}

#[test]
fn two_poppers_never_share_a_key_and_lose_no_delta() {
    loom::model(|| {
        let fifo: Arc<DeltaFifo<Obj>> = Arc::new(DeltaFifo::new());
        let busy = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let seen = Arc::new(AtomicUsize::new(0));
        let store = std::sync::Arc::new(Store::default());
        let poppers: Vec<_> = (0..2)
            .map(|_| {
                let (fifo, busy, seen, store) =
                    (fifo.clone(), busy.clone(), seen.clone(), store.clone());
                thread::spawn(move || drain(&fifo, &busy, &seen, &store))
            })
            .collect();
        fifo.add(obj("a", 1)).unwrap();
        fifo.update(obj("a", 2)).unwrap();
        fifo.close();
        for p in poppers {
            p.join().unwrap();
        }
        assert_eq!(
            seen.load(Ordering::SeqCst),
            2,
            "every delta handed out exactly once"
        );
        assert_eq!(
            store.0.lock().get(&ObjectKey::new("a").unwrap()),
            Some(&2),
            "order kept"
        );
    });
}

#[test]
fn a_relist_racing_a_pop_leaves_the_consumer_equal_to_the_list() {
    loom::model(|| {
        let store = std::sync::Arc::new(Store::default());
        let options = DeltaFifoOptions::new()
            .known_objects(store.clone())
            .emit_delta_type_replaced(true);
        let fifo: Arc<DeltaFifo<Obj>> = Arc::new(DeltaFifo::with_options(options));
        let busy = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let seen = Arc::new(AtomicUsize::new(0));
        fifo.add(obj("a", 1)).unwrap();
        let popper = {
            let (fifo, busy, seen, store) =
                (fifo.clone(), busy.clone(), seen.clone(), store.clone());
            thread::spawn(move || drain(&fifo, &busy, &seen, &store))
        };
        // "a" may be queued, in flight, or already applied when the relist without it lands:
        // in every case the consumer must end with exactly the listed state.
        fifo.replace(vec![obj("b", 7)], ResourceVersion::from("2"))
            .unwrap();
        fifo.close();
        popper.join().unwrap();
        let state: Vec<(String, u32)> = store
            .0
            .lock()
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        assert_eq!(state, [("b".to_owned(), 7)]);
        assert!(fifo.has_synced());
    });
}

#[test]
fn a_writer_racing_two_poppers_and_a_relist_converges() {
    loom::model(|| {
        let store = std::sync::Arc::new(Store::default());
        let options = DeltaFifoOptions::new().known_objects(store.clone());
        let fifo: Arc<DeltaFifo<Obj>> = Arc::new(DeltaFifo::with_options(options));
        let busy = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let seen = Arc::new(AtomicUsize::new(0));
        fifo.replace(vec![obj("a", 1)], ResourceVersion::from("1"))
            .unwrap();
        let poppers: Vec<_> = (0..2)
            .map(|_| {
                let (fifo, busy, seen, store) =
                    (fifo.clone(), busy.clone(), seen.clone(), store.clone());
                thread::spawn(move || drain(&fifo, &busy, &seen, &store))
            })
            .collect();
        fifo.update(obj("a", 2)).unwrap();
        fifo.close();
        for p in poppers {
            p.join().unwrap();
        }
        assert_eq!(store.0.lock().get(&ObjectKey::new("a").unwrap()), Some(&2));
        assert!(fifo.has_synced());
    });
}

/// No close comes to the rescue: the write alone must wake a popper blocked (or about to block)
/// on an empty FIFO. Catches a write that lands in the inbox without waking anyone.
#[test]
fn a_write_alone_wakes_a_blocked_popper() {
    loom::model(|| {
        let fifo: Arc<DeltaFifo<Obj>> = Arc::new(DeltaFifo::new());
        let popper = {
            let fifo = fifo.clone();
            thread::spawn(move || {
                fifo.pop(|d, _| Ok::<_, std::convert::Infallible>(d.len()))
                    .unwrap()
            })
        };
        fifo.add(obj("a", 1)).unwrap();
        assert_eq!(popper.join().unwrap(), 1);
    });
}

/// The same for a parked `pop_async` task.
#[test]
fn a_write_alone_wakes_a_parked_async_popper() {
    loom::model(|| {
        let fifo: Arc<DeltaFifo<Obj>> = Arc::new(DeltaFifo::new());
        let popper = {
            let fifo = fifo.clone();
            thread::spawn(move || {
                loom::future::block_on(
                    fifo.pop_async(|d, _| Ok::<_, std::convert::Infallible>(d.len())),
                )
                .unwrap()
            })
        };
        fifo.update(obj("a", 1)).unwrap();
        assert_eq!(popper.join().unwrap(), 1);
    });
}

/// The same for a parked `pop_batch_async` task.
#[test]
fn a_write_alone_wakes_a_parked_async_batch_popper() {
    loom::model(|| {
        let fifo: Arc<DeltaFifo<Obj>> = Arc::new(DeltaFifo::new());
        let popper = {
            let fifo = fifo.clone();
            thread::spawn(move || {
                let mut n = 0;
                loom::future::block_on(fifo.pop_batch_async(4, |d, _| n += d.len())).unwrap();
                n
            })
        };
        fifo.update(obj("a", 1)).unwrap();
        assert_eq!(popper.join().unwrap(), 1);
    });
}
