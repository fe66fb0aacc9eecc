//! The end-of-run summary and the checks that decide the exit status.

use crate::args::Args;
use crate::metrics::{DemoMetrics, Histogram};
use crate::{Jobs, DROPPED, SUCCEEDED};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// What a run did, and what went wrong.
pub(crate) struct Report {
    pub(crate) succeeded: u64,
    pub(crate) dropped: u64,
    pub(crate) retries: u64,
    attempts: u64,
    /// attempts -> (jobs that succeeded after that many attempts, jobs dropped after that many).
    by_attempts: BTreeMap<u64, (u64, u64)>,
    metrics: Arc<DemoMetrics>,
    wall: Duration,
    /// Broken invariants: any of them makes the exit status non-zero.
    pub(crate) problems: Vec<String>,
    /// Disagreements with the queue's own bookkeeping that do not fail the run.
    notes: Vec<String>,
}

impl Report {
    pub(crate) fn new(
        jobs: &Jobs,
        metrics: &Arc<DemoMetrics>,
        wall: Duration,
        stalled: bool,
        worker_errors: Vec<String>,
    ) -> Self {
        let mut by_attempts = BTreeMap::<u64, (u64, u64)>::new();
        let (mut succeeded, mut dropped, mut pending, mut attempts) = (0, 0, 0, 0);
        for (outcome, tries) in jobs.outcome.iter().zip(&jobs.attempts) {
            let tries = tries.load(Relaxed);
            attempts += tries;
            let row = by_attempts.entry(tries).or_default();
            match outcome.load(Relaxed) {
                SUCCEEDED => (succeeded, row.0) = (succeeded + 1, row.0 + 1),
                DROPPED => (dropped, row.1) = (dropped + 1, row.1 + 1),
                _ => pending += 1,
            }
        }
        let retries = jobs.retries.load(Relaxed);
        let n = jobs.args.jobs;
        let mut problems = worker_errors;
        let mut check = |ok: bool, what: String| {
            if !ok {
                problems.push(what);
            }
        };
        check(
            !stalled,
            format!("the run stalled: no attempt for {:?}", crate::STALL_AFTER),
        );
        check(pending == 0, format!("{pending} job(s) never ended"));
        check(
            succeeded + dropped == n,
            format!("succeeded {succeeded} + dropped {dropped} != jobs {n}"),
        );
        check(
            attempts == n + retries,
            format!("attempts {attempts} != jobs {n} + retries {retries}"),
        );
        check(
            jobs.finished.load(Relaxed) == n,
            format!(
                "{} jobs counted as finished, not {n}",
                jobs.finished.load(Relaxed)
            ),
        );
        for (count, what) in [
            (&jobs.ended_twice, "job(s) ended twice"),
            (&jobs.unknown_jobs, "unknown job(s) handed out"),
            (&jobs.done_errors, "`done` call(s) rejected"),
            (&jobs.refused_retries, "retry(ies) refused by the queue"),
        ] {
            let count = count.load(Relaxed);
            check(count == 0, format!("{count} {what}"));
        }
        check(
            metrics.retries.get() == retries,
            format!(
                "workqueue_retries_total {} != retries {retries}",
                metrics.retries.get()
            ),
        );
        check(
            metrics.depth.get() == 0,
            format!(
                "workqueue_depth is {} after the run, not 0",
                metrics.depth.get()
            ),
        );

        let mut notes = Vec::new();
        let mismatches = jobs.requeue_mismatches.load(Relaxed);
        if mismatches > 0 {
            notes.push(format!(
                "the rate limiter's num_requeues disagreed with the workers' retry count for \
                 {mismatches} of {n} jobs"
            ));
        }
        for (name, h) in [
            ("workqueue_queue_duration_seconds", &metrics.queue_latency),
            ("workqueue_work_duration_seconds", &metrics.work_duration),
        ] {
            if h.count() != attempts {
                notes.push(format!(
                    "{name} has {} observations for {attempts} attempts",
                    h.count()
                ));
            }
        }

        Self {
            succeeded,
            dropped,
            retries,
            attempts,
            by_attempts,
            metrics: metrics.clone(),
            wall,
            problems,
            notes,
        }
    }

