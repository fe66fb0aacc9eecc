//! The Markdown report of a workload run: `workloads <selector> --report BENCHMARKS.md` writes the
//! medians of every (workload, implementation) as tables, one SVG bar chart per workload (kcache,
//! client-go's figure where there is one, the peers, the floor) and a headline chart of kcache
//! against client-go, with the machine, the date and the command that made them. Paragraphs are
//! wrapped to [`WIDTH`] columns, and every ratio is [`ahead_by`]: how many times better kcache's
//! figure is, above 1 whenever kcache is ahead.
//!
//! The charts go to a folder beside the report named after it in lower case (`BENCHMARKS.md` →
//! `benchmarks/`), linked relatively, so the report reads on any Markdown viewer of the
//! repository. [`render`] builds the report without touching the disk; [`write()`] saves it.

mod chart;
mod compare;
mod ratio;
mod reference;
mod text;

pub use chart::{bar_chart, short, Bar, BarKind};
pub use ratio::{ahead_by, format_ratio, higher_is_better};
pub use reference::{
    client_go, client_go_figures, machine, now_utc, ClientGoFigure, CLIENT_GO, CLIENT_GO_LABEL,
    CLIENT_GO_PROVENANCE,
};
pub use text::{wrap, WIDTH};

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The medians of one (workload, implementation) over its runs.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The workload (`q1`, `e1`, …).
    pub workload: String,
    /// The workload's headline metric.
    pub headline: String,
    /// The implementation (`kcache`, `naive`, `floor`, `kube-runtime`, …).
    pub imp: String,
    /// How many runs succeeded.
    pub runs: usize,
    /// The median of each metric, in the order the runs printed them.
    pub medians: Vec<(String, f64)>,
}

impl Summary {
    /// The median of `metric`, if the runs reported it.
    pub fn get(&self, metric: &str) -> Option<f64> {
        self.medians
            .iter()
            .find(|(n, _)| n == metric)
            .map(|(_, v)| *v)
    }
}

/// Everything a report says.
#[derive(Debug, Clone)]
pub struct Report<'a> {
    /// The command line that produced it, as a reader would type it.
    pub command: &'a str,
    /// Runs asked per (workload, implementation).
    pub runs: u32,
    /// The summaries, grouped by workload in run order.
    pub summaries: &'a [Summary],
    /// Runs that failed (crashed, timed out or gave a wrong answer).
    pub failed: usize,
    /// Notes to print under the header (e.g. what was left out and why).
    pub notes: &'a [String],
}

/// Where and when a report was made: [`machine`] and [`now_utc`] for a real one.
#[derive(Debug, Clone)]
pub struct Stamp {
    /// The machine, in one line.
    pub machine: String,
    /// The date and time.
    pub date: String,
}

/// A report ready to save: its Markdown and its charts (file name in the chart folder, SVG text).
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The Markdown text.
    pub markdown: String,
    /// The charts the Markdown links to.
    pub charts: Vec<(String, String)>,
}

/// Writes `report` to `path` and its charts beside it; returns every file written.
///
/// # Errors
/// A file that cannot be written, or a chart that cannot be drawn.
pub fn write(report: &Report<'_>, path: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let stem = path
        .file_stem()
        .map_or("report".into(), |s| s.to_string_lossy().to_lowercase());
    let stamp = Stamp {
        machine: machine(),
        date: now_utc(),
    };
    let rendered = render(report, &stamp, &stem)?;
    let charts = dir.join(&stem);
    std::fs::create_dir_all(&charts).map_err(|e| format!("{}: {e}", charts.display()))?;
    let mut written = Vec::new();
    for (name, svg) in &rendered.charts {
        let file = charts.join(name);
        std::fs::write(&file, svg).map_err(|e| format!("{}: {e}", file.display()))?;
        written.push(file);
    }
    std::fs::write(path, &rendered.markdown).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path.to_path_buf());
    Ok(written)
}

