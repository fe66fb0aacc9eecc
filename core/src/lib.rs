//! Core types shared by every kcache crate.
//!
//! kcache brings client-go's `tools/cache` and `util/workqueue` to Rust. This crate is the small
//! vocabulary the others speak:
//!
//! - [`ObjectKey`]: the `"namespace/name"` key of a cached object, cheap to clone, with client-go's
//!   split rules and a typed [`KeyError`].
//! - [`ResourceVersion`]: an opaque version string from the source of truth, ordered only where a
//!   feature must ([`ResourceVersion::cmp_decimal`]).
//! - [`Clock`]: time as an input. [`SystemClock`] in production, [`FakeClock`] in tests: no kcache
//!   test sleeps, it advances a fake clock.
//! - [`Meta`] / [`Object`]: how the cache reads an object's key and resource version, also for
//!   types you do not own; [`MetaMut`] / [`SetResourceVersion`]: how a source stamps the version
//!   it assigns into an object.
//! - [`ReflectorStore`] / [`KnownObjects`]: the traits between a reflector and the stores it feeds.
//! - [`health`]: named health and readiness checks composed into one report, for whoever serves
//!   `/healthz` and `/readyz` (the other crates implement [`health::HealthCheck`] for their state).
//! - [`docs`]: for client-go users, [where each name went](docs::client_go_names) and [every
//!   difference](docs::client_go_differences) from client-go, with its reason and its test.
//!
//! # Examples
//! ```
//! use kcache_core::{Clock, FakeClock, ObjectKey, ResourceVersion};
//! use std::time::Duration;
//!
//! let key = ObjectKey::namespaced("default", "web")?;
//! assert_eq!(key.split(), (Some("default"), "web"));
//!
//! let rv = ResourceVersion::from("17");
//! assert_eq!(rv.to_string(), "17");
//!
//! let clock = FakeClock::new();
//! let t0 = clock.now();
//! clock.advance(Duration::from_millis(250));
//! assert_eq!(clock.now() - t0, Duration::from_millis(250));
//! # Ok::<(), kcache_core::KeyError>(())
//! ```

mod clock;
pub mod docs;
pub mod health;
mod inline_text;
mod key;
mod key_text;
mod meta;
mod resource_version;
mod store;

/// Internal: the loom-aware locks, atomics and threads the kcache crates build on.
///
/// Public only so that the other kcache crates can share one shim; it is hidden from the docs and
/// **not covered by semantic versioning**: any release may change or remove it. Use `std::sync`
/// or `parking_lot` in your own code.
#[doc(hidden)]
pub mod sync;

pub use clock::{
    far_future, saturating_add, Clock, ClockWaker, FakeClock, Sleep, Subscription, SystemClock,
};
pub use key::{split_key, KeyError, ObjectKey};
pub use key_text::KeyText;
pub use meta::{Meta, MetaMut, Object, ObjectAccessor, SetResourceVersion};
pub use resource_version::ResourceVersion;
pub use store::{BoxFuture, KnownObjects, PagedReplace, ReflectorStore};

/// This crate's README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
