//! What each table and chart of the report puts side by side: kcache, client-go's figures, the
//! peers, the baselines and the floor.

use super::chart::{bar_chart, short, Bar, BarKind};
use super::ratio::{ahead_by, format_ratio, higher_is_better};
use super::reference::{client_go, client_go_figures, ClientGoFigure, CLIENT_GO_LABEL};
use super::Summary;
use std::fmt::Write as _;

/// Workload names in first-seen order.
pub(super) fn workloads(summaries: &[Summary]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in summaries {
        if !names.contains(&s.workload) {
            names.push(s.workload.clone());
        }
    }
    names
}

fn kind(imp: &str) -> BarKind {
    match imp {
        "kcache" => BarKind::Kcache,
        "floor" | "floor-dedup" | "memory-source" => BarKind::Floor,
        _ => BarKind::Peer,
    }
}

/// The unit a metric is counted in, read off its name (charts put only one unit on an axis).
fn unit(metric: &str) -> &str {
    if metric.contains("bytes") {
        "bytes"
    } else if metric.ends_with("per_s") {
        "per s"
    } else if metric.ends_with("_ms") {
        "ms"
    } else if metric.starts_with("ns_") || metric.ends_with("_ns") || metric.contains("_ns_") {
        "ns"
    } else {
        metric
    }
}

/// A workload's chart: its title, the value axis and the bars.
pub(super) struct WorkloadChart {
    pub(super) title: String,
    pub(super) axis: String,
    pub(super) bars: Vec<Bar>,
}

/// The chart of one workload: the headline metric of every implementation with client-go's figure
/// beside kcache's, and, where client-go has figures for other metrics in the headline's unit
/// (f1's replace, pop and update; i1's add, update and `by_index`), those too, grouped by metric.
pub(super) fn workload_chart(workload: &str, rows: &[&Summary]) -> WorkloadChart {
    let headline = rows.first().map_or("", |s| s.headline.as_str());
    let mut metrics = vec![headline];
    for f in client_go_figures(workload) {
        let charted = f.metric != headline
            && unit(f.metric) == unit(headline)
            && rows.iter().any(|s| s.get(f.metric).is_some());
        if charted {
            metrics.push(f.metric);
        }
    }
    let grouped = metrics.len() > 1;
    let label = |metric: &str, who: &str| {
        if grouped {
            format!("{metric}: {who}")
        } else {
            who.to_string()
        }
    };
    let mut bars = Vec::new();
    for metric in &metrics {
        for s in rows {
            if let Some(value) = s.get(metric) {
                bars.push(Bar {
                    label: label(metric, &s.imp),
                    value,
                    kind: kind(&s.imp),
                });
            }
            if s.imp == "kcache" {
                if let Some(f) = client_go(workload, metric) {
                    bars.push(Bar {
                        label: label(metric, CLIENT_GO_LABEL),
                        value: f.client_go,
                        kind: BarKind::Recorded,
                    });
                }
            }
        }
    }
    let better = if higher_is_better(headline) {
        "higher is better"
    } else {
        "lower is better"
    };
    let (title, axis) = if grouped {
        let names = metrics.join(", ");
        (
            format!("{workload}: {names}"),
            format!("{} ({better})", unit(headline)),
        )
    } else {
        (
            format!("{workload}: {headline}"),
            format!("{headline} ({better})"),
        )
    };
    WorkloadChart { title, axis, bars }
}

/// One row of the comparison with client-go: the figure, kcache's of this run, the ratios.
struct AgainstClientGo<'a> {
    figure: &'a ClientGoFigure,
    now: f64,
}

impl AgainstClientGo<'_> {
    fn ahead_now(&self) -> Option<f64> {
        ahead_by(self.figure.metric, self.now, self.figure.client_go)
    }

    fn ahead_then(&self) -> Option<f64> {
        let then = self.figure.kcache?;
        ahead_by(self.figure.metric, then, self.figure.client_go)
    }
}

/// Every client-go figure of a workload kcache ran in this report, with kcache's figure.
fn against_client_go(summaries: &[Summary]) -> Vec<AgainstClientGo<'static>> {
    summaries
        .iter()
        .filter(|s| s.imp == "kcache")
        .flat_map(|s| {
            client_go_figures(&s.workload).filter_map(|figure| {
                s.get(figure.metric)
                    .map(|now| AgainstClientGo { figure, now })
            })
        })
        .collect()
}

