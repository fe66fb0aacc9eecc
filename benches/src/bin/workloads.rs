//! The workload runner: runs the workloads of `benches/WORKLOADS.md` for kcache and the
//! implementations it is compared with, each run in a fresh child process, and prints one JSON
//! line per run and one summary line per (workload, implementation). Run with `--help` for the
//! usage.

use kcache_benches::report;
use kcache_benches::rss::{cpu_time_ms, peak_rss_mib};
use kcache_benches::stats::median;
use kcache_benches::workloads::{
    r1_write_snapshot, registry, select, Workload, R1_WRITE_SNAPSHOT_FLAG,
};
use kcache_core::{Clock, SystemClock};
use serde_json::{Map, Value};
use std::io::Read;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

const USAGE: &str = "\
usage: workloads <selector> [--impl NAME] [--runs N] [--timeout SECS]
                 [--report FILE [--note TEXT]...]

Runs each (workload, impl, run) in a fresh child process of this binary, implementations
interleaved (run 1 of each, then run 2, ...), and prints the child's JSON line
{\"workload\",\"impl\",\"run\",...metrics...,\"cpu_ms\",\"peak_rss_mib\"}; then one summary line per
(workload, impl) with the median of every metric and, for impls other than kcache,
\"kcache_ahead_by\" on the headline metric: how many times better kcache's figure is (the impl's /
kcache's for a cost, kcache's / the impl's for a rate ending in per_s; above 1: kcache ahead).
\"cpu_ms\" is the child's whole CPU time (input building included, 10 ms resolution): far below
wall time x threads means the machine was busy with other work. Exits 1 if any run failed its
check (wrong count or final state), crashed or timed out; 2 on a usage error.

The workloads, their inputs, metrics, checks and implementations are defined in
benches/WORKLOADS.md, with client-go's figures and where they come from.

  <selector>      a workload name below, `all`, a prefix such as `q4limiter` (all its variants),
                  or several of these joined by commas (`e1,m1,m2`)
  --impl NAME     only this implementation (ratios need kcache in the same invocation)
  --runs N        runs per (workload, impl), default 5
  --timeout SECS  kill a run after this long, default 300
  --report FILE   also write a Markdown report to FILE (BENCHMARKS.md) with an SVG bar chart per
                  workload and one of kcache against client-go's figures, in a folder beside it
                  named after it (benchmarks/), stamped with the machine, date and command
  --note TEXT     a paragraph for the report's header (repeatable)

Implementations: kcache; naive (client-go's design ported as it is); floor (the hand-off alone:
a crossbeam channel, no dedup); floor-dedup (q1: the floor behind a sharded set, the least a
deduplicating queue does); plain (q5: kcache's plain queue, one priority); rwlock-hashmap
(client-go's thread-safe store as it is); kube-runtime (its reflector store, for the operations it
has); kube-runtime-shared (e1: its shared store with 2 subscribers); kcache-unbatched (e1:
the kcache informer with batch_size(1), every change applied and handed to the handlers
alone); memory-source (e1-memory: the source's writes alone).

Workloads (name, what it does, headline metric, implementations):";

struct Options {
    workloads: Vec<Workload>,
    only_impl: Option<String>,
    runs: u32,
    timeout: Duration,
    report: Option<std::path::PathBuf>,
    notes: Vec<String>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(R1_WRITE_SNAPSHOT_FLAG) {
        // r1's warm run writes its snapshot in a process of its own (see workloads/r1.rs).
        let Some(path) = args.get(1) else {
            eprintln!("workloads: {R1_WRITE_SNAPSHOT_FLAG} needs a path");
            return ExitCode::from(2);
        };
        return match r1_write_snapshot(std::path::Path::new(path)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                eprintln!("workloads: {msg}");
                ExitCode::FAILURE
            }
        };
    }
    match parse(&args) {
        Ok(Some(opts)) => parent(&opts),
        Ok(None) => {
            print_usage();
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("workloads: {msg} (see --help)");
            ExitCode::from(2)
        }
    }
}

fn print_usage() {
    println!("{USAGE}");
    for w in registry() {
        println!("  {:<18} {}", w.name, w.about);
        println!(
            "  {:<18} headline {}; {}",
            "",
            w.headline,
            w.impls.join(", ")
        );
    }
}

/// The options, or `None` for `--help`.
fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let (mut selector, mut only_impl, mut runs, mut timeout) = (None, None, 5, 300);
    let (mut report, mut notes) = (None, Vec::new());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--impl" => only_impl = Some(value("--impl")?),
            "--runs" => {
                runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?
            }
            "--timeout" => {
                timeout = value("--timeout")?
                    .parse()
                    .map_err(|e| format!("--timeout: {e}"))?;
            }
            "--report" => report = Some(value("--report")?.into()),
            "--note" => notes.push(value("--note")?),
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            name if selector.is_none() => selector = Some(name.to_string()),
            extra => return Err(format!("unexpected argument {extra}")),
        }
    }
    let selector = selector.ok_or("no workload given")?;
    let workloads = select(&selector);
    if workloads.is_empty() {
        return Err(format!("no workload named {selector}"));
    }
    if let Some(name) = &only_impl {
        if !workloads.iter().any(|w| w.impls.contains(&name.as_str())) {
            return Err(format!("no selected workload has an implementation {name}"));
        }
    }
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(Some(Options {
        workloads,
        only_impl,
        runs,
        timeout: Duration::from_secs(timeout),
        report,
        notes,
    }))
}

