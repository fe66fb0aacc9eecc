//! `--leader-elect`: the demo as one replica of a highly available controller.
//!
//! An elector (kcache-leaderelection) campaigns on a lock next to the world; the controller's
//! workers run only while it leads, while the informers keep the caches warm either way. A
//! standby replica waits for the lease; when the leader dies it takes over, continues the user's
//! work on the world it finds and converges it.

use kcache_core::{Clock, SystemClock};
use kcache_leaderelection::{LeaderElectionConfig, LeaderElector, LeaderStatus, Leadership, Lock};
use std::time::Duration;
use tokio::sync::oneshot;

/// The election timings for a lease of `lease_secs`: client-go's proportions (15 s lease, 10 s
/// renew deadline, 2 s retry), scaled.
pub(crate) fn config(lease_secs: u64) -> LeaderElectionConfig {
    let lease = Duration::from_secs(lease_secs);
    LeaderElectionConfig::new()
        .lease_duration(lease)
        .renew_deadline(lease * 2 / 3)
        .retry_period(lease * 2 / 15)
        .release_on_cancel(true)
        .name("kcache-demo")
}

/// A running elector.
pub(crate) struct Election {
    identity: String,
    status: LeaderStatus,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// How this replica came to lead.
pub(crate) struct Led {
    pub(crate) term: Leadership,
    pub(crate) waited: Duration,
    pub(crate) previous: Option<String>,
}

#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
impl Election {
    /// Starts campaigning on `lock` (on the current tokio runtime).
    pub(crate) fn spawn<L: Lock>(lock: L, lease_secs: u64) -> Result<Self, String> {
        let identity = lock.identity().to_owned();
        let who = identity.clone();
        let elector = LeaderElector::new(lock, config(lease_secs))
            .map_err(|e| format!("leader election: {e}"))?
            .on_new_leader(move |leader| {
                println!("kcache-demo[{who}]: leader is now {leader}");
            });
        let status = elector.status();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let run = elector.run(async {
                let _ = stopped.await;
            });
            if let Err(e) = run.await {
                eprintln!("kcache-demo: leader election: {e}");
            }
        });
        Ok(Self {
            identity,
            status,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The elector's view, for the controller.
    pub(crate) fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// This replica's identity.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits (warm) until this replica leads.
    pub(crate) async fn wait_to_lead(&self) -> Result<Led, String> {
        let start = SystemClock.now();
        let previous = self.status.leader().filter(|l| *l != self.identity);
        println!(
            "kcache-demo[{}]: caches synced; standing by (leader: {})",
            self.identity,
            previous.as_deref().unwrap_or("none yet")
        );
        // The last leader seen before this replica took over.
        let mut rx = self.status.watch();
        let mut last_other = previous;
        loop {
            let state = rx.borrow_and_update().clone();
            if let Some(term) = self.status.leadership() {
                let waited = SystemClock.now().saturating_duration_since(start);
                println!(
                    "kcache-demo[{}]: leads (term {}, lock revision {}) after standing by {:.2} s{}",
                    self.identity,
                    term.term(),
                    term.version(),
                    waited.as_secs_f64(),
                    last_other
                        .as_deref()
                        .map(|p| format!("; took over from {p}"))
                        .unwrap_or_default()
                );
                return Ok(Led {
                    term,
                    waited,
                    previous: last_other,
                });
            }
            if state.finished {
                return Err("leader election: the elector stopped".into());
            }
            if let Some(l) = state.leader.filter(|l| *l != self.identity) {
                last_other = Some(l);
            }
            if rx.changed().await.is_err() {
                return Err("leader election: the elector stopped".into());
            }
        }
    }

    /// Stops campaigning and releases the lease (so a standby takes over at once).
    pub(crate) async fn step_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
