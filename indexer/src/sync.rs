//! The crate's synchronization imports: `kcache_core`'s loom-aware shim.
//!
//! Crate code imports locks from here, never from `std::sync`, so `--cfg kcache_loom` swaps in
//! loom's types everywhere at once.
//!
//! One exception, on purpose: `Arc` is `std`'s even under loom. Objects travel as
//! `std::sync::Arc<T>` because `kcache_core::ReflectorStore` and `KnownObjects` fix that type, and
//! this crate never synchronizes through an `Arc` (only through the lock), so loom loses nothing.

pub(crate) use kcache_core::sync::{RwLock, RwLockReadGuard};
pub(crate) use std::sync::Arc;
