//! This crate's view of the loom-aware synchronization shim (see `kcache_core::sync`).
//!
//! Shared handles (`Arc<dyn Clock>`, the status) are `std::sync::Arc`, as kcache-core's clock
//! API fixes; the locks and atomics come from here.

pub(crate) use kcache_core::sync::{atomic, Mutex};
