//! The demo's phases around the controller: the world it starts from (seeded, or continued from
//! an earlier run or leader), the user phase (the seeded user changes the world while the
//! controller follows), and the settle phase (waiting until the controller has converged it).

use crate::args::Args;
use crate::source::Source;
use crate::world::{check, same_objects, Pod, ReplicaSet, User, UserStats};
use indicatif::{ProgressBar, ProgressStyle};
use kcache_controller::ControllerHandle;
use kcache_core::{Clock, ObjectAccessor};
use kcache_informer::CacheReader;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pause between two user actions.
const USER_TICK: Duration = Duration::from_millis(4);
/// How long the user's actions may keep failing (a source that is down: etcd restarting) before
/// the run is given up; a failed action is counted and the next one tried.
const USER_OUTAGE_LIMIT: Duration = Duration::from_secs(30);
/// How long the world may take to converge once the user stops (chaos included: a reflector
/// backing off after injected errors may sleep up to a minute).
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(120);
/// How often the progress display and the convergence check look.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// What the phases watch: the clock, the progress bar, both caches and the controller.
pub(crate) struct View<'a> {
    pub(crate) clock: &'a dyn Clock,
    pub(crate) bar: &'a ProgressBar,
    pub(crate) sets: CacheReader<ReplicaSet, ObjectAccessor>,
    pub(crate) pods: CacheReader<Pod, ObjectAccessor>,
    pub(crate) handle: &'a ControllerHandle,
    /// When the run started (the informers' start).
    pub(crate) start: Instant,
}

/// When a phase has to stop early: the replica lost its lease (a problem), or it was told to
/// stop (SIGTERM to a sharded replica: not a problem).
pub(crate) struct Stops<'a> {
    pub(crate) leading: &'a dyn Fn() -> bool,
    pub(crate) terminated: &'a dyn Fn() -> bool,
}

/// The user phase: the user acts every [`USER_TICK`] until `deadline`; failed actions are
/// counted, and fail the run once they keep failing for [`USER_OUTAGE_LIMIT`]. Returns the
/// number of actions tried.
pub(crate) async fn user_phase<S: Source<ReplicaSet>, P: Source<Pod>>(
    view: &View<'_>,
    stops: &Stops<'_>,
    user: &mut User<S, P>,
    user_stats: &UserStats,
    deadline: Instant,
    problems: &mut Vec<String>,
) -> u64 {
    let clock = view.clock;
    let mut last_look = clock.now();
    let mut user_ops = 0u64;
    let mut last_user_ok = clock.now();
    while problems.is_empty() && clock.now() < deadline && !(stops.terminated)() {
        if !(stops.leading)() {
            problems.push("lost the lease during the user phase".into());
            break;
        }
        match user.step().await {
            Ok(()) => last_user_ok = clock.now(),
            Err(e) => {
                user_stats.failed.fetch_add(1, Relaxed);
                if clock.now().saturating_duration_since(last_user_ok) > USER_OUTAGE_LIMIT {
                    problems.push(format!(
                        "the user's actions kept failing for {USER_OUTAGE_LIMIT:?}: {e}"
                    ));
                }
            }
        }
        user_ops += 1;
        clock.sleep_async(USER_TICK).await;
        if clock.now().saturating_duration_since(last_look) >= LOOK_EVERY {
            last_look = clock.now();
            let elapsed = clock.now().saturating_duration_since(view.start);
            view.bar.set_position(elapsed.as_millis() as u64);
            view.bar.set_message(format!(
                "user: {} sets, {} pods cached | reconciles {} | queue {}",
                view.sets.len(),
                view.pods.len(),
                view.handle.stats().reconciles,
                view.handle.queue().len()
            ));
        }
    }
    user_ops
}

