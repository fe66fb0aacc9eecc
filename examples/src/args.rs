//! Command-line flags, parsed by clap (derive): the same flags as before, a generated `--help`,
//! and errors that name the flag and what was wrong.

use clap::error::ErrorKind;
use clap::{ArgGroup, CommandFactory, Parser};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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

/// The demo's settings, checked.
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
    /// `--listen`: where to serve /metrics, /healthz and /readyz.
    pub(crate) listen: Option<SocketAddr>,
    /// `--shard`: this replica's identity, lease duration, and whether it runs the user.
    pub(crate) shard: Option<ShardArgs>,
    /// `--reconcile-log`: where each finished reconcile is logged.
    pub(crate) reconcile_log: Option<PathBuf>,
    /// `--reconcile-delay-ms`: how long each reconcile waits, as an API call would.
    pub(crate) reconcile_delay: Duration,
    /// `--snapshot-dir`: where the informers' snapshots live (warm restarts).
    pub(crate) snapshot_dir: Option<PathBuf>,
}

/// The `--shard` settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShardArgs {
    pub(crate) identity: String,
    pub(crate) lease_secs: u64,
    /// `--user`: this replica runs the seeded user.
    pub(crate) user: bool,
    /// `--members`: the user starts once this many replicas are members.
    pub(crate) members: usize,
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
            listen: None,
            shard: None,
            reconcile_log: None,
            reconcile_delay: Duration::ZERO,
            snapshot_dir: None,
        }
    }
}

/// A ReplicaSet controller on kcache's in-memory source (or on etcd, with --etcd).
///
/// Two shared informers (sets; pods with an owner index) feed a Controller whose workers create
/// and delete pods until every set has its desired replica count, and delete the pods of
/// deleted sets. For --duration-secs a seeded "user" keeps scaling, deleting and creating sets;
/// then the demo waits for the world to converge, checks it against the source, and prints a
/// report.
///
/// Exit status: 0 when the world converged (every set has exactly its desired pods, no pod is
/// orphaned), 1 when it did not, 2 for bad flags.
#[derive(Parser, Debug)]
#[command(name = "kcache-demo", version, max_term_width = 100)]
#[command(group(ArgGroup::new("replica").args(["leader_elect", "shard"])))]
struct Cli {
    /// Sets at the start.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    sets: u64,
    /// Desired replicas are drawn in 0..=R.
    #[arg(long, value_name = "R", default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=1000))]
    max_replicas: u32,
    /// Reconcile workers.
    #[arg(long, value_name = "W", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    workers: u64,
    /// How long the user keeps changing sets, in seconds.
    #[arg(long, value_name = "D", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    duration_secs: u64,
    /// Seed of the user's (and the chaos') choices.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Also delete random pods, and inject watch/list faults (errors, cut and duplicated
    /// watches, delays) until the user stops.
    #[arg(long)]
    chaos: bool,
    /// No progress bar (for CI logs).
    #[arg(long)]
    quiet: bool,
    /// Keep the world in etcd at URL (e.g. http://127.0.0.1:2379) instead of the embedded
    /// in-memory source: objects written through EtcdObjects, informers over EtcdListWatcher,
    /// the final check against a read of etcd (needs the demo built with `--features etcd`).
    #[arg(long, value_name = "URL", value_parser = etcd_endpoint)]
    etcd: Option<String>,
    /// The key prefix in etcd [default: /kcache-demo/]; the demo deletes whatever is under
    /// P + "replicasets/" and P + "pods/" when it starts, and leaves its final world there.
    #[arg(long, value_name = "P", requires = "etcd", value_parser = key_prefix)]
    etcd_prefix: Option<String>,
    /// Run as one replica of a highly available controller: campaign for a lease on the key
    /// P + "leader"; the informers run either way (warm standby), the workers and the user only
    /// while this replica leads. The world under P is kept, not cleared, so a replica that takes
    /// over continues it; start every replica with the same P. Exits once the world this
    /// replica leads over has converged (releasing the lease).
    #[arg(long, requires = "etcd")]
    leader_elect: bool,
    /// Run as one replica of an active-active sharded controller: every replica renews a member
    /// record under P + "shard-members/", the sets are spread over the live replicas by a
    /// consistent hash ring, and this replica reconciles only the sets it owns (a pod's events go
    /// to the replica owning its set); a key changes replica only once its old owner finished
    /// with it or its lease expired. The world under P is shared, not cleared. Exits 0 once the
    /// user (see --user) has finished and the world has converged, 1 if it did not.
    #[arg(long, requires = "etcd")]
    shard: bool,
    /// With --shard: this replica also runs the seeded user (seeding the world first if it is
    /// empty) and marks under P when the user has finished. Give it to exactly one replica: a
    /// second one is refused.
    #[arg(long, requires = "shard")]
    user: bool,
    /// With --user: start the user once N replicas are live members (waits up to 60 s).
    #[arg(long, value_name = "N", requires = "user", value_parser = clap::value_parser!(u64).range(1..=64))]
    members: Option<u64>,
    /// This replica's identity in the election or the shard group [default: kcache-demo-PID].
    #[arg(long, value_name = "NAME", requires = "replica", value_parser = identity)]
    identity: Option<String>,
    /// Lease duration in seconds; renew deadline and retry period scale with it as client-go's
    /// 15 s / 10 s / 2 s.
    #[arg(long, value_name = "L", requires = "replica", value_parser = clap::value_parser!(u64).range(3..=300))]
    lease_secs: Option<u64>,
    /// Serve /metrics (Prometheus text: the workqueue_* and informer_* metrics under client-go's
    /// names), /healthz (the controller's workers, and with --leader-elect the lease's renewal)
    /// and /readyz (the informers' caches synced) over HTTP on ADDR, e.g. 127.0.0.1:9090
    /// (port 0: any free port; the address is printed).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Append one JSON line per finished reconcile to FILE, flushed per line:
    /// {"key":…,"replica":…,"start_ns":…,"end_ns":…} (system clock, nanoseconds since the Unix
    /// epoch; replica is the identity). kcache-reconcile-check reads these logs.
    #[arg(long, value_name = "FILE")]
    reconcile_log: Option<PathBuf>,
    /// Each reconcile first waits MS milliseconds, as an API call would (I/O-bound reconciles).
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    reconcile_delay_ms: u64,
    /// Restart warm: each informer starts from its snapshot in DIR (written by the last run) and
    /// watches from its version instead of listing, writes a snapshot every 5 s and when it
    /// stops; the world in etcd is kept, not cleared, and continued. A snapshot that is missing,
    /// refused or too old for etcd's history falls back to a list (the report's `start` lines
    /// say which). A quiet informer reports synced at etcd's next watch progress notification
    /// (etcd's --experimental-watch-progress-notify-interval, 10 minutes by default).
    #[cfg(feature = "etcd")]
    #[arg(long, value_name = "DIR", requires = "etcd")]
    snapshot_dir: Option<PathBuf>,
}

