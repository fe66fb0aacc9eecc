//! The workloads (defined in the crate's WORKLOADS.md), one module each, and the registry the
//! runner reads.
//!
//! A workload is a [`Workload`]: a name, its headline metric, the implementations it compares and
//! a function that runs one implementation once, in the current process, and returns its metrics
//! or a message saying what came out wrong. Inputs are built before the clock starts; each run
//! checks its own result. Adding a workload means one module and one line in [`registry`].

mod e1;
mod e1_memory;
mod f1;
mod i1;
mod m1;
mod m2;
mod q1;
mod q2;
mod q2_dedup;
mod q3;
mod q4;
mod q5;
mod r1;
mod r1_source;

pub use r1::{write_snapshot as r1_write_snapshot, WRITE_SNAPSHOT_FLAG as R1_WRITE_SNAPSHOT_FLAG};

use kcache_core::{Clock, SystemClock};
use std::time::Instant;

/// A run's metrics, in the order they are printed.
pub type Metrics = Vec<(&'static str, f64)>;

/// One workload of the runner.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// The name on the command line and in the JSON lines (`q1`, `q4limiter-grow-1t`, …).
    pub name: &'static str,
    /// The metric that `kcache_ahead_by` compares.
    pub headline: &'static str,
    /// The implementations, `kcache` first.
    pub impls: &'static [&'static str],
    /// One line for `--help`.
    pub about: &'static str,
    /// Runs the workload named by the first argument (variants share a function) with the
    /// implementation named by the second, once, and checks the result.
    pub run: fn(&str, &str) -> Result<Metrics, String>,
}

/// The queue implementations: kcache, client-go's design, and the floor.
pub const QUEUE_IMPLS: &[&str] = &["kcache", "naive", "floor"];

/// Every workload, in the order `all` runs them.
pub fn registry() -> Vec<Workload> {
    let mut all = vec![
        q1::WORKLOAD,
        q2::WORKLOAD,
        q2_dedup::WORKLOAD,
        q3::WORKLOAD,
        q4::QUEUE,
    ];
    all.extend_from_slice(&q4::LIMITER);
    all.push(q5::WORKLOAD);
    all.extend([
        i1::WORKLOAD,
        f1::WORKLOAD,
        e1::E1,
        e1_memory::E1_MEMORY,
        m1::M1,
        m2::M2,
        m2::M2_CHANGED,
        r1::R1,
    ]);
    all
}

/// The workloads `selector` names: one by exact name, `all`, or every workload whose name starts
/// with `selector` and a dash (`q4limiter` selects its four variants); several such selectors
/// may be joined by commas (`e1,m1,m2`).
pub fn select(selector: &str) -> Vec<Workload> {
    let names = |w: &Workload, one: &str| {
        one == "all"
            || w.name == one
            || w.name
                .strip_prefix(one)
                .is_some_and(|rest| rest.starts_with('-'))
    };
    registry()
        .into_iter()
        .filter(|w| selector.split(',').any(|one| names(w, one)))
        .collect()
}

/// The real clock, the one every workload times with.
pub(crate) fn now() -> Instant {
    SystemClock.now()
}

/// Nanoseconds from `start` to `end` as a float.
pub(crate) fn nanos(start: Instant, end: Instant) -> f64 {
    end.saturating_duration_since(start).as_nanos() as f64
}

/// `Ok` when `cond` holds, else the message `what` builds.
pub(crate) fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// The message for an implementation name a workload does not know.
pub(crate) fn unknown_impl(workload: &str, name: &str) -> String {
    format!("workload {workload} has no implementation {name:?}")
}

/// Joins `handle`, turning a worker's panic into an error message.
pub(crate) fn join<R>(handle: std::thread::JoinHandle<R>) -> Result<R, String> {
    handle
        .join()
        .map_err(|_| "a worker thread panicked".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crate's WORKLOADS.md, which defines every workload.
    const PAGE: &str = include_str!("../WORKLOADS.md");

    /// The text of the page's section (`### ...`) whose heading names `workload`.
    fn section(workload: &str) -> Option<&'static str> {
        PAGE.split("\n### ").skip(1).find(|s| {
            let heading = s.lines().next().unwrap_or_default();
            heading.split(", ").any(|name| name == workload)
        })
    }

    #[test]
    fn the_workloads_page_defines_every_workload_with_its_headline_and_implementations() {
        for w in registry() {
            let text = section(w.name)
                .unwrap_or_else(|| panic!("WORKLOADS.md has no section for {}", w.name));
            // The summary is the paragraph under the heading (it may wrap).
            let summary = text
                .lines()
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                summary.starts_with(&format!("Headline `{}` ·", w.headline)),
                "{}: {summary}",
                w.name
            );
            let listed: Vec<&str> = summary
                .split("implementations ")
                .nth(1)
                .unwrap_or_default()
                .trim_end_matches('.')
                .split(", ")
                .map(|i| i.trim_matches('`'))
                .collect();
            assert_eq!(listed, w.impls, "{}", w.name);
        }
        // And defines nothing the runner does not run.
        let names: Vec<&str> = registry().iter().map(|w| w.name).collect();
        for heading in PAGE
            .split("\n### ")
            .skip(1)
            .filter_map(|s| s.lines().next())
        {
            for name in heading.split(", ") {
                assert!(
                    names.contains(&name),
                    "WORKLOADS.md defines {name}, the runner has none"
                );
            }
        }
    }
}