/// `--child <workload> <impl> <run>`: runs once in this process and prints the JSON line.
fn child(args: &[String]) -> ExitCode {
    let [workload, imp, run] = args else {
        eprintln!("workloads: --child needs <workload> <impl> <run>");
        return ExitCode::from(2);
    };
    let Some(w) = registry().into_iter().find(|w| w.name == workload.as_str()) else {
        eprintln!("workloads: no workload named {workload}");
        return ExitCode::from(2);
    };
    if !w.impls.contains(&imp.as_str()) {
        eprintln!("workloads: workload {workload} has no implementation {imp}");
        return ExitCode::from(2);
    }
    let Ok(run) = run.parse::<u64>() else {
        eprintln!("workloads: bad run number {run}");
        return ExitCode::from(2);
    };
    let result = (w.run)(w.name, imp).and_then(|mut m| {
        m.push(("cpu_ms", cpu_time_ms()?));
        m.push(("peak_rss_mib", peak_rss_mib()?));
        Ok(m)
    });
    match result {
        Ok(metrics) => {
            println!("{}", json_line(workload, imp, Value::from(run), &metrics));
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("workloads: {workload}/{imp} run {run}: WRONG ANSWER: {msg}");
            ExitCode::from(3)
        }
    }
}

/// One JSON object on one line, metrics in their order, floats rounded to 3 decimals.
fn json_line(workload: &str, imp: &str, run: Value, metrics: &[(impl AsRef<str>, f64)]) -> String {
    let mut out = format!(
        "{{\"workload\":{},\"impl\":{},\"run\":{run}",
        Value::from(workload),
        Value::from(imp)
    );
    for (name, v) in metrics {
        let r = (v * 1000.0).round() / 1000.0;
        // Whole numbers print as integers; non-finite values as null.
        let v = if r.fract() == 0.0 && r.abs() < 1e15 {
            Value::from(r as i64)
        } else {
            Value::from(r)
        };
        out.push_str(&format!(",{}:{v}", Value::from(name.as_ref())));
    }
    out.push('}');
    out
}