/// How the settle phase ended.
pub(crate) struct Settled {
    /// The queue was idle, the caches held exactly what a read of the sources returned, and that
    /// read checked out.
    pub(crate) converged: bool,
    /// What the last look found wrong (reported if the world never converged).
    pub(crate) last_problems: Vec<String>,
}

/// The settle phase: looks every [`LOOK_EVERY`] until the world converged, the replica lost its
/// lease or was stopped, or [`SETTLE_LIMIT`] passed since `user_ended`.
pub(crate) async fn settle<S: Source<ReplicaSet>, P: Source<Pod>>(
    view: &View<'_>,
    stops: &Stops<'_>,
    (sets_src, pods_src): (&S, &P),
    user_ended: Instant,
    problems: &mut Vec<String>,
) -> Settled {
    let (clock, handle) = (view.clock, view.handle);
    let mut last_problems = Vec::new();
    while problems.is_empty() && !(stops.terminated)() {
        let idle = handle.queue().is_empty()
            && handle.queue().in_flight() == 0
            && handle.queue().waiting_len() == 0;
        if idle {
            match read_world(sets_src, pods_src).await {
                Ok((all_sets, all_pods)) => {
                    let caught_up = same_objects(&view.sets.list(), &all_sets)
                        && same_objects(&view.pods.list(), &all_pods);
                    if caught_up {
                        last_problems = check(&all_sets, &all_pods);
                        if last_problems.is_empty() {
                            return Settled {
                                converged: true,
                                last_problems,
                            };
                        }
                    }
                }
                // A failed read is retried until the settle limit; it is reported if it lasts.
                Err(e) => last_problems = vec![e],
            }
        }
        let settling = clock.now().saturating_duration_since(user_ended);
        if settling > SETTLE_LIMIT {
            break;
        }
        if !(stops.leading)() {
            problems.push("lost the lease while the world settled".into());
            break;
        }
        view.bar.set_message(format!(
            "settling {:.1}s: {} sets, {} pods cached | reconciles {} | queue {} (+{} delayed)",
            settling.as_secs_f64(),
            view.sets.len(),
            view.pods.len(),
            handle.stats().reconciles,
            handle.queue().len(),
            handle.queue().waiting_len()
        ));
        view.bar.tick();
        clock.sleep_async(LOOK_EVERY).await;
    }
    Settled {
        converged: false,
        last_problems,
    }
}

/// Creates the initial sets.
pub(crate) async fn seed<S: Source<ReplicaSet>, P: Source<Pod>>(
    user: &mut User<S, P>,
    sets: usize,
) -> Result<(), String> {
    for _ in 0..sets {
        user.create_set()
            .await
            .map_err(|e| format!("cannot create the initial sets: {e}"))?;
    }
    Ok(())
}

/// A replica that starts leading: seeds an empty world, or continues the one an earlier leader
/// left (the user adopts its sets and names new ones after them).
pub(crate) async fn continue_world<S: Source<ReplicaSet>, P: Source<Pod>>(
    user: &mut User<S, P>,
    sets_src: &S,
    sets: usize,
) -> Result<(), String> {
    let existing = sets_src.list().await?;
    if existing.is_empty() {
        return seed(user, sets).await;
    }
    for set in &existing {
        if let Some(n) = set
            .name
            .strip_prefix("rs-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            user.next_set = user.next_set.max(n + 1);
        }
        user.live.push(set.name.clone());
    }
    Ok(())
}

/// Every set and every pod in the sources now.
pub(crate) async fn read_world<S: Source<ReplicaSet>, P: Source<Pod>>(
    sets: &S,
    pods: &P,
) -> Result<(Vec<Arc<ReplicaSet>>, Vec<Arc<Pod>>), String> {
    Ok((sets.list().await?, pods.list().await?))
}

/// The progress bar of an interactive run (hidden with `--quiet`).
pub(crate) fn progress_bar(args: &Args) -> ProgressBar {
    if args.quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(args.duration_secs.saturating_mul(1000).max(1));
    let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}");
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar
}
