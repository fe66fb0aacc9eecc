//! The loom-aware synchronization shim (see `kcache_core::sync`).
//!
//! Only locks, condition variables and atomics come from here. Object handles stay
//! `std::sync::Arc<T>`: that is the type of kcache-core's `ReflectorStore` and `KnownObjects`
//! traits, and an object handle is data, not a synchronization primitive loom needs to see.

#[allow(unused_imports)]
pub(crate) use kcache_core::sync::*;
