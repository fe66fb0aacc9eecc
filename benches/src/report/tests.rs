use super::*;

fn summary(workload: &str, imp: &str, headline: &str, medians: &[(&str, f64)]) -> Summary {
    let mut medians: Vec<(String, f64)> =
        medians.iter().map(|(m, v)| (m.to_string(), *v)).collect();
    medians.push(("peak_rss_mib".into(), 12.5));
    Summary {
        workload: workload.into(),
        headline: headline.into(),
        imp: imp.into(),
        runs: 3,
        medians,
    }
}

fn sample() -> Vec<Summary> {
    vec![
        summary("q1", "kcache", "ns_per_item", &[("ns_per_item", 276.0)]),
        summary("q1", "naive", "ns_per_item", &[("ns_per_item", 711.0)]),
        summary("q1", "floor", "ns_per_item", &[("ns_per_item", 65.0)]),
        summary(
            "f1",
            "kcache",
            "replace_ns_per_object",
            &[
                ("replace_ns_per_object", 424.0),
                ("pop_ns", 570.0),
                ("update_ns", 312.0),
                ("pops", 10_100.0),
            ],
        ),
        summary("e1", "kcache", "events_per_s", &[("events_per_s", 0.75e6)]),
        summary(
            "e1",
            "kube-runtime",
            "events_per_s",
            &[("events_per_s", 1.5e6)],
        ),
        summary(
            "e1",
            "kube-runtime-shared",
            "events_per_s",
            &[("events_per_s", 0.15e6)],
        ),
    ]
}

fn stamp() -> Stamp {
    Stamp {
        machine: "Intel(R) Xeon(R) Processor, 2 cores available, 23.5 GiB RAM, Debian GNU/Linux \
                  12 (bookworm), load average 1.61 over the last 5 minutes when the report was \
                  written"
            .into(),
        date: "2026-12-06 05:00 UTC".into(),
    }
}

fn rendered(notes: &[String]) -> Rendered {
    let summaries = sample();
    let report = Report {
        command: "cargo run --release -p kcache-benches --bin workloads -- all --runs 5 --report \
                  BENCHMARKS.md --note 'Measured on a quiet machine after the last commit, with \
                  nothing else running.'",
        runs: 5,
        summaries: &summaries,
        failed: 0,
        notes,
    };
    render(&report, &stamp(), "benchmarks").unwrap()
}

/// The row of `md`'s table under `heading` whose first cell is `first`, as its cells.
fn row(md: &str, heading: &str, first: &str) -> Vec<String> {
    let section = md.split(heading).nth(1).unwrap_or_default();
    let line = section
        .lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("no row {first} under {heading}:\n{md}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn every_paragraph_and_the_command_fit_in_100_columns() {
    let note = "A note that goes on for a long while, as notes given with --note do when someone \
                explains the state of the machine, what else was running, and why the figures \
                of this report should be read with care."
        .to_string();
    let md = rendered(std::slice::from_ref(&note)).markdown;
    let prose: Vec<&str> = md.lines().filter(|l| !l.starts_with('|')).collect();
    for line in &prose {
        assert!(
            line.chars().count() <= WIDTH,
            "{} columns: {line}",
            line.len()
        );
    }
    // Wrapped, not cut: the note and the command are there whole.
    let words = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert!(words(&md).join(" ").contains(&words(&note).join(" ")));
    assert!(md.contains("```sh\ncargo run --release -p kcache-benches --bin workloads -- all"));
    assert!(
        md.contains(" \\\n    --note 'Measured on a quiet machine"),
        "{md}"
    );
}

#[test]
fn kcache_ahead_by_is_above_one_when_kcache_is_ahead_for_costs_and_rates() {
    let md = rendered(&[]).markdown;
    // q1 is a cost: kcache took 276 ns/item; client-go 381, naive 711, the floor 65.
    let q1 = row(&md, "### q1:", "kcache ahead by");
    assert_eq!(q1, ["kcache ahead by", "·", "1.38x", "2.58x", "0.24x"]);
    // e1 is a rate: kube-runtime's bare store did twice kcache's events/s, the shared store a
    // fifth of it.
    let e1 = row(&md, "### e1:", "kcache ahead by");
    assert_eq!(e1, ["kcache ahead by", "·", "0.50x", "5.00x"]);
    let flat = md.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("**kcache ahead by**, in every table and chart below"));
}

