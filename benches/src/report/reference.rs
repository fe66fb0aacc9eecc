//! What a report quotes besides its own runs: client-go's recorded figures (below), and
//! where and when the runs were made.

/// client-go v0.36.3's headline figure for a workload, as recorded for this project (median of 7
/// clean runs on a 2-core machine of the same kind); `None` where it records none.
pub fn client_go(workload: &str) -> Option<f64> {
    Some(match workload {
        "q1" => 552.0,
        "q2" => 103.0,
        "q3" => 30.7,
        "q4queue" => 1772.0,
        "q4limiter-grow-1t" => 221.0,
        "q4limiter-grow-2t" => 308.0,
        "q4limiter-pair-1t" => 78.0,
        "q4limiter-pair-2t" => 114.0,
        "i1" => 1885.0,
        "f1" => 1335.0,
        _ => return None,
    })
}

/// Whether a larger value of `metric` is better (rates), or a smaller one (times, bytes).
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("per_s")
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

    #[test]
    fn rates_are_better_high_and_costs_low() {
        assert!(higher_is_better("events_per_s"));
        assert!(!higher_is_better("ns_per_item"));
        assert!(!higher_is_better("relist_peak_bytes_per_object"));
    }
}
