//! The kcache demo: see the `kcache-demo` binary (`cargo run --release -p kcache-demo`).
//!
//! This library target only exists so that `cargo test` compiles and runs the Rust examples of the
//! repository's README as doctests (doctests only run for library targets).

/// The README, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
