//! What a report quotes besides its own runs: client-go's figures with their provenance, and
//! where and when the runs were made.

/// Where client-go's figures come from, as the report says it (the crate's WORKLOADS.md says the
/// same at more length).
pub const CLIENT_GO_PROVENANCE: &str = "client-go v0.36.3 (unmodified, built with Go 1.27.3), \
    measured side by side with this runner (at commit 813bc6f) on 2026-12-03 on a quiet 2-core \
    development machine of the kind this report is made on: the two alternated in two passes, \
    each figure the median of 5 fresh processes. The report quotes the first pass";

/// The label of client-go's figures in tables and charts.
pub const CLIENT_GO_LABEL: &str = "client-go (2026-12-03)";

/// One figure of client-go's side-by-side sitting, and kcache's figure of the same sitting where
/// it was recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientGoFigure {
    /// The workload (`q1`, `i1`, …).
    pub workload: &'static str,
    /// The metric, as the runner names it.
    pub metric: &'static str,
    /// client-go's figure, first pass (the one reports quote).
    pub client_go: f64,
    /// client-go's figure in the second pass, where there was one.
    pub client_go_second: Option<f64>,
    /// kcache's figure in the first pass of the same sitting, where it was recorded.
    pub kcache: Option<f64>,
    /// kcache's figure in the second pass.
    pub kcache_second: Option<f64>,
}

/// A figure of both passes, client-go's and kcache's.
const fn both(
    workload: &'static str,
    metric: &'static str,
    go: [f64; 2],
    kcache: [f64; 2],
) -> ClientGoFigure {
    ClientGoFigure {
        workload,
        metric,
        client_go: go[0],
        client_go_second: Some(go[1]),
        kcache: Some(kcache[0]),
        kcache_second: Some(kcache[1]),
    }
}

/// A figure of client-go's first pass alone.
const fn once(workload: &'static str, metric: &'static str, go: f64) -> ClientGoFigure {
    ClientGoFigure {
        workload,
        metric,
        client_go: go,
        client_go_second: None,
        kcache: None,
        kcache_second: None,
    }
}

/// Every figure of client-go's side-by-side sitting (the table in the crate's WORKLOADS.md; a
/// test holds the two together).
pub const CLIENT_GO: &[ClientGoFigure] = &[
    both("q1", "ns_per_item", [381.0, 384.0], [129.0, 121.0]),
    both("q2", "ns_per_add", [78.0, 68.0], [66.0, 60.0]),
    both("q2", "dedup_ratio", [13.0, 16.0], [3.2, 2.1]),
    both("q3", "lateness_p99_ms", [30.0, 36.2], [4.9, 10.4]),
    both("q3", "ns_per_add_after", [1101.0, 1491.0], [346.0, 338.0]),
    both("q4queue", "ns_per_item", [801.0, 1043.0], [324.0, 499.0]),
    once("q4limiter-grow-1t", "ns_per_pair", 150.0),
    once("q4limiter-grow-2t", "ns_per_pair", 164.0),
    once("q4limiter-pair-1t", "ns_per_pair", 48.0),
    once("q4limiter-pair-2t", "ns_per_pair", 74.0),
    once("i1", "add_ns", 1704.0),
    once("i1", "update_ns", 1419.0),
    once("i1", "by_index_object_ns", 141.0),
    once("i1", "list_ms", 1.66),
    once("i1", "store_bytes_per_object", 178.0),
    once("f1", "replace_ns_per_object", 1185.0),
    once("f1", "pop_ns", 825.0),
    once("f1", "update_ns", 898.0),
];

/// client-go's figure for `metric` of `workload`, if the sitting recorded one.
pub fn client_go(workload: &str, metric: &str) -> Option<&'static ClientGoFigure> {
    CLIENT_GO
        .iter()
        .find(|f| f.workload == workload && f.metric == metric)
}

/// client-go's figures for `workload`, in table order.
pub fn client_go_figures(workload: &str) -> impl Iterator<Item = &'static ClientGoFigure> + '_ {
    CLIENT_GO.iter().filter(move |f| f.workload == workload)
}

/// A one-line description of this machine: CPU model, cores, memory, OS and its recent load (Linux
/// `/proc` and `/etc/os-release`; what cannot be read is left out).
pub fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let field = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_once([':', '=']))
            .map(|(_, v)| v.trim().trim_matches('"').to_string())
    };
    let cpuinfo = read("/proc/cpuinfo");
    let mut parts = Vec::new();
    if let Some(model) = field(&cpuinfo, "model name") {
        parts.push(model);
    }
    if let Ok(n) = std::thread::available_parallelism() {
        parts.push(format!("{n} cores available"));
    }
    if let Some(kb) = field(&read("/proc/meminfo"), "MemTotal") {
        let kb: f64 = kb.trim_end_matches("kB").trim().parse().unwrap_or(0.0);
        parts.push(format!("{:.1} GiB RAM", kb / 1024.0 / 1024.0));
    }
    if let Some(os) = field(&read("/etc/os-release"), "PRETTY_NAME") {
        parts.push(os);
    }
    // A busy machine explains noisy figures: say how busy it was.
    if let Some(load) = read("/proc/loadavg").split_whitespace().nth(1) {
        parts.push(format!(
            "load average {load} over the last 5 minutes when the report was written"
        ));
    }
    if parts.is_empty() {
        "unknown machine".into()
    } else {
        parts.join(", ")
    }
}

/// Today's date and time in UTC, `YYYY-MM-DD HH:MM UTC`.
pub fn now_utc() -> String {
    #[allow(
        clippy::disallowed_methods,
        reason = "the report's date stamp, not a measurement or a wait"
    )]
    let now = std::time::SystemTime::now();
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let (hh, mm) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02} UTC")
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_423), (2025, 12, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    /// The figures of the table in the crate's WORKLOADS.md, "client-go's figures".
    fn documented() -> Vec<ClientGoFigure> {
        let page = include_str!("../../WORKLOADS.md");
        let section = page
            .split("## client-go's figures")
            .nth(1)
            .expect("WORKLOADS.md has a section on client-go's figures");
        let number = |cell: &str| -> Option<f64> {
            let cell = cell.trim();
            (!cell.is_empty()).then(|| cell.replace(',', "").parse().expect(cell))
        };
        section
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| workload"))
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').collect();
                assert_eq!(cells.len(), 6, "{l}");
                ClientGoFigure {
                    workload: CLIENT_GO
                        .iter()
                        .map(|f| f.workload)
                        .find(|w| *w == cells[0].trim())
                        .unwrap_or("unknown"),
                    metric: CLIENT_GO
                        .iter()
                        .map(|f| f.metric)
                        .find(|m| format!("`{m}`") == cells[1].trim())
                        .unwrap_or("unknown"),
                    client_go: number(cells[2]).expect(l),
                    client_go_second: number(cells[3]),
                    kcache: number(cells[4]),
                    kcache_second: number(cells[5]),
                }
            })
            .collect()
    }

    #[test]
    fn the_figures_are_those_the_workloads_page_documents() {
        assert_eq!(documented(), CLIENT_GO.to_vec());
        assert_eq!(
            client_go("q1", "ns_per_item").map(|f| f.client_go),
            Some(381.0)
        );
        assert_eq!(client_go_figures("f1").count(), 3);
        assert!(client_go("e1", "events_per_s").is_none());
    }
}
