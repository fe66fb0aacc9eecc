//! Command-line flags, parsed by hand.

use std::fmt;

pub(crate) const USAGE: &str = "\
usage: kcache-demo [--sets N] [--max-replicas R] [--workers W] [--duration-secs D] [--seed S]
                   [--chaos] [--quiet] [--etcd URL [--etcd-prefix P]
                   [--leader-elect [--identity NAME] [--lease-secs L]]]

A ReplicaSet controller on kcache's in-memory source (or on etcd, with --etcd). Two shared
informers (sets; pods with an owner index) feed a Controller whose W workers create and delete
pods until every set has its desired replica count, and delete the pods of deleted sets. For D seconds a seeded \"user\" keeps
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
  --etcd URL         keep the world in etcd at URL (e.g. http://127.0.0.1:2379) instead of
                     the embedded in-memory source: objects written through EtcdObjects,
                     informers over EtcdListWatcher, the final check against a read of etcd
                     (needs the demo built with `--features etcd`)
  --etcd-prefix P    the key prefix in etcd                  (default /kcache-demo/);
                     the demo deletes whatever is under P + \"replicasets/\" and P + \"pods/\"
                     when it starts, and leaves its final world there
  --leader-elect     run as one replica of a highly available controller (needs --etcd):
                     campaign for a lease on the key P + \"leader\"; the informers run
                     either way (warm standby), the workers and the user only while this
                     replica leads. The world under P is kept, not cleared, so a replica
                     that takes over continues it; start every replica with the same P.
                     Exits once the world this replica leads over has converged (releasing
                     the lease).
  --identity NAME    this replica's identity in the election   (default kcache-demo-PID)
  --lease-secs L     lease duration, 3..=300; renew deadline and retry period scale with
                     it as client-go's 15 s / 10 s / 2 s       (default 15)
  -h, --help         print this help

Exit status: 0 when the world converged (every set has exactly its desired pods, no pod is
orphaned), 1 when it did not, 2 for bad flags.";

const MAX_SETS: usize = 100_000;
const MAX_REPLICAS: u32 = 1000;
const MAX_WORKERS: usize = 1024;
const MAX_DURATION_SECS: u64 = 3600;
/// The default `--etcd-prefix`.
#[cfg(feature = "etcd")]
pub(crate) const DEFAULT_ETCD_PREFIX: &str = "/kcache-demo/";

/// Where the world lives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Backend {
    /// kcache's embedded in-memory source (the default).
    Memory,
    /// etcd at `url`, under `prefix` (only with the `etcd` feature).
    #[cfg(feature = "etcd")]
    Etcd { url: String, prefix: String },
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory => f.write_str("the in-memory source"),
            #[cfg(feature = "etcd")]
            Self::Etcd { url, prefix } => write!(f, "etcd at {url} (prefix {prefix})"),
        }
    }
}

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
    pub(crate) backend: Backend,
    /// `--leader-elect`: this replica's identity and lease duration.
    pub(crate) election: Option<ElectionArgs>,
}

/// The `--leader-elect` settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ElectionArgs {
    pub(crate) identity: String,
    pub(crate) lease_secs: u64,
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
            backend: Backend::Memory,
            election: None,
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
    let mut etcd_url: Option<String> = None;
    let mut etcd_prefix: Option<String> = None;
    let mut leader_elect = false;
    let mut identity: Option<String> = None;
    let mut lease_secs: Option<u64> = None;
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
            "--leader-elect" => {
                leader_elect = true;
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
            "--etcd",
            "--etcd-prefix",
            "--identity",
            "--lease-secs",
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
            "--etcd" => etcd_url = Some(etcd_endpoint(&value)?),
            "--etcd-prefix" => etcd_prefix = Some(key_prefix(&value)?),
            "--identity" => identity = Some(identity_flag(&value)?),
            "--lease-secs" => lease_secs = Some(ranged(&name, &value, 3, 300)?),
            _ => args.seed = ranged(&name, &value, 0, u64::MAX)?,
        }
    }
    args.backend = backend(etcd_url, etcd_prefix)?;
    args.election = election(&args.backend, leader_elect, identity, lease_secs)?;
    Ok(Command::Run(args))
}

/// The election the `--leader-elect` flags ask for.
fn election(
    backend: &Backend,
    leader_elect: bool,
    identity: Option<String>,
    lease_secs: Option<u64>,
) -> Result<Option<ElectionArgs>, UsageError> {
    if !leader_elect {
        return match (identity, lease_secs) {
            (None, None) => Ok(None),
            _ => Err(UsageError(
                "`--identity` and `--lease-secs` need `--leader-elect`".into(),
            )),
        };
    }
    if *backend == Backend::Memory {
        return Err(UsageError(
            "`--leader-elect` needs `--etcd URL`: replicas elect their leader through etcd".into(),
        ));
    }
    Ok(Some(ElectionArgs {
        identity: identity.unwrap_or_else(|| format!("kcache-demo-{}", std::process::id())),
        lease_secs: lease_secs.unwrap_or(15),
    }))
}