/// The headline chart: kcache ahead of client-go by, per figure, for this run and (where the
/// sitting recorded kcache's figure) side by side. `None` when no figure compares.
pub(super) fn headline_chart(summaries: &[Summary]) -> Result<Option<String>, String> {
    let mut bars = Vec::new();
    for row in against_client_go(summaries) {
        let name = format!("{} {}", row.figure.workload, row.figure.metric);
        if let Some(r) = row.ahead_now() {
            bars.push(Bar {
                label: format!("{name}: this run"),
                value: r,
                kind: BarKind::Kcache,
            });
        }
        if let Some(r) = row.ahead_then() {
            bars.push(Bar {
                label: format!("{name}: side by side"),
                value: r,
                kind: BarKind::Recorded,
            });
        }
    }
    if bars.is_empty() {
        return Ok(None);
    }
    let title = "kcache ahead of client-go by (above 1: kcache ahead)";
    bar_chart(title, "times", &bars, Some(1.0)).map(Some)
}

/// The table under the headline chart.
pub(super) fn headline_table(summaries: &[Summary]) -> String {
    let mut md = String::from(
        "| workload | metric | client-go | kcache, side by side | ahead by, side by side \
         | kcache, this run | ahead by, this run |\n|---|---|---:|---:|---:|---:|---:|\n",
    );
    let ratio = |r: Option<f64>| r.map_or(String::new(), format_ratio);
    for row in against_client_go(summaries) {
        let f = row.figure;
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {} | {} |",
            f.workload,
            f.metric,
            short(f.client_go),
            f.kcache.map_or(String::new(), short),
            ratio(row.ahead_then()),
            short(row.now),
            ratio(row.ahead_now()),
        );
    }
    md
}

/// A column of a workload's table: an implementation measured in this run, or client-go's
/// figures.
enum Column<'a> {
    Measured(&'a Summary),
    ClientGo(&'a str),
}

impl Column<'_> {
    fn name(&self) -> &str {
        match self {
            Column::Measured(s) => &s.imp,
            Column::ClientGo(_) => CLIENT_GO_LABEL,
        }
    }

    fn get(&self, metric: &str) -> Option<f64> {
        match self {
            Column::Measured(s) => s.get(metric),
            Column::ClientGo(workload) => client_go(workload, metric).map(|f| f.client_go),
        }
    }

    fn runs(&self) -> usize {
        match self {
            Column::Measured(s) => s.runs,
            // Each of client-go's figures is the median of 5 processes.
            Column::ClientGo(_) => 5,
        }
    }
}

/// One row per metric, one column per implementation (client-go's figures beside kcache's where
/// the workload has any), then how far kcache is ahead of each column on the headline metric.
pub(super) fn metrics_table(workload: &str, rows: &[&Summary]) -> String {
    let with_client_go = client_go_figures(workload).next().is_some();
    let mut columns: Vec<Column<'_>> = Vec::new();
    for s in rows {
        columns.push(Column::Measured(s));
        if s.imp == "kcache" && with_client_go {
            columns.push(Column::ClientGo(workload));
        }
    }
    let mut md = String::from("| metric |");
    for c in &columns {
        let _ = write!(md, " {} |", c.name());
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(columns.len()));
    md.push('\n');
    let mut metrics: Vec<&str> = Vec::new();
    for s in rows {
        for (name, _) in &s.medians {
            if !metrics.contains(&name.as_str()) {
                metrics.push(name);
            }
        }
    }
    for metric in &metrics {
        let _ = write!(md, "| `{metric}` |");
        for c in &columns {
            let _ = write!(md, " {} |", c.get(metric).map_or(String::new(), short));
        }
        md.push('\n');
    }
    let headline = rows.first().map_or("", |s| s.headline.as_str());
    let kcache = rows
        .iter()
        .find(|s| s.imp == "kcache")
        .and_then(|s| s.get(headline));
    if let Some(k) = kcache {
        md.push_str("| kcache ahead by |");
        for c in &columns {
            let cell = match c {
                Column::Measured(s) if s.imp == "kcache" => "·".to_string(),
                _ => c
                    .get(headline)
                    .and_then(|v| ahead_by(headline, k, v))
                    .map_or(String::new(), format_ratio),
            };
            let _ = write!(md, " {cell} |");
        }
        md.push('\n');
    }
    md.push_str("| runs |");
    for c in &columns {
        let _ = write!(md, " {} |", c.runs());
    }
    md.push('\n');
    md
}
