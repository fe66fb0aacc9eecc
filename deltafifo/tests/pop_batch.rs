//! `pop_batch`: order, batch size, in-flight keys, panics, close, and a concurrent writer.

use kcache_core::{Object, ResourceVersion};
use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions, DeltaType, PopError};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

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

/// (name, [(type, val)]) of every key a batch hands out.
type Seen = Vec<(String, Vec<(DeltaType, u32)>)>;

fn batch(fifo: &DeltaFifo<Pod>, max: usize) -> Seen {
    let mut seen = Seen::new();
    fifo.pop_batch(max, |deltas, _| {
        let name = deltas
            .newest()
            .and_then(|d| d.object.object())
            .map_or(String::new(), |p| p.name.clone());
        let list = deltas
            .iter()
            .map(|d| (d.delta_type, d.object.object().map_or(0, |p| p.val)))
            .collect();
        seen.push((name, list));
    })
    .unwrap();
    seen
}

#[test]
fn a_batch_takes_up_to_max_keys_oldest_first_with_all_their_deltas() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    fifo.add(pod("b", 1)).unwrap();
    fifo.update(pod("a", 2)).unwrap();
    fifo.add(pod("c", 1)).unwrap();
    let first = batch(&fifo, 2);
    assert_eq!(
        first,
        [
            (
                "a".to_owned(),
                vec![(DeltaType::Added, 1), (DeltaType::Updated, 2)]
            ),
            ("b".to_owned(), vec![(DeltaType::Added, 1)]),
        ]
    );
    assert_eq!(
        batch(&fifo, 0),
        [("c".to_owned(), vec![(DeltaType::Added, 1)])]
    );
    assert!(fifo.is_idle());
}

#[test]
fn a_batch_counts_as_in_flight_until_it_is_done_and_its_keys_are_not_handed_out_twice() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::with_options(DeltaFifoOptions::new());
    fifo.replace(vec![pod("a", 1), pod("b", 1)], "1".into())
        .unwrap();
    let mut calls = 0;
    fifo.pop_batch(8, |_, initial| {
        assert!(initial);
        calls += 1;
        // Both keys are taken: not idle, not synced, even after the first is processed.
        assert!(!fifo.is_idle() && !fifo.has_synced());
        if calls == 1 {
            assert!(fifo.is_empty());
            // A write to a taken key queues it again; it cannot be handed out meanwhile.
            fifo.update(pod("a", 2)).unwrap();
        }
        assert_eq!(fifo.len(), 1);
    })
    .unwrap();
    assert_eq!(calls, 2);
    assert!(fifo.has_synced());
    assert_eq!(
        batch(&fifo, 8),
        [("a".to_owned(), vec![(DeltaType::Updated, 2)])]
    );
}

#[test]
fn a_panic_finishes_its_key_and_gives_the_untouched_keys_back_in_front() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.replace(
        vec![pod("a", 1), pod("b", 1), pod("c", 1), pod("d", 1)],
        "1".into(),
    )
    .unwrap();
    let mut handed = 0;
    let result = catch_unwind(AssertUnwindSafe(|| {
        fifo.pop_batch(3, |_, _| {
            handed += 1;
            if handed == 2 {
                // c was taken with this batch; its new delta must stay behind the old one.
                fifo.update(pod("c", 2)).unwrap();
                panic!("process failed on b");
            }
        })
    }));
    assert!(result.is_err());
    assert_eq!(handed, 2);
    assert!(!fifo.has_synced(), "c and d are still to be processed");
    // c comes back first (with both deltas, oldest first, still initial), then d.
    let mut order = Vec::new();
    while !fifo.is_empty() {
        fifo.pop(|deltas, initial| {
            let types: Vec<DeltaType> = deltas.iter().map(|d| d.delta_type).collect();
            let name = deltas
                .newest()
                .and_then(|d| d.object.object())
                .map(|p| p.name.clone());
            order.push((name, types, initial));
            Ok::<_, std::convert::Infallible>(())
        })
        .unwrap();
    }
    assert_eq!(
        order,
        [
            (
                Some("c".to_owned()),
                vec![DeltaType::Sync, DeltaType::Updated],
                true
            ),
            (Some("d".to_owned()), vec![DeltaType::Sync], true),
        ]
    );
    assert!(fifo.has_synced() && fifo.is_idle());
}

#[test]
fn a_closed_and_empty_fifo_ends_a_batch_popper() {
    let fifo: Arc<DeltaFifo<Pod>> = Arc::new(DeltaFifo::new());
    let popper = {
        let fifo = fifo.clone();
        thread::spawn(move || fifo.pop_batch(4, |_, _| {}))
    };
    fifo.close();
    assert!(matches!(popper.join().unwrap(), Err(PopError::Closed)));
}

