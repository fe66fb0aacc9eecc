//! The locking driver: errors, the transformer, process-function outcomes, blocking and async
//! pops, close.

use kcache_core::{KeyError, KnownObjects, Object, ObjectKey, ReflectorStore, ResourceVersion};
use kcache_deltafifo::{DeltaFifo, DeltaFifoError, DeltaFifoOptions, DeltaType, Deltas, PopError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq)]
struct Pod {
    name: String,
    val: u32,
    transformed: u32,
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
        transformed: 0,
    })
}

#[derive(Default)]
struct Known(Mutex<BTreeMap<ObjectKey, Arc<Pod>>>);

impl KnownObjects<Pod> for Known {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.lock().unwrap().keys().cloned().collect()
    }
    fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<Pod>> {
        self.0.lock().unwrap().get(key).cloned()
    }
}

fn ok<T>(t: T) -> Result<T, std::convert::Infallible> {
    Ok(t)
}

fn pop_all(fifo: &DeltaFifo<Pod>) -> Vec<Deltas<Pod>> {
    let mut out = Vec::new();
    while !fifo.is_empty() {
        out.push(fifo.pop(|d, _| ok(d)).unwrap());
    }
    out
}

fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_public_error_is_error_send_sync_and_static() {
    assert_error::<DeltaFifoError>();
    assert_error::<PopError<std::io::Error>>();
    assert_error::<<DeltaFifo<Pod> as ReflectorStore<Pod>>::Error>();
}

#[test]
fn the_fifo_and_its_pop_future_can_be_shared_across_threads() {
    fn send_sync<X: Send + Sync>() {}
    fn send<X: Send>(_: &X) {}
    send_sync::<DeltaFifo<Pod>>();
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    send(&fifo.pop_async(|d, _| ok(d.len())));
}

#[test]
fn a_key_accessor_failure_is_a_typed_error_and_changes_nothing() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    let err = fifo.add(pod("", 1)).unwrap_err();
    assert!(matches!(err, DeltaFifoError::Key(KeyError::MissingName)));
    assert!(fifo
        .replace(vec![pod("a", 1), pod("", 2)], "1".into())
        .is_err());
    assert!(fifo.is_empty());
    assert!(
        !fifo.has_synced(),
        "a refused write does not populate the FIFO"
    );
}

fn counting_transformer(fail_on: u32) -> DeltaFifoOptions<Pod> {
    DeltaFifoOptions::new().transformer(move |p: Arc<Pod>| {
        if p.val == fail_on {
            return Err(format!("cannot transform {}", p.name));
        }
        Ok(Arc::new(Pod {
            transformed: p.transformed + 1,
            ..(*p).clone()
        }))
    })
}

#[test]
fn the_transformer_runs_once_per_object_never_on_tombstones_or_resync() {
    let known = Arc::new(Known::default());
    known
        .0
        .lock()
        .unwrap()
        .insert(ObjectKey::new("ns/k").unwrap(), pod("k", 9));
    let fifo: DeltaFifo<Pod> =
        DeltaFifo::with_options(counting_transformer(u32::MAX).known_objects(known.clone()));
    fifo.add(pod("a", 1)).unwrap();
    fifo.update(pod("a", 2)).unwrap();
    fifo.replace(vec![pod("b", 3)], "3".into()).unwrap(); // Sync b, tombstones a and k
    fifo.resync();
    let mut seen = 0;
    for deltas in pop_all(&fifo) {
        for d in &deltas {
            let o = d.object.object().expect("every delta here carries a state");
            let expected = if o.name == "k" { 0 } else { 1 }; // k comes from the known objects
            assert_eq!(o.transformed, expected, "{d:?}");
            seen += 1;
        }
    }
    assert_eq!(seen, 5);
}

#[test]
fn a_transformer_failure_refuses_the_whole_replace() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::with_options(counting_transformer(13));
    let err = fifo
        .replace(vec![pod("a", 1), pod("b", 13)], "1".into())
        .unwrap_err();
    assert!(matches!(err, DeltaFifoError::Transform(_)));
    assert!(std::error::Error::source(&err).is_some());
    assert!(fifo.is_empty());
    assert!(fifo.update(pod("c", 13)).is_err());
}

#[test]
fn a_process_error_is_returned_the_item_is_dropped_and_still_counts_as_processed() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.replace(vec![pod("a", 1)], "1".into()).unwrap();
    let r = fifo.pop(|_, initial| if initial { Err("boom") } else { Ok(()) });
    assert!(matches!(r, Err(PopError::Process("boom"))));
    assert!(fifo.is_empty(), "not requeued");
    assert!(fifo.has_synced());
}

#[test]
fn a_panicking_process_function_does_not_wedge_its_key() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.replace(vec![pod("a", 1)], "1".into()).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fifo.pop(|_, _| -> Result<(), ()> { panic!("handler bug") });
    }));
    assert!(caught.is_err());
    assert!(fifo.has_synced());
    fifo.update(pod("a", 2)).unwrap();
    assert_eq!(
        fifo.pop(|d, _| ok(d.len())).unwrap(),
        1,
        "a is handed out again"
    );
}

#[test]
fn the_process_function_may_write_to_the_fifo() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.add(pod("a", 1)).unwrap();
    fifo.pop(|_, _| fifo.update(pod("a", 2))).unwrap();
    let d = fifo.pop(|d, _| ok(d)).unwrap();
    assert_eq!(d.newest().map(|d| d.delta_type), Some(DeltaType::Updated));
}

