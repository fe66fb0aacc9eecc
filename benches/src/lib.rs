//! Benchmarks of kcache side by side with the baselines it must beat.
//!
//! Two entry points use this crate:
//!
//! - the `workloads` binary, which runs the workloads that the crate's WORKLOADS.md defines (q1,
//!   q2, …) for each implementation in fresh child processes and prints one JSON line per run plus
//!   one summary line per (workload, implementation) with medians and how far kcache is ahead;
//! - the criterion micro-benchmarks in `benches/` (`cargo bench -p kcache-benches`).
//!
//! The library holds what both share: the baselines ([`naive`] follows client-go's design,
//! [`floor`] does the least any implementation of the job must do), the small traits the workloads
//! are written against ([`api`]), the workload definitions ([`workloads`]), the input generator
//! ([`splitmix`]), the replaying source of the informer workloads ([`replay`]), the Kubernetes
//! objects of the store workloads ([`objects`]), measurement helpers ([`stats`], [`rss`]) and the
//! Markdown report ([`report`]).

pub mod api;
pub mod floor;
pub mod naive;
pub mod objects;
pub mod replay;
pub mod report;
pub mod rss;
pub mod splitmix;
pub mod stats;
pub mod workloads;
