//! client-go's `DeltaFIFO` and `RealFIFO` for Rust: queues of changes between a reflector and
//! the code that applies them to a cache.
//!
//! [`RealFifo`] is the queue of client-go's in-order informers (and of kcache-informer): one
//! entry per event, in the order the events were written, a relist as one
//! [`ReplacedAll`](Entry::ReplacedAll) entry, a resync as one [`SyncAll`](Entry::SyncAll)
//! entry. [`DeltaFifo`], described below, is client-go's older per-key queue.
//!
//! A reflector writes every event into a [`DeltaFifo`] (it implements
//! [`ReflectorStore`](kcache_core::ReflectorStore)): `add`, `update`, `delete`, a full `replace`
//! after each list, and a periodic `resync`. The FIFO keeps, per key, the [`Deltas`] not yet
//! processed, oldest first, and queues each key once. A worker [`pop`](DeltaFifo::pop)s (or
//! [`pop_async`](DeltaFifo::pop_async)s) the oldest key and applies its deltas.
//!
//! When a relist shows that a key disappeared and the watch never reported its deletion, the FIFO
//! invents a `Deleted` delta carrying a [`DeletedFinalStateUnknown`] tombstone with the last state
//! it knew, taken from its queue or from the consumer's [known
//! objects](DeltaFifoOptions::known_objects).
//!
//! [`has_synced`](DeltaFifo::has_synced) answers "has the first list been fully processed?", and
//! each pop tells the process function whether its key belongs to that initial list.
//!
//! Built for a writer that outruns its popper: writes go through an inbox with its own small
//! lock (a writer never waits for a popper's critical section), keys travel as inline text (no
//! allocation per write for keys up to 38 bytes), a popper with nothing to take spins briefly
//! before it sleeps, and [`pop_batch`](DeltaFifo::pop_batch) takes several keys per lock.
//!
//! Every difference from client-go, with its reason and its test, is on one page:
//! [`kcache_core::docs::client_go_differences`]; where each client-go name went:
//! [`kcache_core::docs::client_go_names`].
//!
//! # Examples
//! ```
//! use kcache_core::{Object, ResourceVersion};
//! use kcache_deltafifo::{DeltaFifo, DeltaFifoOptions, DeltaObject, DeltaType, PopError};
//! use std::sync::Arc;
//!
//! #[derive(Debug, PartialEq)]
//! struct Pod { name: &'static str, rv: u64 }
//! impl Object for Pod {
//!     fn namespace(&self) -> Option<&str> { Some("default") }
//!     fn name(&self) -> &str { self.name }
//!     fn resource_version(&self) -> ResourceVersion { self.rv.into() }
//! }
//!
//! let fifo: DeltaFifo<Pod> =
//!     DeltaFifo::with_options(DeltaFifoOptions::new().emit_delta_type_replaced(true));
//!
//! // The reflector's first list, then a watch event.
//! fifo.replace(vec![Arc::new(Pod { name: "a", rv: 1 }), Arc::new(Pod { name: "b", rv: 2 })], "2".into())?;
//! fifo.update(Arc::new(Pod { name: "a", rv: 3 }))?;
//! // A relist without "b": the FIFO still holds "b", so it tombstones it.
//! fifo.replace(vec![Arc::new(Pod { name: "a", rv: 3 })], "3".into())?;
//! assert!(!fifo.has_synced());
//!
//! // A worker: "a" first (it was queued first), with every change in order.
//! let a = fifo.pop(|deltas, initial| {
//!     assert!(initial);
//!     Ok::<_, std::convert::Infallible>(deltas.iter().map(|d| d.delta_type).collect::<Vec<_>>())
//! })?;
//! assert_eq!(a, [DeltaType::Replaced, DeltaType::Updated, DeltaType::Replaced]);
//!
//! let b_gone = fifo.pop(|deltas, _| {
//!     let newest = deltas.newest().cloned();
//!     Ok::<_, std::convert::Infallible>(newest.map(|d| d.object.is_tombstone()))
//! })?;
//! assert_eq!(b_gone, Some(true));
//! assert!(fifo.has_synced());
//!
//! fifo.close();
//! assert!(matches!(fifo.pop(|_, _| Ok::<(), std::io::Error>(())), Err(PopError::Closed)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod core;
mod delta;
mod deltas;
mod direct;
mod error;
mod fifo;
mod inbox;
mod options;
mod paged;
mod pop_batch;
mod pop_batch_future;
mod pop_future;
mod real_fifo;
mod spin;
mod sync;

#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz_real;

pub use delta::{DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType};
pub use deltas::{Deltas, DeltasIntoIter};
pub use direct::Written;
pub use error::{BoxError, DeltaFifoError, FifoClosed, PopError};
pub use fifo::{DeltaFifo, Progress};
pub use options::DeltaFifoOptions;
pub use paged::KeyedPage;
pub use pop_batch_future::PopBatchFuture;
pub use pop_future::PopFuture;
pub use real_fifo::{Batch, BatchIntoIter, Entry, RealFifo, RealPopFuture, ReplacedAll};

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