#[test]
fn a_blocked_pop_wakes_on_add_and_on_close() {
    let fifo: Arc<DeltaFifo<Pod>> = Arc::new(DeltaFifo::new());
    let popper = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let first = fifo.pop(|d, _| ok(d.newest().and_then(|d| d.object.object().cloned())));
            let second = fifo.pop(|_, _| ok(()));
            (
                first.ok().flatten().map(|p| p.val),
                second.err().map(|e| e.is_closed()),
            )
        })
    };
    fifo.add(pod("a", 7)).unwrap();
    // The popper takes "a" and then blocks; close wakes it with Closed.
    while !fifo.is_empty() {
        std::thread::yield_now();
    }
    fifo.close();
    assert_eq!(popper.join().unwrap(), (Some(7), Some(true)));
}

#[test]
fn pop_async_parks_until_a_write_arrives() {
    use futures::task::noop_waker_ref;
    use std::future::Future;
    use std::task::{Context, Poll};

    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    let mut fut = fifo.pop_async(|d, _| ok(d.len()));
    let mut cx = Context::from_waker(noop_waker_ref());
    assert!(std::pin::Pin::new(&mut fut).poll(&mut cx).is_pending());
    fifo.add(pod("a", 1)).unwrap();
    assert!(matches!(
        std::pin::Pin::new(&mut fut).poll(&mut cx),
        Poll::Ready(Ok(1))
    ));
}

#[test]
fn pop_async_is_woken_by_another_thread() {
    let fifo: Arc<DeltaFifo<Pod>> = Arc::new(DeltaFifo::new());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            for i in 0..100 {
                fifo.add(pod(&format!("p{i}"), i)).unwrap();
            }
            fifo.close();
        })
    };
    let popped = AtomicUsize::new(0);
    futures::executor::block_on(async {
        while fifo
            .pop_async(|_, _| ok(popped.fetch_add(1, Ordering::SeqCst)))
            .await
            .is_ok()
        {}
    });
    writer.join().unwrap();
    assert_eq!(popped.load(Ordering::SeqCst), 100);
}

#[test]
fn dropping_a_pending_pop_async_takes_nothing() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    {
        let mut fut = fifo.pop_async(|d, _| ok(d));
        let waker = futures::task::noop_waker_ref();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(std::future::Future::poll(std::pin::Pin::new(&mut fut), &mut cx).is_pending());
    }
    fifo.add(pod("a", 1)).unwrap();
    assert_eq!(fifo.len(), 1);
}

#[test]
fn the_fifo_is_a_reflector_store() {
    fn feed<S: ReflectorStore<Pod>>(s: &S) -> Result<(), S::Error> {
        s.replace(vec![pod("a", 1)], ResourceVersion::from("1"))?;
        s.add(pod("b", 2))?;
        s.delete(pod("a", 3))?;
        s.resync()?;
        s.bookmark(ResourceVersion::from("4"))
    }
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    feed(&fifo).unwrap();
    let all = pop_all(&fifo);
    let types: Vec<Vec<DeltaType>> = all
        .iter()
        .map(|d| d.iter().map(|d| d.delta_type).collect())
        .collect();
    assert_eq!(
        types,
        [
            vec![DeltaType::Sync, DeltaType::Deleted],
            vec![DeltaType::Added]
        ]
    );
}

#[test]
fn progress_reads_idle_and_synced_together() {
    use kcache_deltafifo::Progress;
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    let p = |idle, synced| Progress { idle, synced };
    assert_eq!(fifo.progress(), p(true, false));
    fifo.replace(vec![pod("a", 1)], "1".into()).unwrap();
    assert_eq!(fifo.progress(), p(false, false));
    fifo.pop(|_, _| {
        // Taken but not processed: neither idle nor synced yet.
        assert_eq!(fifo.progress(), p(false, false));
        ok(())
    })
    .unwrap();
    assert_eq!(fifo.progress(), p(true, true));
    assert_eq!(
        fifo.progress(),
        p(fifo.is_idle(), fifo.has_synced()),
        "the same answers as the two single reads"
    );
}

#[test]
fn short_long_and_non_ascii_keys_queue_merge_and_delete_alike() {
    for name in [
        "a".to_owned(),
        "x".repeat(35),
        "x".repeat(36),
        format!("{}é", "x".repeat(34)),
        "名前".repeat(20),
    ] {
        let fifo: DeltaFifo<Pod> = DeltaFifo::new();
        fifo.add(pod(&name, 1)).unwrap();
        fifo.update(pod(&name, 2)).unwrap();
        fifo.add(pod("other", 1)).unwrap();
        fifo.delete(pod(&name, 3)).unwrap();
        assert_eq!(fifo.len(), 2, "{name}: one entry per key");
        let (key, types) = fifo
            .pop(|d, _| {
                let types: Vec<DeltaType> = d.iter().map(|d| d.delta_type).collect();
                ok((d.key().cloned(), types))
            })
            .unwrap();
        assert_eq!(
            key.map(|k| k.as_str().to_owned()),
            Some(format!("ns/{name}"))
        );
        assert_eq!(
            types,
            [DeltaType::Added, DeltaType::Updated, DeltaType::Deleted]
        );
        // A deletion of a key the FIFO never saw is dropped, whatever its length.
        fifo.delete(pod(&format!("{name}-never"), 1)).unwrap();
        assert_eq!(fifo.len(), 1);
    }
}
