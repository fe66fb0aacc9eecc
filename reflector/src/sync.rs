//! The loom-aware synchronization shim (see `kcache_core::sync`).
//!
//! Only locks and atomics come from here. Object handles stay `std::sync::Arc<T>`: that is the type
//! of kcache-core's `ReflectorStore` trait.

#[allow(unused_imports)]
pub(crate) use kcache_core::sync::*;