#[test]
fn client_go_figures_are_the_side_by_side_ones_with_that_sittings_ratio() {
    let md = rendered(&[]).markdown;
    // client-go 381 ns/item; kcache 129 in the same sitting (2.95x), 276 in this run (1.38x).
    let q1 = row(&md, "## kcache against client-go", "q1");
    assert_eq!(
        q1,
        ["q1", "`ns_per_item`", "381", "129", "2.95x", "276", "1.38x"]
    );
    // f1 has no kcache figure from the sitting: this run's ratio alone.
    let f1 = row(&md, "## kcache against client-go", "f1");
    assert_eq!(f1[..4], ["f1", "`replace_ns_per_object`", "1185", ""]);
    assert_eq!(f1[6], "2.79x");
    let flat = md.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("client-go v0.36.3 (unmodified, built with Go 1.27.3), measured side"));
    assert!(
        !md.contains("552"),
        "the superseded figure is quoted:\n{md}"
    );
    // The per-workload table has client-go's column beside kcache's.
    let header = row(&md, "### q1:", "metric");
    assert_eq!(header[1..3], ["kcache", CLIENT_GO_LABEL]);
}

#[test]
fn f1s_chart_puts_kcache_and_client_go_side_by_side_on_each_measure() {
    let summaries = sample();
    let rows: Vec<&Summary> = summaries.iter().filter(|s| s.workload == "f1").collect();
    let chart = compare::workload_chart("f1", &rows);
    let bars: Vec<(&str, f64)> = chart
        .bars
        .iter()
        .map(|b| (b.label.as_str(), b.value))
        .collect();
    let go = CLIENT_GO_LABEL;
    assert_eq!(
        bars,
        [
            ("replace_ns_per_object: kcache", 424.0),
            (&format!("replace_ns_per_object: {go}") as &str, 1185.0),
            ("pop_ns: kcache", 570.0),
            (&format!("pop_ns: {go}"), 825.0),
            ("update_ns: kcache", 312.0),
            (&format!("update_ns: {go}"), 898.0),
        ]
    );
    assert_eq!(chart.axis, "ns (lower is better)");
    // A workload whose figures share no unit with client-go's keeps one bar per implementation.
    let rows: Vec<&Summary> = summaries.iter().filter(|s| s.workload == "q1").collect();
    let labels: Vec<String> = compare::workload_chart("q1", &rows)
        .bars
        .into_iter()
        .map(|b| b.label)
        .collect();
    assert_eq!(labels, ["kcache", go, "naive", "floor"]);
}

#[test]
fn a_report_has_its_command_tables_and_charts_on_disk() {
    let dir = std::env::temp_dir().join(format!("kcache-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let summaries = sample();
    let report = Report {
        command: "workloads q1,f1,e1 --runs 3 --report BENCH.md",
        runs: 3,
        summaries: &summaries,
        failed: 1,
        notes: &["A note.".to_string()],
    };
    let written = write(&report, &dir.join("BENCH.md")).unwrap();
    let md = std::fs::read_to_string(dir.join("BENCH.md")).unwrap();
    assert!(md.contains("```sh\nworkloads q1,f1,e1 --runs 3 --report BENCH.md\n```"));
    assert!(md.contains("A note."));
    assert!(md.contains("**1 run(s) failed**"));
    assert!(md.contains("![q1](bench/q1.svg)"));
    assert!(md.contains("![kcache against client-go](bench/headline.svg)"));
    assert!(md.contains("### e1: `events_per_s` (higher is better)"));
    for f in ["q1", "f1", "e1", "headline"] {
        let svg = std::fs::read_to_string(dir.join(format!("bench/{f}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{f}");
    }
    assert_eq!(written.len(), 5);
    let _ = std::fs::remove_dir_all(&dir);
}
