//! Command-line flags, parsed by hand.

use std::fmt;

pub(crate) const USAGE: &str = "\
usage: kcache-demo [--sets N] [--max-replicas R] [--workers W] [--duration-secs D] [--seed S]
                   [--chaos] [--quiet]

A ReplicaSet controller on kcache's in-memory source. Two shared informers (sets; pods with an
owner index) feed a Controller whose W workers create and delete pods until every set has its
desired replica count, and delete the pods of deleted sets. For D seconds a seeded \"user\" keeps
scaling, deleting and creating sets; then the demo waits for the world to converge, checks it
against the source, and prints a report.

options:
  --sets N           sets at the start, 1..=100000          (default 100)
  --max-replicas R   desired replicas are drawn in 0..=R,    (default 8)
                     R at most 1000
  --workers W        reconcile workers, 1..=1024             (default 4)
  --duration-secs D  how long the user keeps changing sets,  (default 10)
                     0..=3600
  --seed S           seed of the user's (and the chaos') choices (default 1)
  --chaos            also delete random pods, and inject watch/list faults (errors, cut and
                     duplicated watches, delays) until the user stops
  --quiet            no progress bar (for CI logs)
  -h, --help         print this help

Exit status: 0 when the world converged (every set has exactly its desired pods, no pod is
orphaned), 1 when it did not, 2 for bad flags.";

const MAX_SETS: usize = 100_000;
const MAX_REPLICAS: u32 = 1000;
const MAX_WORKERS: usize = 1024;
const MAX_DURATION_SECS: u64 = 3600;

/// The demo's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Args {
    pub(crate) sets: usize,
    pub(crate) max_replicas: u32,
    pub(crate) workers: usize,
    pub(crate) duration_secs: u64,
    pub(crate) seed: u64,
    pub(crate) chaos: bool,
    pub(crate) quiet: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            sets: 100,
            max_replicas: 8,
            workers: 4,
            duration_secs: 10,
            seed: 1,
            chaos: false,
            quiet: false,
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
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--chaos" => {
                args.chaos = true;
                continue;
            }
            "--quiet" => {
                args.quiet = true;
                continue;
            }
            _ => {}
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (flag, None),
        };
        let known = [
            "--sets",
            "--max-replicas",
            "--workers",
            "--duration-secs",
            "--seed",
        ];
        if !known.contains(&name.as_str()) {
            return Err(UsageError(format!("unknown flag `{name}`")));
        }
        let value = match inline.or_else(|| flags.next()) {
            Some(value) => value,
            None => return Err(UsageError(format!("`{name}` needs a value"))),
        };
        match name.as_str() {
            "--sets" => args.sets = ranged(&name, &value, 1, MAX_SETS)?,
            "--max-replicas" => args.max_replicas = ranged(&name, &value, 0, MAX_REPLICAS)?,
            "--workers" => args.workers = ranged(&name, &value, 1, MAX_WORKERS)?,
            "--duration-secs" => args.duration_secs = ranged(&name, &value, 0, MAX_DURATION_SECS)?,
            _ => args.seed = ranged(&name, &value, 0, u64::MAX)?,
        }
    }
    Ok(Command::Run(args))
}

fn ranged<N>(name: &str, value: &str, min: N, max: N) -> Result<N, UsageError>
where
    N: std::str::FromStr + PartialOrd + fmt::Display,
{
    let n: N = value.parse().map_err(|_| {
        UsageError(format!(
            "`{name}` got `{value}`, which is not a valid number"
        ))
    })?;
    if n < min || n > max {
        return Err(UsageError(format!(
            "`{name}` must be between {min} and {max}, got `{value}`"
        )));
    }
    Ok(n)
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
    fn both_flag_forms_and_switches_are_accepted() {
        let parsed = run(&[
            "--sets",
            "10",
            "--workers=2",
            "--max-replicas",
            "3",
            "--seed=7",
            "--duration-secs",
            "0",
            "--chaos",
            "--quiet",
        ]);
        let expected = Args {
            sets: 10,
            workers: 2,
            max_replicas: 3,
            seed: 7,
            duration_secs: 0,
            chaos: true,
            quiet: true,
        };
        assert_eq!(parsed, Ok(Command::Run(expected)));
    }

    #[test]
    fn bad_flags_are_usage_errors_not_panics() {
        for flags in [
            &["--sets"][..],
            &["--sets", "many"],
            &["--sets", "0"],
            &["--sets", "-1"],
            &["--sets", "100001"],
            &["--workers", "1025"],
            &["--workers", "0"],
            &["--max-replicas", "1001"],
            &["--duration-secs", "3601"],
            &["--seed=x"],
            &["--chaos=yes"],
            &["--verbose"],
            &["sets"],
        ] {
            assert!(run(flags).is_err(), "{flags:?} was accepted");
        }
    }

    #[test]
    fn help_wins() {
        assert_eq!(run(&["--sets", "1", "--help"]), Ok(Command::Help));
    }
}