#[test]
fn a_batch_popper_racing_a_writer_gets_every_delta_in_order() {
    const KEYS: u32 = 50;
    const UPDATES: u32 = 20_000;
    let fifo: Arc<DeltaFifo<Pod>> = Arc::new(DeltaFifo::new());
    let consumer = {
        let fifo = fifo.clone();
        thread::spawn(move || {
            let mut last = vec![0u32; KEYS as usize];
            let mut total = 0u32;
            loop {
                let r = fifo.pop_batch(16, |deltas, _| {
                    for d in &deltas {
                        let p = d.object.object().unwrap();
                        let k: usize = p.name.parse().unwrap();
                        assert!(p.val > last[k], "key {k}: {} after {}", p.val, last[k]);
                        last[k] = p.val;
                        total += 1;
                    }
                });
                if let Err(PopError::Closed) = r {
                    return total;
                }
            }
        })
    };
    for i in 0..UPDATES {
        fifo.update(pod(&(i % KEYS).to_string(), i + 1)).unwrap();
    }
    fifo.close();
    assert_eq!(consumer.join().unwrap(), UPDATES);
}

#[test]
fn every_handed_out_list_carries_its_key_and_equality_ignores_it() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    for name in ["a", "b", "c"] {
        fifo.add(pod(name, 1)).unwrap();
    }
    let popped = fifo
        .pop(|d, _| Ok::<_, std::convert::Infallible>(d))
        .unwrap();
    assert_eq!(popped.key().map(|k| k.as_str()), Some("ns/a"));
    let mut keys = Vec::new();
    futures::executor::block_on(fifo.pop_async(|d, _| {
        keys.push(d.key().cloned());
        Ok::<_, std::convert::Infallible>(())
    }))
    .unwrap();
    fifo.pop_batch(4, |d, _| keys.push(d.key().cloned()))
        .unwrap();
    let keys: Vec<Option<&str>> = keys
        .iter()
        .map(|k| k.as_ref().map(|k| k.as_str()))
        .collect();
    assert_eq!(keys, [Some("ns/b"), Some("ns/c")]);
    let by_hand = kcache_deltafifo::Deltas::from(popped.to_vec());
    assert_eq!(by_hand.key(), None);
    assert_eq!(by_hand, popped);
}

#[test]
fn an_async_batch_parks_until_a_write_then_takes_what_is_queued() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let fifo: Arc<DeltaFifo<Pod>> = Arc::new(DeltaFifo::new());
    let polls = Arc::new(AtomicUsize::new(0));
    let popper = {
        let (fifo, polls) = (fifo.clone(), polls.clone());
        thread::spawn(move || {
            let mut names = Vec::new();
            let n = {
                let fut = fifo.pop_batch_async(2, |d, _| {
                    names.extend(
                        d.iter()
                            .filter_map(|d| d.object.object())
                            .map(|p| p.name.clone()),
                    );
                });
                let mut fut = std::pin::pin!(fut);
                futures::executor::block_on(std::future::poll_fn(|cx| {
                    polls.fetch_add(1, Ordering::SeqCst);
                    fut.as_mut().poll(cx)
                }))
                .unwrap()
            };
            (n, names)
        })
    };
    // Wait (bounded) until the popper has parked once, then write three keys.
    for _ in 0..2000 {
        if polls.load(Ordering::SeqCst) > 0 {
            break;
        }
        thread::yield_now();
    }
    for name in ["a", "b", "c"] {
        fifo.add(pod(name, 1)).unwrap();
    }
    let (n, names) = popper.join().unwrap();
    assert!((1..=2).contains(&n), "{n}");
    assert_eq!(names[0], "a");
    assert_eq!(fifo.len(), 3 - n, "the rest stays queued");
    fifo.close();
    let rest = futures::executor::block_on(fifo.pop_batch_async(8, |_, _| {})).unwrap();
    assert_eq!(rest, 3 - n);
    assert!(matches!(
        futures::executor::block_on(fifo.pop_batch_async(8, |_, _| {})),
        Err(PopError::Closed)
    ));
}

#[test]
fn a_dropped_async_batch_takes_nothing_and_leaves_no_waiter() {
    use std::task::{Context, Poll};
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    {
        let mut fut = std::pin::pin!(fifo.pop_batch_async(4, |_, _| {}));
        let waker = futures::task::noop_waker();
        assert!(matches!(
            fut.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Pending
        ));
    }
    fifo.add(pod("a", 1)).unwrap();
    assert_eq!(fifo.len(), 1);
    assert_eq!(batch(&fifo, 4).len(), 1);
}