/// Parses the command line (the program name first), or returns clap's error: it prints the
/// help or the version (exit 0) or the problem with a usage line (exit 2) through `exit`.
pub(crate) fn parse<I, T>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(argv)?;
    let backend = backend(cli.etcd, cli.etcd_prefix)?;
    let identity = cli
        .identity
        .unwrap_or_else(|| format!("kcache-demo-{}", std::process::id()));
    let lease_secs = cli.lease_secs.unwrap_or(15);
    let election = cli.leader_elect.then(|| ElectionArgs {
        identity: identity.clone(),
        lease_secs,
    });
    let members =
        usize::try_from(cli.members.unwrap_or(1)).map_err(|_| invalid("--members is too large"))?;
    let shard = cli.shard.then_some(ShardArgs {
        identity,
        lease_secs,
        user: cli.user,
        members,
    });
    Ok(Args {
        sets: usize::try_from(cli.sets).map_err(|_| invalid("--sets is too large"))?,
        max_replicas: cli.max_replicas,
        workers: usize::try_from(cli.workers).map_err(|_| invalid("--workers is too large"))?,
        duration_secs: cli.duration_secs,
        seed: cli.seed,
        chaos: cli.chaos,
        quiet: cli.quiet,
        backend,
        election,
        listen: cli.listen,
        shard,
        reconcile_log: cli.reconcile_log,
        reconcile_delay: Duration::from_millis(cli.reconcile_delay_ms),
        #[cfg(feature = "etcd")]
        snapshot_dir: cli.snapshot_dir,
        #[cfg(not(feature = "etcd"))]
        snapshot_dir: None,
    })
}

fn invalid(message: impl fmt::Display) -> clap::Error {
    Cli::command().error(ErrorKind::ArgumentConflict, message)
}

/// The backend the `--etcd` flags ask for.
fn backend(url: Option<String>, prefix: Option<String>) -> Result<Backend, clap::Error> {
    match url {
        None => Ok(Backend::Memory),
        #[cfg(feature = "etcd")]
        Some(url) => Ok(Backend::Etcd {
            url,
            prefix: prefix.unwrap_or_else(|| DEFAULT_ETCD_PREFIX.to_owned()),
        }),
        #[cfg(not(feature = "etcd"))]
        Some(_) => {
            let _ = prefix;
            Err(invalid(
                "`--etcd` needs the demo built with etcd support: \
                 cargo run --release -p kcache-demo --features etcd -- --etcd URL",
            ))
        }
    }
}

/// An election identity: printable, no whitespace, at most 128 bytes.
fn identity(value: &str) -> Result<String, String> {
    if !value.is_empty() && value.len() <= 128 && value.chars().all(|c| c.is_ascii_graphic()) {
        Ok(value.to_owned())
    } else {
        Err("expected 1 to 128 printable ASCII characters without spaces".into())
    }
}

/// An etcd endpoint: `http://` or `https://`, then a host.
fn etcd_endpoint(value: &str) -> Result<String, String> {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) => {
            Ok(value.to_owned())
        }
        _ => Err("expected an endpoint like http://127.0.0.1:2379".into()),
    }
}

