//! This crate's view of the loom-aware synchronization shim (see `kcache_core::sync`): the
//! sharding table's lock comes from here, so `--cfg kcache_loom` models it.

pub(crate) use kcache_core::sync::Mutex;