/// An election identity: printable, no whitespace, at most 128 bytes.
fn identity_flag(value: &str) -> Result<String, UsageError> {
    if !value.is_empty() && value.len() <= 128 && value.chars().all(|c| c.is_ascii_graphic()) {
        Ok(value.to_owned())
    } else {
        Err(UsageError(format!(
            "`--identity` got `{value}`: expected 1 to 128 printable ASCII characters without spaces"
        )))
    }
}

/// The backend the `--etcd` flags ask for.
fn backend(url: Option<String>, prefix: Option<String>) -> Result<Backend, UsageError> {
    match (url, prefix) {
        (None, None) => Ok(Backend::Memory),
        (None, Some(_)) => Err(UsageError("`--etcd-prefix` needs `--etcd URL`".into())),
        #[cfg(feature = "etcd")]
        (Some(url), prefix) => Ok(Backend::Etcd {
            url,
            prefix: prefix.unwrap_or_else(|| DEFAULT_ETCD_PREFIX.to_owned()),
        }),
        #[cfg(not(feature = "etcd"))]
        (Some(_), _) => Err(UsageError(
            "`--etcd` needs the demo built with etcd support: \
             cargo run --release -p kcache-demo --features etcd -- --etcd URL"
                .into(),
        )),
    }
}

/// An etcd endpoint: `http://` or `https://`, then a host.
fn etcd_endpoint(value: &str) -> Result<String, UsageError> {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) => {
            Ok(value.to_owned())
        }
        _ => Err(UsageError(format!(
            "`--etcd` got `{value}`: expected an endpoint like http://127.0.0.1:2379"
        ))),
    }
}

/// A key prefix: starts with `/`, and is more than `/` (the demo clears two prefixes below it).
fn key_prefix(value: &str) -> Result<String, UsageError> {
    if value.starts_with('/') && !value.trim_matches('/').is_empty() {
        Ok(value.to_owned())
    } else {
        Err(UsageError(format!(
            "`--etcd-prefix` got `{value}`: expected a key prefix like /kcache-demo/ (not `/`)"
        )))
    }
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
            backend: Backend::Memory,
            election: None,
        };
        assert_eq!(parsed, Ok(Command::Run(expected)));
    }

    #[test]
    fn election_flags_need_leader_elect_and_etcd() {
        for flags in [
            &["--leader-elect"][..],
            &["--identity", "a"],
            &["--lease-secs", "5"],
            &["--etcd", "http://127.0.0.1:2379", "--identity", "a"],
            &[
                "--etcd",
                "http://127.0.0.1:2379",
                "--leader-elect",
                "--identity",
                "",
            ],
            &[
                "--etcd",
                "http://127.0.0.1:2379",
                "--leader-elect",
                "--identity",
                "a b",
            ],
            &[
                "--etcd",
                "http://127.0.0.1:2379",
                "--leader-elect",
                "--lease-secs",
                "2",
            ],
            &[
                "--etcd",
                "http://127.0.0.1:2379",
                "--leader-elect",
                "--lease-secs",
                "301",
            ],
        ] {
            assert!(run(flags).is_err(), "{flags:?} was accepted");
        }
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn leader_elect_over_etcd_takes_an_identity_and_a_lease() {
        let parsed = run(&[
            "--etcd",
            "http://127.0.0.1:2379",
            "--leader-elect",
            "--identity=replica-a",
            "--lease-secs",
            "3",
        ]);
        let Ok(Command::Run(args)) = parsed else {
            panic!("refused: {parsed:?}");
        };
        assert_eq!(
            args.election,
            Some(ElectionArgs {
                identity: "replica-a".into(),
                lease_secs: 3
            })
        );
    }

    #[test]
    fn bad_etcd_flags_are_usage_errors() {
        for flags in [
            &["--etcd"][..],
            &["--etcd", "127.0.0.1:2379"],
            &["--etcd", "http://"],
            &["--etcd=ftp://x"],
            &["--etcd-prefix", "/p/"],
            &["--etcd", "http://127.0.0.1:2379", "--etcd-prefix", "p/"],
            &["--etcd", "http://127.0.0.1:2379", "--etcd-prefix", "/"],
            &["--etcd", "http://127.0.0.1:2379", "--etcd-prefix"],
        ] {
            assert!(run(flags).is_err(), "{flags:?} was accepted");
        }
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn etcd_flags_choose_etcd_with_a_default_prefix() {
        let backend = |flags: &[&str]| match run(flags) {
            Ok(Command::Run(args)) => Some(args.backend),
            _ => None,
        };
        assert_eq!(
            backend(&["--etcd", "http://127.0.0.1:2379"]),
            Some(Backend::Etcd {
                url: "http://127.0.0.1:2379".into(),
                prefix: DEFAULT_ETCD_PREFIX.into()
            })
        );
        assert_eq!(
            backend(&["--etcd-prefix=/ci/", "--etcd=https://etcd:2379"]),
            Some(Backend::Etcd {
                url: "https://etcd:2379".into(),
                prefix: "/ci/".into()
            })
        );
    }

    #[cfg(not(feature = "etcd"))]
    #[test]
    fn etcd_flags_without_the_feature_say_how_to_build_it() {
        let err = run(&["--etcd", "http://127.0.0.1:2379"]).err();
        assert!(err.is_some_and(|e| e.0.contains("--features etcd")));
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
