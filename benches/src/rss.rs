//! Resource usage of the current process from `/proc`: peak resident set size and CPU time.

/// The peak resident set size of this process in MiB (`VmHWM` from `/proc/self/status`).
///
/// # Errors
/// A message when the file cannot be read or has no parsable `VmHWM` line (not Linux).
pub fn peak_rss_mib() -> Result<f64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    parse_vm_hwm_kib(&status)
        .map(|kib| kib as f64 / 1024.0)
        .ok_or_else(|| "no VmHWM line in /proc/self/status".to_string())
}

/// The CPU time (user + system, all threads, live or exited) this process used so far, in
/// milliseconds, from `/proc/self/stat`. Its resolution is one clock tick (10 ms with the usual
/// `USER_HZ` of 100). Next to wall time it shows how much of the machine a run actually got.
///
/// # Errors
/// A message when the file cannot be read or parsed (not Linux).
pub fn cpu_time_ms() -> Result<f64, String> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| format!("cannot read /proc/self/stat: {e}"))?;
    parse_cpu_ticks(&stat)
        .map(|ticks| ticks as f64 * 1000.0 / USER_HZ)
        .ok_or_else(|| "cannot parse /proc/self/stat".to_string())
}

/// Clock ticks per second of `/proc/<pid>/stat` (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// utime + stime in clock ticks from the text of a `/proc/<pid>/stat` file.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces; fields 14 and 15 (utime,
    // stime) are the 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The `VmHWM` value in KiB from the text of a `/proc/<pid>/status` file.
fn parse_vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_in_kib() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm_kib(status), Some(2048));
        assert_eq!(parse_vm_hwm_kib("Name:\tx\n"), None);
    }

    #[test]
    fn cpu_ticks_are_utime_plus_stime() {
        let stat = "42 (a (b) c) R 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5 100 200";
        assert_eq!(parse_cpu_ticks(stat), Some(10));
        assert_eq!(parse_cpu_ticks("42 (x) R 1"), None);
    }

    #[test]
    fn this_process_has_a_peak_rss() {
        assert!(peak_rss_mib().is_ok_and(|m| m > 0.0));
    }
}