    pub(crate) fn print(&self, args: &Args) {
        let m = &self.metrics;
        println!(
            "kcache-demo: {} jobs, {} workers, fail rate {}, at most {} retries, seed {}, \
             ~{} µs of work per attempt",
            args.jobs, args.workers, args.fail_rate, args.max_retries, args.seed, args.work_us
        );
        println!(
            "rate limiter: ItemExponentialFailureRateLimiter, {} doubling up to {}",
            fmt_duration(crate::RETRY_BASE),
            fmt_duration(crate::RETRY_MAX)
        );
        println!();
        println!("jobs               {:>9}", args.jobs);
        println!("  succeeded        {:>9}", self.succeeded);
        println!(
            "  dropped          {:>9}   (failed {} attempts: 1 + {} retries)",
            self.dropped,
            u64::from(args.max_retries) + 1,
            args.max_retries
        );
        println!("attempts           {:>9}", self.attempts);
        println!(
            "retries            {:>9}   (add_rate_limited calls)",
            self.retries
        );
        println!();
        println!("attempts per job");
        let widest = self
            .by_attempts
            .values()
            .map(|(s, d)| s + d)
            .max()
            .unwrap_or(0)
            .max(1);
        for (tries, (ok, dropped)) in &self.by_attempts {
            let jobs = ok + dropped;
            let bar = "#".repeat(((jobs * 40).div_ceil(widest)) as usize);
            let dropped = if *dropped > 0 {
                format!(" ({dropped} dropped)")
            } else {
                String::new()
            };
            println!("  {tries:>3} {jobs:>9}  {bar}{dropped}");
        }
        println!();
        println!("queue metrics (name=\"demo\")");
        println!(
            "  workqueue_adds_total                         {:>9}",
            m.adds.get()
        );
        println!(
            "  workqueue_retries_total                      {:>9}",
            m.retries.get()
        );
        println!(
            "  workqueue_depth                              {:>9}   (peak {})",
            m.depth.get(),
            m.depth.peak()
        );
        println!(
            "  workqueue_delayed_depth                      {:>9}   (peak {})",
            m.delayed_depth.last(),
            m.delayed_depth.max()
        );
        print_histogram("workqueue_queue_duration_seconds", &m.queue_latency);
        print_histogram("workqueue_work_duration_seconds", &m.work_duration);
        println!(
            "  workqueue_longest_running_processor_seconds  peak {}   (sampled every 500 ms)",
            fmt_seconds(m.longest_running_seconds.max())
        );
        println!(
            "  workqueue_unfinished_work_seconds            peak {}   (sampled every 500 ms)",
            fmt_seconds(m.unfinished_work_seconds.max())
        );
        println!();
        let secs = self.wall.as_secs_f64().max(1e-9);
        println!(
            "wall time {}, throughput {:.0} attempts/s, {:.0} jobs/s",
            fmt_duration(self.wall),
            self.attempts as f64 / secs,
            args.jobs as f64 / secs
        );
        for note in &self.notes {
            println!("note: {note}");
        }
        if self.problems.is_empty() {
            println!(
                "ok: every job ended; succeeded + dropped = jobs, attempts = jobs + retries, \
                 retries = workqueue_retries_total"
            );
        } else {
            for problem in &self.problems {
                eprintln!("FAILED: {problem}");
            }
        }
    }
}

fn print_histogram(name: &str, h: &Histogram) {
    println!(
        "  {name:<44} {:>9}   p50 {}, p99 {}, max {}, mean {}",
        h.count(),
        fmt_duration(h.quantile(0.5)),
        fmt_duration(h.quantile(0.99)),
        fmt_duration(h.max()),
        fmt_duration(h.mean())
    );
}

fn fmt_seconds(seconds: f64) -> String {
    Duration::try_from_secs_f64(seconds).map_or_else(|_| format!("{seconds} s"), fmt_duration)
}

/// `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.2} s", ns as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_in_a_readable_unit() {
        assert_eq!(fmt_duration(Duration::from_nanos(850)), "850 ns");
        assert_eq!(fmt_duration(Duration::from_micros(12)), "12.0 µs");
        assert_eq!(fmt_duration(Duration::from_micros(4560)), "4.56 ms");
        assert_eq!(fmt_duration(Duration::from_millis(1230)), "1.23 s");
    }
}
