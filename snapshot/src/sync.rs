//! This crate's view of the loom-aware synchronization shim (see `kcache_core::sync`).

pub(crate) use kcache_core::sync::*;