/// A key prefix: starts with `/`, and is more than `/` (the demo clears two prefixes below it).
fn key_prefix(value: &str) -> Result<String, String> {
    if value.starts_with('/') && !value.trim_matches('/').is_empty() {
        Ok(value.to_owned())
    } else {
        Err("expected a key prefix like /kcache-demo/ (not `/`)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(flags: &[&str]) -> Result<Args, clap::Error> {
        parse(std::iter::once("kcache-demo").chain(flags.iter().copied()))
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_flags_give_the_defaults() {
        assert_eq!(run(&[]).ok(), Some(Args::default()));
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
            listen: None,
            shard: None,
            reconcile_log: None,
            reconcile_delay: Duration::ZERO,
            snapshot_dir: None,
        };
        assert_eq!(parsed.ok(), Some(expected));
    }

    #[test]
    fn listen_takes_an_ip_address_and_a_port() {
        let listen = run(&["--listen", "127.0.0.1:0"])
            .ok()
            .and_then(|a| a.listen);
        assert_eq!(listen, Some(SocketAddr::from(([127, 0, 0, 1], 0))));
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
        let election = parsed.map(|args| args.election);
        assert_eq!(
            election.ok(),
            Some(Some(ElectionArgs {
                identity: "replica-a".into(),
                lease_secs: 3
            }))
        );
    }

    #[test]
    fn shard_flags_need_shard_and_etcd_and_exclude_leader_elect() {
        let etcd = ["--etcd", "http://127.0.0.1:2379"];
        for flags in [
            &["--shard"][..],
            &["--user"],
            &[etcd[0], etcd[1], "--user"],
            &[etcd[0], etcd[1], "--shard", "--members", "3"],
            &[etcd[0], etcd[1], "--shard", "--user", "--members", "0"],
            &[etcd[0], etcd[1], "--shard", "--leader-elect"],
            &[etcd[0], etcd[1], "--shard", "--lease-secs", "2"],
        ] {
            assert!(run(flags).is_err(), "{flags:?} was accepted");
        }
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn shard_over_etcd_takes_an_identity_a_lease_the_user_and_a_member_count() {
        let parsed = run(&[
            "--etcd",
            "http://127.0.0.1:2379",
            "--shard",
            "--identity=r1",
            "--lease-secs",
            "3",
            "--user",
            "--members=3",
        ]);
        let shard = parsed.map(|args| (args.shard, args.election));
        let expected = ShardArgs {
            identity: "r1".into(),
            lease_secs: 3,
            user: true,
            members: 3,
        };
        assert_eq!(shard.ok(), Some((Some(expected), None)));
    }

    #[test]
    fn the_reconcile_log_and_delay_flags_are_parsed_and_checked() {
        let parsed = run(&["--reconcile-log", "/tmp/r.jsonl", "--reconcile-delay-ms=25"]);
        assert_eq!(
            parsed.map(|a| (a.reconcile_log, a.reconcile_delay)).ok(),
            Some((
                Some(PathBuf::from("/tmp/r.jsonl")),
                Duration::from_millis(25)
            ))
        );
        for flags in [
            &["--reconcile-delay-ms", "60001"][..],
            &["--reconcile-delay-ms", "-1"],
            &["--reconcile-log"],
        ] {
            assert!(run(flags).is_err(), "{flags:?} was accepted");
        }
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
        let backend = |flags: &[&str]| run(flags).ok().map(|args| args.backend);
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
        assert!(err.is_some_and(|e| e.to_string().contains("--features etcd")));
    }

    #[test]
    fn bad_flags_are_usage_errors_naming_the_flag() {
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
            &["--listen", "localhost"],
            &["--listen", "127.0.0.1"],
            &["--verbose"],
            &["sets"],
        ] {
            let err = run(flags).err();
            assert!(
                err.as_ref().is_some_and(|e| e.exit_code() == 2),
                "{flags:?} was accepted or not a usage error: {err:?}"
            );
        }
        let err = run(&["--sets", "0"]).err().map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| e.contains("--sets")),
            "the error names the flag"
        );
    }

    #[test]
    fn help_wins_and_lists_every_flag() {
        let err = run(&["--sets", "1", "--help"]).err();
        assert!(err
            .as_ref()
            .is_some_and(|e| e.kind() == ErrorKind::DisplayHelp));
        let help = Cli::command().render_long_help().to_string();
        for flag in [
            "--sets",
            "--max-replicas",
            "--workers",
            "--duration-secs",
            "--seed",
            "--chaos",
            "--quiet",
            "--etcd",
            "--etcd-prefix",
            "--leader-elect",
            "--identity",
            "--lease-secs",
            "--listen",
            "--shard",
            "--user",
            "--members",
            "--reconcile-log",
            "--reconcile-delay-ms",
        ] {
            assert!(help.contains(flag), "--help lacks {flag}");
        }
    }
}
