//! The crate's synchronization imports: `kcache_core`'s loom-aware shim (parking_lot's API).
//!
//! Objects travel as `std::sync::Arc<T>` because the `ListWatcher` trait fixes that type; the
//! source's own shared state uses the shim's types.

#[allow(
    unused_imports,
    reason = "the shim is re-exported whole; the crate uses a part"
)]
pub(crate) use kcache_core::sync::*;
