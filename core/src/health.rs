//! Health and readiness: named checks ([`HealthCheck`]) composed into one [`HealthChecks`], whose
//! [`HealthReport`] says which check failed and why.
//!
//! Each kcache crate implements [`HealthCheck`] for the state it owns (the informer crate for
//! caches that synced, the controller crate for its workers, the leader-election crate for a
//! lease that is still renewed); a program composes the ones it wants under `/healthz` and
//! `/readyz`. No crate serves HTTP: the program's own server calls [`HealthChecks::check`] and
//! answers 200 when [`HealthReport::is_ok`], 503 otherwise, with the report as the body.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a check failed: any error, kept typed (downcast it to the checking crate's error type).
pub type CheckError = Box<dyn Error + Send + Sync + 'static>;

/// One named check of a program's health or readiness (what Kubernetes' `healthz.HealthChecker`
/// is to its API server).
///
/// A check must answer quickly and without blocking: it reads state the component keeps up to
/// date (a flag, a timestamp), it does not probe a remote system.
#[doc(alias = "HealthChecker")]
pub trait HealthCheck: Send + Sync {
    /// The check's name in reports (`informer-sync`, `leaderElection`, …).
    fn name(&self) -> &str;

    /// `Ok` when healthy; otherwise the reason.
    ///
    /// # Errors
    /// The reason the check fails, typed by the implementation.
    fn check(&self) -> Result<(), CheckError>;
}

impl<C: HealthCheck + ?Sized> HealthCheck for Arc<C> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn check(&self) -> Result<(), CheckError> {
        (**self).check()
    }
}

/// A check made of a name and a function.
struct FnCheck<F> {
    name: String,
    check: F,
}

impl<F> HealthCheck for FnCheck<F>
where
    F: Fn() -> Result<(), CheckError> + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn check(&self) -> Result<(), CheckError> {
        (self.check)()
    }
}

/// A list of named checks run together: one per endpoint (`/healthz`, `/readyz`).
///
/// [`check`](Self::check) runs every check, in the order they were added, and returns a
/// [`HealthReport`] naming each one with its outcome; the report is healthy when every check
/// passed (and when there is none).
///
/// # Examples
/// ```
/// use kcache_core::health::{CheckError, HealthChecks};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let synced = Arc::new(AtomicBool::new(false));
/// let s = synced.clone();
/// let readyz = HealthChecks::new()
///     .with_fn("ping", || Ok(()))
///     .with_fn("caches", move || {
///         if s.load(Ordering::Relaxed) { Ok(()) } else { Err(CheckError::from("not synced yet")) }
///     });
///
/// let report = readyz.check();
/// assert!(!report.is_ok());
/// assert_eq!(report.failed().map(|r| r.name()).collect::<Vec<_>>(), ["caches"]);
/// assert_eq!(report.to_string(), "[+]ping ok\n[-]caches failed: not synced yet\ncheck failed\n");
///
/// synced.store(true, Ordering::Relaxed);
/// assert!(readyz.check().is_ok());
/// ```
#[derive(Clone, Default)]
pub struct HealthChecks {
    checks: Vec<Arc<dyn HealthCheck>>,
}

impl HealthChecks {
    /// No checks (a report without checks is healthy).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `check` after the ones already added.
    pub fn with(mut self, check: impl HealthCheck + 'static) -> Self {
        self.push(check);
        self
    }

    /// Adds a check named `name` that calls `check`.
    pub fn with_fn(
        self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), CheckError> + Send + Sync + 'static,
    ) -> Self {
        self.with(FnCheck {
            name: name.into(),
            check,
        })
    }

    /// Adds `check` after the ones already added.
    pub fn push(&mut self, check: impl HealthCheck + 'static) {
        self.checks.push(Arc::new(check));
    }

    /// How many checks there are.
    pub fn len(&self) -> usize {
        self.checks.len()
    }

    /// Whether there is no check.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// Runs every check, in order, and reports each outcome.
    pub fn check(&self) -> HealthReport {
        HealthReport {
            results: self
                .checks
                .iter()
                .map(|c| CheckResult {
                    name: c.name().to_owned(),
                    outcome: c.check(),
                })
                .collect(),
        }
    }
}

