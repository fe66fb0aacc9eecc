//! The end-of-run report.

use crate::args::Args;
use crate::metrics::{DemoMetricsProvider, Histogram};
use crate::world::{ReconcileStats, UserStats};
use kcache_controller::ControllerStats;
use kcache_reflector::FaultStats;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// What a run did, and what went wrong (any problem makes the exit status non-zero).
pub(crate) struct Report {
    pub(crate) problems: Vec<String>,
    pub(crate) sets: usize,
    pub(crate) pods: usize,
    pub(crate) user_ops: u64,
    pub(crate) user: Arc<UserStats>,
    pub(crate) events: u64,
    pub(crate) elapsed: Duration,
    pub(crate) synced_after: Duration,
    pub(crate) settle: Duration,
    pub(crate) controller: ControllerStats,
    pub(crate) reconciles: Arc<ReconcileStats>,
    pub(crate) metrics: DemoMetricsProvider,
    pub(crate) faults: Vec<FaultStats>,
    /// `--leader-elect`: how this replica came to lead.
    pub(crate) election: Option<String>,
    /// How each informer started (restored from a snapshot or listed), one line each.
    pub(crate) starts: Vec<String>,
    /// `--shard`: this member's final sharding stats.
    pub(crate) shard: Option<String>,
    /// `--reconcile-log`: where, and how many lines were written.
    pub(crate) reconcile_log: Option<(Option<std::path::PathBuf>, u64)>,
}

/// A report for a run that could not even start.
pub(crate) struct Failed(Vec<String>);

impl Report {
    pub(crate) fn failed(problems: Vec<String>) -> ReportOrFailure {
        ReportOrFailure::Failed(Failed(problems))
    }
}

/// Either a full report or the reasons the run could not start.
pub(crate) enum ReportOrFailure {
    Full(Box<Report>),
    Failed(Failed),
}

impl From<Report> for ReportOrFailure {
    fn from(r: Report) -> Self {
        Self::Full(Box::new(r))
    }
}

impl ReportOrFailure {
    pub(crate) fn is_ok(&self) -> bool {
        match self {
            Self::Full(r) => r.problems.is_empty(),
            Self::Failed(_) => false,
        }
    }

    pub(crate) fn print(&self, args: &Args) {
        match self {
            Self::Failed(Failed(problems)) => {
                println!("kcache-demo: the run could not start");
                for p in problems {
                    println!("  problem: {p}");
                }
            }
            Self::Full(r) => r.print(args),
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn quantiles(h: &Histogram) -> String {
    format!(
        "p50 {}, p99 {}, max {} (n = {})",
        ms(h.quantile(0.5)),
        ms(h.quantile(0.99)),
        ms(h.max()),
        h.count()
    )
}

impl Report {
    fn print(&self, args: &Args) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let c = &self.controller;
        let m = &self.metrics.0;
        let u = &self.user;
        println!(
            "kcache-demo: ReplicaSet controller on {}, {} workers, seed {}{}",
            args.backend,
            args.workers,
            args.seed,
            if args.chaos { ", chaos" } else { "" }
        );
        if let Some(e) = &self.election {
            println!("  election    {e}");
        }
        if let Some(s) = &self.shard {
            println!("  shard       {s}");
        }
        if let Some((path, n)) = &self.reconcile_log {
            let path = path.as_ref().map(|p| p.display().to_string());
            println!("  reconciles  {n} logged to {}", path.unwrap_or_default());
        }
        println!(
            "  world       {} sets, {} pods at the end (sets start at {}, 0..={} replicas each)",
            self.sets, self.pods, args.sets, args.max_replicas
        );
        println!(
            "  user        {} actions in {} s: {} scaled, {} created, {} deleted sets, {} pods killed, {} failed",
            self.user_ops,
            args.duration_secs,
            u.scaled.load(Relaxed),
            u.created.load(Relaxed),
            u.deleted.load(Relaxed),
            u.pods_killed.load(Relaxed),
            u.failed.load(Relaxed)
        );
        println!(
            "  informers   synced in {}; {} events delivered, {:.0} events/s over {:.1} s",
            ms(self.synced_after),
            self.events,
            self.events as f64 / secs,
            secs
        );
        for start in &self.starts {
            println!("  start       {start}");
        }
        println!(
            "  controller  {} reconciles ({:.0}/s): {} ok, {} errors, {} panics; {} retries, {} dropped",
            c.reconciles,
            c.reconciles as f64 / secs,
            c.successes,
            c.errors,
            c.panics,
            c.retries,
            c.dropped
        );
        println!(
            "              pods created {}, deleted {}; {} unsettled (the world still differed once their writes were cached); {} held back until the pod cache showed their last writes (stale_sync_skips)",
            self.reconciles.pods_created.load(Relaxed),
            self.reconciles.pods_deleted.load(Relaxed),
            self.reconciles.unsettled.load(Relaxed),
            c.stale_sync_skips
        );
        println!(
            "  reconcile   latency {}",
            quantiles(&self.reconciles.latency)
        );
        println!(
            "  queue       adds {}, retries {}, depth peak {}, delayed peak {:.0}",
            m.adds.get(),
            m.retries.get(),
            m.depth.peak(),
            m.delayed_depth.max()
        );
        println!("              queue wait {}", quantiles(&m.queue_latency));
        println!("              work       {}", quantiles(&m.work_duration));
        if args.chaos {
            for (name, f) in ["sets", "pods"].iter().zip(&self.faults) {
                println!("  faults      {name}: {f:?}");
            }
        }
        match peak_rss_kib() {
            Some(kib) => println!("  memory      peak RSS {:.1} MiB", kib as f64 / 1024.0),
            None => println!("  memory      peak RSS unknown (no /proc/self/status)"),
        }
        println!(
            "  converged   {} after the user stopped",
            if self.problems.is_empty() {
                format!("in {}", ms(self.settle))
            } else {
                "NO".to_owned()
            }
        );
        for p in &self.problems {
            println!("  problem: {p}");
        }
        println!(
            "{}",
            if self.problems.is_empty() {
                "kcache-demo: OK, every set has exactly its desired pods and no pod is orphaned"
            } else {
                "kcache-demo: FAILED"
            }
        );
    }
}

/// The process's peak resident set size in KiB (Linux: `VmHWM` in `/proc/self/status`).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