/// The report's Markdown and charts, the charts linked as `{chart_dir}/{name}.svg`.
///
/// # Errors
/// A chart that cannot be drawn (a workload without any value gets a line saying so instead).
pub fn render(report: &Report<'_>, stamp: &Stamp, chart_dir: &str) -> Result<Rendered, String> {
    let mut charts = Vec::new();
    let mut link = |name: &str, svg: String| {
        let file = format!("{name}.svg");
        let link = format!("{chart_dir}/{file}");
        charts.push((file, svg));
        link
    };
    let mut md = header(report, stamp);
    if let Some(svg) = compare::headline_chart(report.summaries)? {
        md.push_str("## kcache against client-go\n\n");
        let _ = writeln!(
            md,
            "![kcache against client-go]({})\n",
            link("headline", svg)
        );
        paragraph(
            &mut md,
            "Each bar is kcache ahead of client-go by (the line marks 1): one for this run's \
             kcache figure against client-go's, and one for the ratio measured side by side in \
             client-go's sitting, where kcache's figure was recorded there too.",
        );
        md.push_str(&compare::headline_table(report.summaries));
    }
    md.push_str("\n## Every workload\n");
    for workload in compare::workloads(report.summaries) {
        let rows: Vec<&Summary> = report
            .summaries
            .iter()
            .filter(|s| s.workload == workload)
            .collect();
        let Some(first) = rows.first() else { continue };
        let better = if higher_is_better(&first.headline) {
            "higher is better"
        } else {
            "lower is better"
        };
        let _ = writeln!(md, "\n### {workload}: `{}` ({better})\n", first.headline);
        let chart = compare::workload_chart(&workload, &rows);
        match bar_chart(&chart.title, &chart.axis, &chart.bars, None) {
            Ok(svg) => {
                let _ = writeln!(md, "![{workload}]({})\n", link(&workload, svg));
            }
            Err(why) => {
                let _ = writeln!(md, "(no chart: {why})\n");
            }
        }
        md.push_str(&compare::metrics_table(&workload, &rows));
    }
    Ok(Rendered {
        markdown: md,
        charts,
    })
}

/// Appends `text` as one paragraph wrapped to [`WIDTH`], and a blank line.
fn paragraph(md: &mut String, text: &str) {
    md.push_str(&wrap(text, WIDTH));
    md.push_str("\n\n");
}

/// The command in a shell block, continued over several lines (`\`) where it is wider than
/// [`WIDTH`], broken before its options.
fn command_block(command: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for (i, part) in command.split(" --").enumerate() {
        let part = if i == 0 {
            part.to_string()
        } else {
            format!(" --{part}")
        };
        // 2 columns for the " \" that ends a continued line.
        if !line.is_empty() && line.len() + part.len() + 2 > WIDTH {
            lines.push(std::mem::take(&mut line));
            line.push_str("   ");
        }
        line.push_str(&part);
    }
    lines.push(line);
    format!("```sh\n{}\n```\n\n", lines.join(" \\\n"))
}

fn header(report: &Report<'_>, stamp: &Stamp) -> String {
    let mut md = String::from("# kcache benchmarks\n\n");
    paragraph(
        &mut md,
        &format!(
            "Made on {} on {}, by the command below: {} run(s) of every (workload, \
             implementation), each in a fresh process, the implementations interleaved; every \
             figure is the median of its runs.",
            stamp.date, stamp.machine, report.runs,
        ),
    );
    md.push_str(&command_block(report.command));
    paragraph(
        &mut md,
        "The workloads, their implementations and every metric are defined in \
         [benches/WORKLOADS.md](benches/WORKLOADS.md) (the runner's `--help` lists them too). \
         Beside kcache run its peer kube-runtime, straightforward baselines (`naive`, client-go's \
         design ported as it is; `rwlock-hashmap`) and the floor (the hand-off alone, which no \
         implementation can beat; in q1 also `floor-dedup`, the hand-off behind a set of the items \
         queued, the least a deduplicating queue does).",
    );
    paragraph(
        &mut md,
        "**kcache ahead by**, in every table and chart below, is how many times better kcache's \
         figure is than the other one: the other's figure divided by kcache's for a cost (time, \
         bytes: lower is better), kcache's divided by the other's for a rate (per second: higher \
         is better). Above 1 kcache is ahead, below 1 it is behind, whatever the metric.",
    );
    paragraph(
        &mut md,
        &format!(
            "client-go is Go and does not run here. Its figures are those of {CLIENT_GO_PROVENANCE}. \
             Where that sitting recorded kcache's figure too, the ratio of the two compares them on \
             one machine at one time; this run's kcache figure against client-go's spans two \
             sittings: read it as an order of magnitude."
        ),
    );
    paragraph(
        &mut md,
        "Machines are noisy (20-50 % between sittings on a shared 2-core machine): compare within \
         one run, and quote ratios with the load average. A chart switches to a log scale when \
         its values spread more than 20x.",
    );
    if report.failed > 0 {
        paragraph(
            &mut md,
            &format!(
                "**{} run(s) failed** (crashed, timed out or gave a wrong answer); their \
                 workloads show the runs that passed.",
                report.failed
            ),
        );
    }
    for note in report.notes {
        paragraph(&mut md, note);
    }
    md
}

#[cfg(test)]
mod tests;
