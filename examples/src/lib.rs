//! The kcache demo: see the `kcache-demo` binary (`cargo run --release -p kcache-demo`).
//!
//! The library target holds what the demo's binaries and tests share: the [`reconcile_check`]
//! analysis of `--reconcile-log` files (the second binary, `kcache-reconcile-check`) and [`ops`],
//! the `--listen` endpoints (`/metrics`, `/healthz`, `/readyz`). It also compiles the Rust
//! examples of the repository's README as doctests (doctests only run for library targets).

pub mod ops;
pub mod reconcile_check;

/// The README, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
