//! `write_or_apply`: a write goes straight to the consumer only when the FIFO is caught up
//! (synced, nothing queued, nothing in flight), so a key's changes are never reordered.

use kcache_core::{Object, ResourceVersion};
use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions, DeltaType, Written};
use std::sync::Arc;

#[derive(Debug, PartialEq)]
struct Pod {
    name: String,
    val: u32,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::from(u64::from(self.val))
    }
}

fn pod(name: &str, val: u32) -> Arc<Pod> {
    Arc::new(Pod {
        name: name.into(),
        val,
    })
}

/// Writes `obj` as an update, recording what a direct apply received.
fn write(fifo: &DeltaFifo<Pod>, obj: Arc<Pod>, applied: &mut Vec<(String, u32)>) -> Written {
    fifo.write_or_apply(obj, false, |key, obj| {
        applied.push((key.to_string(), obj.val));
        Ok(())
    })
    .unwrap()
}

/// Pops one key: its (type, val) deltas.
fn pop(fifo: &DeltaFifo<Pod>) -> Vec<(DeltaType, u32)> {
    fifo.pop(|deltas, _| {
        Ok::<_, ()>(
            deltas
                .iter()
                .map(|d| (d.delta_type, d.object.object().map_or(0, |p| p.val)))
                .collect(),
        )
    })
    .unwrap()
}

#[test]
fn only_a_caught_up_fifo_hands_writes_over_and_a_key_keeps_its_order() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    let mut applied = Vec::new();
    // Before the first list: not synced, queued.
    fifo.replace(vec![pod("a", 1)], "1".into()).unwrap();
    assert_eq!(write(&fifo, pod("a", 2), &mut applied), Written::Queued);
    assert!(!fifo.has_synced());
    assert_eq!(
        pop(&fifo),
        vec![(DeltaType::Sync, 1), (DeltaType::Updated, 2)]
    );
    assert!(fifo.has_synced());
    // Caught up: handed over, with the key as text; nothing queued.
    assert_eq!(write(&fifo, pod("a", 3), &mut applied), Written::Applied);
    assert_eq!(applied, vec![("ns/a".to_string(), 3)]);
    assert_eq!(fifo.len(), 0);
    // Something queued (a resync's Sync would do the same): every later write queues behind
    // it, whatever its key, until the queue drained.
    fifo.update(pod("b", 4)).unwrap();
    assert_eq!(write(&fifo, pod("a", 5), &mut applied), Written::Queued);
    assert_eq!(pop(&fifo), vec![(DeltaType::Updated, 4)]);
    assert_eq!(pop(&fifo), vec![(DeltaType::Updated, 5)]);
    assert_eq!(write(&fifo, pod("a", 6), &mut applied), Written::Applied);
    assert_eq!(
        applied,
        vec![("ns/a".to_string(), 3), ("ns/a".to_string(), 6)]
    );
}

#[test]
fn a_write_during_processing_is_queued_behind_the_key_in_flight() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.replace(Vec::new(), "1".into()).unwrap();
    fifo.update(pod("a", 1)).unwrap();
    let during = fifo
        .pop(|_, _| {
            let mut applied = Vec::new();
            let how = write(&fifo, pod("a", 2), &mut applied);
            Ok::<_, ()>((how, applied))
        })
        .unwrap();
    assert_eq!(during, (Written::Queued, Vec::new()));
    assert_eq!(pop(&fifo), vec![(DeltaType::Updated, 2)]);
}

#[test]
fn declined_and_transformed_writes() {
    let fifo: DeltaFifo<Pod> =
        DeltaFifo::with_options(DeltaFifoOptions::new().transformer(|p: Arc<Pod>| {
            Ok::<_, std::io::Error>(Arc::new(Pod {
                name: p.name.clone(),
                val: p.val * 10,
            }))
        }));
    fifo.replace(Vec::new(), "1".into()).unwrap();
    let mut applied = Vec::new();
    // The consumer sees the transformed object.
    assert_eq!(write(&fifo, pod("a", 1), &mut applied), Written::Applied);
    assert_eq!(applied, vec![("ns/a".to_string(), 10)]);
    // Declined: queued as the add it was.
    let how = fifo
        .write_or_apply(pod("a", 2), true, |_, obj| Err(obj))
        .unwrap();
    assert_eq!(how, Written::Queued);
    assert_eq!(pop(&fifo), vec![(DeltaType::Added, 20)]);
    // Closed: nothing is handed over.
    fifo.close();
    assert_eq!(write(&fifo, pod("a", 3), &mut applied), Written::Queued);
    assert_eq!(applied.len(), 1);
}
