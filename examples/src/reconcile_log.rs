//! `--reconcile-log` and `--reconcile-delay-ms`: what wraps each reconcile. The log has one JSON
//! line per finished reconcile, `{"key":…,"replica":…,"start_ns":…,"end_ns":…}` (system clock,
//! nanoseconds since the Unix epoch), written with one `write` call and no buffer, so a line is
//! on disk (in the page cache) as soon as the reconcile ended, also if the process is killed
//! right after. `kcache-reconcile-check` reads these logs.

use kcache_core::{Clock, ObjectKey};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The reconcile log of one replica.
pub(crate) struct ReconcileLog {
    replica: String,
    file: Mutex<File>,
    written: AtomicU64,
    /// Lines that could not be written, and the first error (reported at the end of the run).
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ReconcileLog {
    /// The log `--reconcile-log` asks for, if any, for the replica `identity` (default:
    /// `kcache-demo-PID`).
    pub(crate) fn open_for(
        args: &crate::args::Args,
        identity: Option<&str>,
    ) -> Result<Option<Arc<Self>>, String> {
        let Some(path) = &args.reconcile_log else {
            return Ok(None);
        };
        let pid = format!("kcache-demo-{}", std::process::id());
        Self::open(path, identity.unwrap_or(&pid)).map(|l| Some(Arc::new(l)))
    }

    /// Opens `path` for appending (creating it), for the replica `replica`.
    pub(crate) fn open(path: &Path, replica: &str) -> Result<Self, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the reconcile log {}: {e}", path.display()))?;
        Ok(Self {
            replica: replica.to_owned(),
            file: Mutex::new(file),
            written: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error: Mutex::new(None),
        })
    }

    /// Appends the line of one reconcile of `key` from `start` to `end`.
    pub(crate) fn record(&self, key: &ObjectKey, start: SystemTime, end: SystemTime) {
        let line = line(key.as_str(), &self.replica, start, end);
        let written = match self.file.lock() {
            Ok(mut f) => f.write_all(line.as_bytes()).map_err(|e| e.to_string()),
            Err(_) => Err("the log's lock was poisoned".to_owned()),
        };
        match written {
            Ok(()) => {
                self.written.fetch_add(1, Relaxed);
            }
            Err(e) => {
                self.failed.fetch_add(1, Relaxed);
                if let Ok(mut first) = self.first_error.lock() {
                    first.get_or_insert(e);
                }
            }
        }
    }

    /// Lines written.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Relaxed)
    }

    /// A problem for the report if some lines could not be written.
    pub(crate) fn problem(&self) -> Option<String> {
        let failed = self.failed.load(Relaxed);
        (failed > 0).then(|| {
            let first = self
                .first_error
                .lock()
                .ok()
                .and_then(|e| e.clone())
                .unwrap_or_default();
            format!("{failed} reconcile log line(s) could not be written, the first: {first}")
        })
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
fn unix_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// One log line, newline included.
fn line(key: &str, replica: &str, start: SystemTime, end: SystemTime) -> String {
    let mut out = String::with_capacity(96);
    out.push_str("{\"key\":");
    json_string(&mut out, key);
    out.push_str(",\"replica\":");
    json_string(&mut out, replica);
    let _ = writeln!(
        out,
        ",\"start_ns\":{},\"end_ns\":{}}}",
        unix_ns(start),
        unix_ns(end)
    );
    out
}

/// Appends `s` as a JSON string literal.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// What wraps each reconcile: the configured wait, then the reconcile, logged.
#[derive(Clone)]
pub(crate) struct Wrap {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) delay: Duration,
    pub(crate) log: Option<Arc<ReconcileLog>>,
}

impl Wrap {
    /// Runs `reconcile` for `key`: waits the delay first (inside the logged interval, as an API
    /// call the reconcile makes), then logs the interval once it finished.
    pub(crate) async fn run<F, R>(&self, key: ObjectKey, reconcile: F) -> R
    where
        F: Future<Output = R>,
    {
        let start = self.clock.system_time();
        if !self.delay.is_zero() {
            self.clock.sleep_async(self.delay).await;
        }
        let out = reconcile.await;
        if let Some(log) = &self.log {
            log.record(&key, start, self.clock.system_time());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::FakeClock;

    #[test]
    fn a_line_is_one_json_object_with_the_four_fields() {
        let start = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let end = start + Duration::from_millis(5);
        let l = line("demo/rs-00001", "r\"1\\\n", start, end);
        assert!(l.ends_with('\n') && l.matches('\n').count() == 1, "{l:?}");
        let v: serde_json::Value = serde_json::from_str(&l).expect("valid JSON");
        assert_eq!(v["key"], "demo/rs-00001");
        assert_eq!(v["replica"], "r\"1\\\n");
        assert_eq!(v["start_ns"], 1_700_000_000_123_456_789u64);
        assert_eq!(v["end_ns"], 1_700_000_000_128_456_789u64);
    }

    #[test]
    fn every_reconcile_is_logged_at_once_with_the_delay_inside_its_interval() {
        let dir = std::env::temp_dir().join(format!("kcache-rlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("r.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = Arc::new(ReconcileLog::open(&path, "a").expect("opens"));
        let clock = FakeClock::new();
        let wrap = Wrap {
            clock: Arc::new(clock.clone()),
            delay: Duration::from_millis(30),
            log: Some(log.clone()),
        };
        let key = ObjectKey::namespaced("demo", "rs-1").expect("key");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let task = runtime.spawn({
            let wrap = wrap.clone();
            async move { wrap.run(key, async { 7 }).await }
        });
        runtime.block_on(async {
            while log.written() == 0 && !task.is_finished() {
                tokio::task::yield_now().await;
                clock.advance(Duration::from_millis(10));
            }
        });
        assert_eq!(runtime.block_on(task).expect("joined"), 7);
        let text = std::fs::read_to_string(&path).expect("read");
        let v: serde_json::Value = serde_json::from_str(text.trim_end()).expect("one JSON line");
        let (s, e) = (
            v["start_ns"].as_u64().unwrap_or(0),
            v["end_ns"].as_u64().unwrap_or(0),
        );
        assert!(
            e - s >= 30_000_000,
            "the delay is inside the interval: {s}..{e}"
        );
        assert_eq!(log.problem(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
