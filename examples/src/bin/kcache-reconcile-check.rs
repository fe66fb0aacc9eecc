//! `kcache-reconcile-check`: checks the demo's `--reconcile-log` files for reconciles of one key
//! by two replicas at once, and reports per-replica counts and how long the keys of a killed or
//! stopped replica waited for another one. Exit status: 0 when the checks pass, 1 when one fails,
//! 2 for bad flags or unreadable logs.

use clap::Parser;
use kcache_demo::reconcile_check::{parse_line, rate_in, takeover, Analysis, Interval, Secs};
use std::path::PathBuf;
use std::process::ExitCode;

/// Checks kcache-demo reconcile logs: no two reconciles of one key from different replicas may
/// overlap in time.
#[derive(Parser, Debug)]
#[command(name = "kcache-reconcile-check", version, max_term_width = 100)]
struct Cli {
    /// The logs (JSON lines {"key","replica","start_ns","end_ns"}), one per replica or merged.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// Replicas that must each have reconciled at least one key (comma-separated).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    replicas: Vec<String>,
    /// A replica killed at NS nanoseconds since the Unix epoch: report how long its keys waited
    /// until another replica finished reconciling them (repeatable).
    #[arg(long, value_name = "NAME@NS", value_parser = departure)]
    killed: Vec<(String, u64)>,
    /// A replica stopped gracefully at NS: the same report (repeatable).
    #[arg(long, value_name = "NAME@NS", value_parser = departure)]
    stopped: Vec<(String, u64)>,
    /// Fail if a key of a --killed replica waited longer than MS milliseconds plus one reconcile
    /// (the longest in the logs) until another replica had reconciled it (keys never
    /// reconciled again, such as sets deleted before the kill, are only counted).
    #[arg(long, value_name = "MS")]
    max_wait_ms: Option<u64>,
    /// With --max-wait-ms: fail only past the bound plus MS milliseconds (a wait within the
    /// slack is reported as over the bound, not failed): the handover's own store round trips
    /// (a write and a list to see the expiry, another to publish the new view) take tens of
    /// milliseconds each on a loaded machine.
    #[arg(long, value_name = "MS", default_value_t = 0, requires = "max_wait_ms")]
    slack_ms: u64,
    /// Also report the reconciles started within FROM..TO (nanoseconds since the Unix epoch)
    /// per second of that window, in all and per replica (benchmark s1).
    #[arg(long, value_name = "FROM:TO", value_parser = window)]
    window: Option<(u64, u64)>,
}

fn window(value: &str) -> Result<(u64, u64), String> {
    let (from, to) = value
        .split_once(':')
        .ok_or_else(|| "expected FROM:TO".to_owned())?;
    let parse = |v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("{v:?} is not nanoseconds"))
    };
    let (from, to) = (parse(from)?, parse(to)?);
    if from >= to {
        return Err("FROM must be before TO".into());
    }
    Ok((from, to))
}

fn departure(value: &str) -> Result<(String, u64), String> {
    let (name, ns) = value
        .rsplit_once('@')
        .ok_or_else(|| "expected NAME@NS".to_owned())?;
    let ns = ns
        .parse()
        .map_err(|_| format!("{ns:?} is not nanoseconds since the Unix epoch"))?;
    if name.is_empty() {
        return Err("expected NAME@NS".into());
    }
    Ok((name.to_owned(), ns))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut intervals: Vec<Interval> = Vec::new();
    for path in &cli.logs {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!(
                    "kcache-reconcile-check: cannot read {}: {e}",
                    path.display()
                );
                return ExitCode::from(2);
            }
        };
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            match parse_line(line) {
                Ok(i) => intervals.push(i),
                Err(e) => {
                    eprintln!("kcache-reconcile-check: {}:{}: {e}", path.display(), n + 1);
                    return ExitCode::from(2);
                }
            }
        }
    }
    let a = Analysis::new(&intervals);
    let mut failed = Vec::new();
    println!(
        "reconcile-check: {} reconciles of {} keys by {} replicas over {} ({:.1} reconciles/s)",
        a.reconciles,
        a.keys,
        a.replicas.len(),
        Secs(a.span_ns),
        a.per_second()
    );
    println!("  longest reconcile {}", Secs(a.longest_ns));
    for (name, c) in &a.replicas {
        println!(
            "  replica {name}: {} reconciles of {} keys",
            c.reconciles, c.keys
        );
    }
    if let Some((from, to)) = cli.window {
        let (per, rate) = rate_in(&intervals, from, to);
        let each: Vec<String> = per.iter().map(|(r, n)| format!("{r} {n}")).collect();
        println!(
            "  window of {}: {rate:.1} reconciles/s started ({})",
            Secs(to - from),
            each.join(", ")
        );
    }
    for name in &cli.replicas {
        if !a.replicas.contains_key(name) {
            failed.push(format!("replica {name} reconciled nothing"));
        }
    }
    println!(
        "  overlaps: {} between replicas, {} within one replica",
        a.overlaps.len(),
        a.self_overlaps.len()
    );
    for o in a.overlaps.iter().chain(&a.self_overlaps).take(10) {
        println!("    {} overlaps {}", o.first, o.second);
    }
    if !a.overlaps.is_empty() {
        failed.push(format!(
            "{} overlapping reconciles between replicas",
            a.overlaps.len()
        ));
    }
    if !a.self_overlaps.is_empty() {
        failed.push(format!(
            "{} overlapping reconciles within one replica",
            a.self_overlaps.len()
        ));
    }
    let departures = cli
        .killed
        .iter()
        .map(|d| (d, true))
        .chain(cli.stopped.iter().map(|d| (d, false)));
    for ((name, at), killed) in departures {
        let t = takeover(&intervals, name, *at);
        let how = if killed { "killed" } else { "stopped" };
        let waits = match (t.median_ns(), t.max_ns()) {
            (Some(p50), Some(max)) => format!(
                "waited until reconciled median {}, max {} ({}); until a reconcile started max {}",
                Secs(p50),
                Secs(max),
                t.waits.last().map(|w| w.key.as_str()).unwrap_or_default(),
                Secs(t.max_start_ns().unwrap_or(0))
            ),
            _ => "none reconciled".to_owned(),
        };
        println!(
            "  {how} {name}: {} of its {} keys reconciled by another replica afterwards ({} never \
             again: deleted, or nothing to do), {waits}",
            t.waits.len(),
            t.keys,
            t.keys - t.waits.len() as u64
        );
        if let (true, Some(limit)) = (killed, cli.max_wait_ms) {
            let limit_ns = limit.saturating_mul(1_000_000).saturating_add(a.longest_ns);
            let max = t.max_ns().unwrap_or(0);
            let verdict = if max <= limit_ns {
                "within it".to_owned()
            } else {
                format!("over it by {}", Secs(max - limit_ns))
            };
            println!(
                "  bound for {name}'s keys: {limit} ms + one reconcile = {}; the last one waited {}, {verdict}",
                Secs(limit_ns),
                Secs(max)
            );
            let slack_ns = cli.slack_ms.saturating_mul(1_000_000);
            if max > limit_ns.saturating_add(slack_ns) {
                failed.push(format!(
                    "a key of {name} waited longer than {limit} ms + one reconcile (+ {} ms slack) for another replica",
                    cli.slack_ms
                ));
            }
        }
    }
    if failed.is_empty() {
        println!("reconcile-check: OK");
        ExitCode::SUCCESS
    } else {
        for f in &failed {
            println!("  problem: {f}");
        }
        println!("reconcile-check: FAILED");
        ExitCode::FAILURE
    }
}