impl fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.checks.iter().map(|c| c.name()))
            .finish()
    }
}

/// The outcome of one check.
#[derive(Debug)]
pub struct CheckResult {
    name: String,
    outcome: Result<(), CheckError>,
}

impl CheckResult {
    /// The check's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the check passed.
    pub fn is_ok(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Why the check failed (`None` when it passed).
    pub fn error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.outcome.as_ref().err().map(|e| e.as_ref())
    }
}

/// What [`HealthChecks::check`] found: every check's name and outcome, in order.
///
/// Its [`Display`](fmt::Display) is the body Kubernetes' components answer `/healthz?verbose`
/// with: one line per check, `[+]NAME ok` or `[-]NAME failed: REASON`, then `check passed` or
/// `check failed`. A reason's line breaks are written as spaces, so each check keeps one line.
#[derive(Debug)]
pub struct HealthReport {
    results: Vec<CheckResult>,
}

impl HealthReport {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.results.iter().all(CheckResult::is_ok)
    }

    /// Every check's outcome, in the order the checks were added.
    pub fn results(&self) -> &[CheckResult] {
        &self.results
    }

    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(|r| !r.is_ok())
    }

    /// The outcome of the check named `name` (the first, if several share it).
    pub fn get(&self, name: &str) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.name == name)
    }
}

impl fmt::Display for HealthReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for result in &self.results {
            match &result.outcome {
                Ok(()) => writeln!(f, "[+]{} ok", result.name)?,
                Err(e) => {
                    let reason = e.to_string().replace(['\r', '\n'], " ");
                    writeln!(f, "[-]{} failed: {reason}", result.name)?;
                }
            }
        }
        if self.is_ok() {
            f.write_str("check passed\n")
        } else {
            f.write_str("check failed\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("queue {0} is stuck")]
    struct Stuck(&'static str);

    struct Fixed(&'static str, bool);
    impl HealthCheck for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn check(&self) -> Result<(), CheckError> {
            if self.1 {
                Ok(())
            } else {
                Err(Box::new(Stuck(self.0)))
            }
        }
    }

    #[test]
    fn no_checks_is_healthy() {
        let report = HealthChecks::new().check();
        assert!(report.is_ok());
        assert_eq!(report.to_string(), "check passed\n");
    }

    #[test]
    fn every_check_is_reported_in_order_and_one_failure_fails_the_report() {
        let checks = HealthChecks::new()
            .with(Fixed("a", true))
            .with(Fixed("b", false))
            .with(Arc::new(Fixed("c", true)));
        assert_eq!(checks.len(), 3);
        let report = checks.check();
        assert!(!report.is_ok());
        let names: Vec<_> = report
            .results()
            .iter()
            .map(|r| (r.name(), r.is_ok()))
            .collect();
        assert_eq!(names, [("a", true), ("b", false), ("c", true)]);
        assert_eq!(
            report.to_string(),
            "[+]a ok\n[-]b failed: queue b is stuck\n[+]c ok\ncheck failed\n"
        );
        let failed: Vec<_> = report.failed().map(CheckResult::name).collect();
        assert_eq!(failed, ["b"]);
    }

    #[test]
    fn the_error_stays_typed() {
        let report = HealthChecks::new().with(Fixed("q", false)).check();
        let error = report.get("q").and_then(CheckResult::error);
        assert!(error.is_some_and(|e| e.downcast_ref::<Stuck>().is_some()));
        assert!(report.get("q").is_some_and(|r| !r.is_ok()));
        assert!(report.get("missing").is_none());
    }

    #[test]
    fn a_reason_keeps_to_one_line() {
        let report = HealthChecks::new()
            .with_fn("multi", || Err("first\nsecond\r\nthird".into()))
            .check();
        assert_eq!(
            report.to_string(),
            "[-]multi failed: first second  third\ncheck failed\n"
        );
    }
}
