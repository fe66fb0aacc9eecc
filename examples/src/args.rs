//! Command-line flags, parsed by hand (the demo has no dependencies beyond kcache).

use std::fmt;

pub(crate) const USAGE: &str = "\
usage: kcache-demo [--jobs N] [--workers W] [--fail-rate P] [--seed S] [--max-retries R] [--work-us U]

N workers take jobs from a kcache RateLimitingQueue. A job fails with probability P (decided by a
seeded splitmix64 PRNG, so a seed always gives the same outcomes); a failed job is retried through
the per-item exponential rate limiter (1 ms doubling up to 1 s) until it succeeds or has been
retried R times, after which it is dropped. A summary of retries and queue metrics ends the run.

options:
  --jobs N          jobs to process, at most 10000000        (default 2000)
  --workers W       worker threads, 1..=1024                 (default 4)
  --fail-rate P     probability that an attempt fails, 0..=1 (default 0.3)
  --seed S          PRNG seed                                (default 1)
  --max-retries R   retries before a job is dropped          (default 5)
  --work-us U       mean simulated work per attempt in µs,   (default 100)
                    uniform in 0..=2U, U at most 1000000
  -h, --help        print this help

Exit status: 0 when every job ended (succeeded or dropped) and all counts agree, 1 when they do
not, 2 for bad flags.";

/// The most jobs a run takes (the demo keeps a few bytes per job).
pub(crate) const MAX_JOBS: u64 = 10_000_000;
/// The most worker threads a run starts.
pub(crate) const MAX_WORKERS: usize = 1024;
/// The longest mean simulated work (1 s).
pub(crate) const MAX_WORK_US: u64 = 1_000_000;

/// The demo's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Args {
    pub(crate) jobs: u64,
    pub(crate) workers: usize,
    pub(crate) fail_rate: f64,
    pub(crate) seed: u64,
    pub(crate) max_retries: u32,
    pub(crate) work_us: u64,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            jobs: 2000,
            workers: 4,
            fail_rate: 0.3,
            seed: 1,
            max_retries: 5,
            work_us: 100,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Command {
    Run(Args),
    Help,
}

/// A flag the demo cannot use; printed above the usage text.
#[derive(Debug, PartialEq)]
pub(crate) struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses the flags (without the program name). Accepts `--flag value` and `--flag=value`.
pub(crate) fn parse(flags: impl IntoIterator<Item = String>) -> Result<Command, UsageError> {
    let mut args = Args::default();
    let mut flags = flags.into_iter();
    while let Some(flag) = flags.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(Command::Help);
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (flag, None),
        };
        let known = [
            "--jobs",
            "--workers",
            "--fail-rate",
            "--seed",
            "--max-retries",
            "--work-us",
        ];
        if !known.contains(&name.as_str()) {
            return Err(UsageError(format!("unknown flag `{name}`")));
        }
        let value = match inline.or_else(|| flags.next()) {
            Some(value) => value,
            None => return Err(UsageError(format!("`{name}` needs a value"))),
        };
        match name.as_str() {
            "--jobs" => {
                args.jobs = number(&name, &value)?;
                if args.jobs > MAX_JOBS {
                    return Err(UsageError(format!("`--jobs` can be at most {MAX_JOBS}")));
                }
            }
            "--workers" => {
                args.workers = number(&name, &value)?;
                if !(1..=MAX_WORKERS).contains(&args.workers) {
                    return Err(UsageError(format!(
                        "`--workers` must be between 1 and {MAX_WORKERS}, got `{value}`"
                    )));
                }
            }
            "--fail-rate" => {
                args.fail_rate = number(&name, &value)?;
                if !(0.0..=1.0).contains(&args.fail_rate) {
                    return Err(UsageError(format!(
                        "`--fail-rate` must be between 0 and 1, got `{value}`"
                    )));
                }
            }
            "--seed" => args.seed = number(&name, &value)?,
            "--max-retries" => args.max_retries = number(&name, &value)?,
            _ => {
                args.work_us = number(&name, &value)?;
                if args.work_us > MAX_WORK_US {
                    return Err(UsageError(format!(
                        "`--work-us` can be at most {MAX_WORK_US}"
                    )));
                }
            }
        }
    }
    Ok(Command::Run(args))
}

fn number<N: std::str::FromStr>(name: &str, value: &str) -> Result<N, UsageError> {
    value.parse().map_err(|_| {
        UsageError(format!(
            "`{name}` got `{value}`, which is not a valid number"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(flags: &[&str]) -> Result<Command, UsageError> {
        parse(flags.iter().map(|s| s.to_string()))
    }

    #[test]
    fn no_flags_give_the_defaults() {
        assert_eq!(run(&[]), Ok(Command::Run(Args::default())));
    }

    #[test]
    fn both_flag_forms_are_accepted() {
        let parsed = run(&[
            "--jobs",
            "10",
            "--workers=2",
            "--fail-rate",
            "0.5",
            "--seed=7",
        ]);
        let expected = Args {
            jobs: 10,
            workers: 2,
            fail_rate: 0.5,
            seed: 7,
            ..Args::default()
        };
        assert_eq!(parsed, Ok(Command::Run(expected)));
    }

    #[test]
    fn bad_flags_are_usage_errors_not_panics() {
        for flags in [
            &["--jobs"][..],
            &["--jobs", "many"],
            &["--jobs", "-1"],
            &["--jobs", "10000001"],
            &["--workers", "1025"],
            &["--work-us", "1000001"],
            &["--workers", "0"],
            &["--fail-rate", "1.5"],
            &["--fail-rate", "NaN"],
            &["--max-retries=x"],
            &["--verbose"],
            &["jobs"],
        ] {
            assert!(run(flags).is_err(), "{flags:?} was accepted");
        }
    }

    #[test]
    fn help_wins() {
        assert_eq!(run(&["--jobs", "1", "--help"]), Ok(Command::Help));
    }
}