/// The metrics of one run, in the order the child printed them.
fn parse_metrics(line: &str) -> Result<Named, String> {
    let obj: Map<String, Value> =
        serde_json::from_str(line).map_err(|e| format!("bad JSON line {line:?}: {e}"))?;
    let mut metrics: Vec<(usize, String, f64)> = obj
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "workload" | "impl" | "run"))
        .map(|(k, v)| {
            (
                line.find(&format!("\"{k}\":")).unwrap_or(usize::MAX),
                k.clone(),
                v.as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect();
    metrics.sort_by_key(|m| m.0);
    Ok(metrics.into_iter().map(|(_, k, v)| (k, v)).collect())
}

/// Runs one child to completion (or kills it at `timeout`); its JSON line or a message.
fn run_child(workload: &str, imp: &str, run: u32, timeout: Duration) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut child = Command::new(exe)
        .args(["--child", workload, imp, &run.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start a child: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no child stdout")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let clock = SystemClock;
    let deadline = clock.now() + timeout;
    let status = loop {
        match child
            .try_wait()
            .map_err(|e| format!("waiting for the child: {e}"))?
        {
            Some(status) => break status,
            None if clock.now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {timeout:?}"));
            }
            None => clock.sleep(Duration::from_millis(5)),
        }
    };
    let out = reader
        .join()
        .map_err(|_| "the stdout reader panicked".to_string())?
        .map_err(|e| format!("reading the child's output: {e}"))?;
    if !status.success() {
        return Err(format!("child failed ({status})"));
    }
    out.lines()
        .last()
        .map(str::to_string)
        .ok_or_else(|| "child printed nothing".to_string())
}

/// Metrics by name, in print order (as parsed back from a child's line).
type Named = Vec<(String, f64)>;

/// Metrics of the runs of one (workload, impl).
struct Runs {
    workload: Workload,
    imp: &'static str,
    runs: Vec<Named>,
}

fn parent(opts: &Options) -> ExitCode {
    let mut failed = 0;
    let mut summaries = Vec::new();
    for w in &opts.workloads {
        let impls: Vec<&'static str> = w
            .impls
            .iter()
            .copied()
            .filter(|i| opts.only_impl.as_deref().is_none_or(|only| only == *i))
            .collect();
        let mut all: Vec<Runs> = impls
            .iter()
            .map(|&imp| Runs {
                workload: *w,
                imp,
                runs: Vec::new(),
            })
            .collect();
        for run in 1..=opts.runs {
            for r in &mut all {
                match run_child(w.name, r.imp, run, opts.timeout)
                    .and_then(|l| Ok((parse_metrics(&l)?, l)))
                {
                    Ok((metrics, line)) => {
                        println!("{line}");
                        r.runs.push(metrics);
                    }
                    Err(msg) => {
                        eprintln!("workloads: {}/{} run {run} FAILED: {msg}", w.name, r.imp);
                        failed += 1;
                    }
                }
            }
        }
        summaries.extend(all);
    }
    for s in &summaries {
        if let Some(line) = summary_line(s, &summaries) {
            println!("{line}");
        }
    }
    if let Some(path) = &opts.report {
        if let Err(msg) = write_report(path, opts, &summaries, failed) {
            eprintln!("workloads: writing the report: {msg}");
            return ExitCode::FAILURE;
        }
    }
    if failed > 0 {
        eprintln!("workloads: {failed} run(s) failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Writes the Markdown report and its charts (see `kcache_benches::report`).
fn write_report(
    path: &std::path::Path,
    opts: &Options,
    summaries: &[Runs],
    failed: usize,
) -> Result<(), String> {
    let rows: Vec<report::Summary> = summaries
        .iter()
        .filter(|s| !s.runs.is_empty())
        .map(|s| report::Summary {
            workload: s.workload.name.to_string(),
            headline: s.workload.headline.to_string(),
            imp: s.imp.to_string(),
            runs: s.runs.len(),
            medians: medians(s),
        })
        .collect();
    // The command as a reader would type it again (arguments with spaces quoted).
    let args: Vec<String> = std::env::args()
        .skip(1)
        .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
        .collect();
    let profile = if cfg!(debug_assertions) {
        ""
    } else {
        "--release "
    };
    let command = format!(
        "cargo run {profile}-p kcache-benches --bin workloads -- {}",
        args.join(" ")
    );
    let mut notes = opts.notes.clone();
    if cfg!(debug_assertions) {
        notes.push("**A debug build made these figures: they say nothing about speed.**".into());
    }
    let report = report::Report {
        command: &command,
        runs: opts.runs,
        summaries: &rows,
        failed,
        notes: &notes,
    };
    for file in report::write(&report, path)? {
        eprintln!("workloads: wrote {}", file.display());
    }
    Ok(())
}

/// The medians of `s`'s metrics, in the first run's order.
fn medians(s: &Runs) -> Named {
    let Some(first) = s.runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|(name, _)| {
            let values: Vec<f64> = s
                .runs
                .iter()
                .filter_map(|m| m.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
                .collect();
            (name.clone(), median(&values).unwrap_or(f64::NAN))
        })
        .collect()
}

fn summary_line(s: &Runs, all: &[Runs]) -> Option<String> {
    let mut m = medians(s);
    if m.is_empty() {
        return None;
    }
    let headline = |m: &Named| {
        m.iter()
            .find(|(n, _)| n == s.workload.headline)
            .map(|(_, v)| *v)
    };
    if s.imp != "kcache" {
        let kcache = all
            .iter()
            .find(|k| k.workload.name == s.workload.name && k.imp == "kcache");
        if let (Some(mine), Some(base)) = (
            headline(&m),
            kcache.map(medians).as_ref().and_then(headline),
        ) {
            if let Some(r) = report::ahead_by(s.workload.headline, base, mine) {
                m.push(("kcache_ahead_by".to_string(), r));
            }
        }
    }
    m.insert(0, ("runs".to_string(), s.runs.len() as f64));
    Some(json_line(s.workload.name, s.imp, Value::from("median"), &m))
}
