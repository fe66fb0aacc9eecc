//! Hostile input to the DeltaFifo: objects without a valid key, a transformer that fails, a
//! process function that fails or panics, calls after close. Each case asserts the typed error or
//! the documented behaviour; nothing blocks (every `pop` here has something to return or is closed).

use kcache_core::{Object, ResourceVersion};
use kcache_deltafifo::{DeltaFifo, DeltaFifoError, DeltaFifoOptions, PopError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

#[derive(Debug)]
struct Pod {
    name: &'static str,
    rv: u64,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn name(&self) -> &str {
        self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.into()
    }
}

fn p(name: &'static str, rv: u64) -> Arc<Pod> {
    Arc::new(Pod { name, rv })
}

fn poisoned() -> DeltaFifo<Pod> {
    DeltaFifo::with_options(DeltaFifoOptions::new().transformer(|o: Arc<Pod>| {
        if o.name == "poison" {
            Err("cannot transform")
        } else {
            Ok(o)
        }
    }))
}

fn pop_name(fifo: &DeltaFifo<Pod>) -> Result<&'static str, PopError<std::convert::Infallible>> {
    fifo.pop(|d, _| {
        Ok(d.newest()
            .and_then(|d| d.object.object())
            .map_or("", |o| o.name))
    })
}

#[test]
fn objects_without_a_valid_key_are_typed_errors_and_change_nothing() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    for name in ["", "a/b"] {
        assert!(matches!(fifo.add(p(name, 1)), Err(DeltaFifoError::Key(_))));
        assert!(matches!(
            fifo.update(p(name, 1)),
            Err(DeltaFifoError::Key(_))
        ));
        assert!(matches!(
            fifo.delete(p(name, 1)),
            Err(DeltaFifoError::Key(_))
        ));
        assert!(fifo
            .replace(vec![p("a", 1), p(name, 1)], "1".into())
            .is_err());
    }
    assert!(fifo.is_empty());
}

#[test]
fn a_failing_transformer_refuses_its_object_and_a_skipping_replace_only_that_one() {
    let fifo = poisoned();
    assert!(matches!(
        fifo.add(p("poison", 1)),
        Err(DeltaFifoError::Transform(_))
    ));
    assert!(fifo.is_empty());
    // The all-or-nothing replace refuses the whole list ...
    let all = || vec![p("a", 1), p("poison", 1), p("", 1), p("b", 1)];
    assert!(fifo.replace(all(), "1".into()).is_err());
    assert!(fifo.is_empty());
    // ... the skipping one (what a reflector calls) takes the rest and says what it left out.
    let r = fifo.replace_skipping_refused(all(), "1".into());
    assert!(
        matches!(&r, Err(DeltaFifoError::Refused { refused }) if refused.len() == 2),
        "{r:?}"
    );
    assert_eq!(fifo.len(), 2);
    assert_eq!(pop_name(&fifo).unwrap(), "a");
    assert_eq!(pop_name(&fifo).unwrap(), "b");
}

#[test]
fn a_failing_or_panicking_process_function_does_not_wedge_its_key() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.add(p("a", 1)).unwrap();
    let r = fifo.pop(|_, _| Err::<(), _>("refused"));
    assert!(matches!(r, Err(PopError::Process("refused"))));
    fifo.add(p("a", 2)).unwrap();
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let _ =
            fifo.pop(|_, _| -> Result<(), std::convert::Infallible> { panic!("process panics") });
    }));
    assert!(panicked.is_err());
    // The key is not stuck as "being processed": it can be queued and handed out again.
    fifo.add(p("a", 3)).unwrap();
    assert_eq!(pop_name(&fifo).unwrap(), "a");
}

#[test]
fn after_close_pop_drains_then_says_closed_and_never_blocks() {
    let fifo: DeltaFifo<Pod> = DeltaFifo::new();
    fifo.add(p("a", 1)).unwrap();
    fifo.close();
    fifo.close();
    assert!(fifo.is_closed());
    assert_eq!(pop_name(&fifo).unwrap(), "a");
    assert!(matches!(pop_name(&fifo), Err(PopError::Closed)));
    // Writes are still accepted after close (documented), and handed out.
    fifo.add(p("b", 1)).unwrap();
    assert_eq!(pop_name(&fifo).unwrap(), "b");
    assert!(matches!(pop_name(&fifo), Err(PopError::Closed)));
    let closed = futures::executor::block_on(fifo.pop_async(|_, _| Ok::<(), std::io::Error>(())));
    assert!(matches!(closed, Err(PopError::Closed)));
}
