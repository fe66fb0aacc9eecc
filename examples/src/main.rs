//! `kcache-demo`: W workers process jobs from a kcache [`RateLimitingQueue`]; failed jobs are
//! retried through the rate limiter until they succeed or run out of retries, and the run ends with
//! a summary of retries and queue metrics.
//!
//! Run `cargo run --release -p kcache-demo -- --help` for the flags. Outcomes are deterministic for
//! a seed: whether attempt `a` of job `j` fails depends only on `(seed, j, a)`, not on which worker
//! runs it or when.

mod args;
mod metrics;
mod report;

use crate::args::{Args, Command, USAGE};
use crate::metrics::DemoMetricsProvider;
use crate::report::Report;
use kcache_core::{Clock, SystemClock};
use kcache_workqueue::{ItemExponentialFailureRateLimiter, QueueConfig, RateLimitingQueue};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The retry delays: the first retry of a job waits `RETRY_BASE`, each further one twice as long,
/// up to `RETRY_MAX`.
const RETRY_BASE: Duration = Duration::from_millis(1);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long the run may go without a single attempt before the demo calls it stuck (well above
/// `RETRY_MAX`, the longest a job can legitimately wait).
const STALL_AFTER: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let flags: Result<Vec<String>, _> = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect();
    let command = match flags {
        Ok(flags) => args::parse(flags),
        Err(bad) => {
            eprintln!("kcache-demo: flag {bad:?} is not valid UTF-8\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let args = match command {
        Ok(Command::Run(args)) => args,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("kcache-demo: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let report = run(&args);
    report.print(&args);
    if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// How a job ended.
const PENDING: u8 = 0;
const SUCCEEDED: u8 = 1;
const DROPPED: u8 = 2;

/// What the workers share besides the queue.
struct Jobs {
    args: Args,
    /// Attempts per job, indexed by job id.
    attempts: Vec<AtomicU64>,
    /// `PENDING`, `SUCCEEDED` or `DROPPED` per job.
    outcome: Vec<AtomicU8>,
    /// Jobs that ended (succeeded or dropped).
    finished: AtomicU64,
    /// `add_rate_limited` calls.
    retries: AtomicU64,
    /// Things that must never happen; each is reported and fails the run.
    ended_twice: AtomicU64,
    unknown_jobs: AtomicU64,
    done_errors: AtomicU64,
    refused_retries: AtomicU64,
    /// Jobs whose limiter `num_requeues` differed from the worker's own retry count when they
    /// ended (reported, not fatal: it checks the limiter, not the demo).
    requeue_mismatches: AtomicU64,
}

fn run(args: &Args) -> Report {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = DemoMetricsProvider::default();
    let config = QueueConfig::new()
        .name("demo")
        .metrics_provider(Arc::new(provider.clone()))
        .clock(clock.clone());
    let limiter = ItemExponentialFailureRateLimiter::new(RETRY_BASE, RETRY_MAX);
    let queue = RateLimitingQueue::with_config(limiter, config);
    let len = usize::try_from(args.jobs).unwrap_or(usize::MAX);
    let jobs = Arc::new(Jobs {
        args: args.clone(),
        attempts: (0..len).map(|_| AtomicU64::new(0)).collect(),
        outcome: (0..len).map(|_| AtomicU8::new(PENDING)).collect(),
        finished: AtomicU64::new(0),
        retries: AtomicU64::new(0),
        ended_twice: AtomicU64::new(0),
        unknown_jobs: AtomicU64::new(0),
        done_errors: AtomicU64::new(0),
        refused_retries: AtomicU64::new(0),
        requeue_mismatches: AtomicU64::new(0),
    });

    let start = clock.now();
    for job in 0..args.jobs {
        queue.add(job);
    }
    let mut workers = Vec::with_capacity(args.workers);
    let mut worker_errors = Vec::new();
    for i in 0..args.workers {
        let (handle, jobs, clock) = (queue.clone(), jobs.clone(), clock.clone());
        let spawned = thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || work(&handle, &jobs, clock.as_ref()));
        match spawned {
            Ok(worker) => workers.push(worker),
            Err(e) => {
                worker_errors.push(format!("could not start worker {i}: {e}"));
                queue.shut_down();
                break;
            }
        }
    }

    // The worker that ends the last job shuts the queue down; this loop only watches for a run that
    // stopped making progress (a lost item), so the demo fails instead of hanging.
    let mut stalled = false;
    let (mut last_progress, mut last_attempts) = (clock.now(), u64::MAX);
    while jobs.finished.load(Relaxed) < args.jobs && !queue.is_shutting_down() {
        clock.sleep(Duration::from_millis(5));
        let attempts: u64 = jobs.attempts.iter().map(|a| a.load(Relaxed)).sum();
        if attempts != last_attempts {
            (last_progress, last_attempts) = (clock.now(), attempts);
        } else if clock.now().saturating_duration_since(last_progress) > STALL_AFTER {
            stalled = true;
            break;
        }
    }
    queue.shut_down();
    for worker in workers {
        if worker.join().is_err() {
            worker_errors.push("a worker panicked".to_string());
        }
    }
    let wall = clock.now().saturating_duration_since(start);
    Report::new(&jobs, &provider.0, wall, stalled, worker_errors)
}

/// One worker: the canonical client-go loop of `get`, process, `forget` or `add_rate_limited`,
/// `done`.
fn work(queue: &RateLimitingQueue<u64>, jobs: &Jobs, clock: &dyn Clock) {
    let args = &jobs.args;
    while let Some(job) = queue.get() {
        let index = usize::try_from(job)
            .ok()
            .filter(|&i| i < jobs.attempts.len());
        let Some(index) = index else {
            jobs.unknown_jobs.fetch_add(1, Relaxed);
            let _ = queue.done(&job);
            continue;
        };
        let attempt = jobs.attempts[index].fetch_add(1, Relaxed) + 1;
        let roll = Roll::new(args.seed, job, attempt);
        let work = roll.work(args.work_us);
        if !work.is_zero() {
            clock.sleep(work);
        }
        let failed = roll.fails(args.fail_rate);
        let retried_so_far = attempt - 1;
        let mut ended = false;
        if failed && retried_so_far < u64::from(args.max_retries) {
            jobs.retries.fetch_add(1, Relaxed);
            if !queue.add_rate_limited(job) {
                jobs.refused_retries.fetch_add(1, Relaxed);
            }
        } else {
            if u64::try_from(queue.num_requeues(&job)).ok() != Some(retried_so_far) {
                jobs.requeue_mismatches.fetch_add(1, Relaxed);
            }
            queue.forget(&job);
            let outcome = if failed { DROPPED } else { SUCCEEDED };
            if jobs.outcome[index].swap(outcome, Relaxed) != PENDING {
                jobs.ended_twice.fetch_add(1, Relaxed);
            }
            ended = true;
        }
        if queue.done(&job).is_err() {
            jobs.done_errors.fetch_add(1, Relaxed);
        }
        if ended && jobs.finished.fetch_add(1, Relaxed) + 1 == args.jobs {
            queue.shut_down();
        }
    }
}

/// The random draws of one attempt, from a splitmix64 stream seeded by `(seed, job, attempt)`, so
/// the outcome does not depend on scheduling.
struct Roll(u64);

impl Roll {
    fn new(seed: u64, job: u64, attempt: u64) -> Self {
        let mut state = seed;
        let a = splitmix64(&mut state) ^ job;
        let mut state = a;
        let b = splitmix64(&mut state) ^ attempt;
        Self(b)
    }

    fn next_unit(&mut self) -> f64 {
        // 53 random bits make a uniform f64 in [0, 1).
        (splitmix64(&mut self.0) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether the attempt fails, with probability `rate`.
    fn fails(&self, rate: f64) -> bool {
        Self(self.0).next_unit() < rate
    }

    /// The simulated work: uniform in `0 ..= 2 * mean_us` microseconds.
    fn work(&self, mean_us: u64) -> Duration {
        let mut r = Self(self.0 ^ 0x5bd1_e995);
        let us = r.next_unit() * 2.0 * mean_us as f64;
        Duration::from_nanos((us * 1e3) as u64)
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): advances `state` and returns the next output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // The first outputs for state 0 of the reference C implementation (Vigna's splitmix64.c).
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut state), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix64(&mut state), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn outcomes_depend_only_on_seed_job_and_attempt() {
        let fails = |seed, job, attempt| Roll::new(seed, job, attempt).fails(0.5);
        assert_eq!(fails(1, 10, 1), fails(1, 10, 1));
        let share = (0..10_000).filter(|&j| fails(1, j, 1)).count();
        assert!(
            (4_700..5_300).contains(&share),
            "{share} of 10000 failed at rate 0.5"
        );
    }

    #[test]
    fn a_small_run_ends_every_job_and_its_counts_add_up() {
        let args = Args {
            jobs: 200,
            workers: 3,
            fail_rate: 0.5,
            max_retries: 3,
            work_us: 0,
            seed: 9,
        };
        let report = run(&args);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.succeeded + report.dropped, 200);
        assert!(report.dropped > 0 && report.retries > 0);
    }

    #[test]
    fn fail_rate_zero_and_one_are_the_extremes() {
        let base = Args {
            jobs: 50,
            workers: 2,
            max_retries: 2,
            work_us: 0,
            ..Args::default()
        };
        let none = run(&Args {
            fail_rate: 0.0,
            ..base.clone()
        });
        assert_eq!((none.succeeded, none.dropped, none.retries), (50, 0, 0));
        let all = run(&Args {
            fail_rate: 1.0,
            ..base
        });
        assert_eq!((all.succeeded, all.dropped, all.retries), (0, 50, 100));
    }

    #[test]
    fn zero_jobs_is_a_clean_run() {
        let report = run(&Args {
            jobs: 0,
            ..Args::default()
        });
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
