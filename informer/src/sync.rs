//! This crate's view of the loom-aware synchronization shim (see `kcache_core::sync`).
//!
//! Objects travel as `std::sync::Arc<T>` (the type `kcache_core`'s store traits fix); the crate
//! never synchronizes through those, only through the locks imported from here.

pub(crate) use kcache_core::sync::*;
