//! `kcache-demo`: a ReplicaSet controller on kcache's embedded in-memory source, or (feature
//! `etcd`, flag `--etcd URL`) on etcd.
//!
//! Two shared informers (sets; pods with an owner index) come from an `InformerFactory`; a
//! `Controller` maps set events to the set's key and pod events to their owner's key, and its
//! workers create and delete pods until every set has its desired count (the pods of a deleted
//! set go too: the key comes from the deletion, tombstones included). A seeded user keeps
//! changing the sets; with `--chaos` it also deletes random pods and the informers' list/watch
//! calls go through a fault injector. Then the demo waits for convergence, checks the source and
//! prints a report. The controller code only speaks the [`source::Source`] trait, so it is the
//! same over both backends. Run `cargo run --release -p kcache-demo -- --help` for the flags.

mod args;
mod election;
#[cfg(feature = "etcd")]
mod etcd;
mod metrics;
mod phases;
mod prom;
mod reconcile_log;
mod report;
mod restart;
mod sharded;
mod source;
mod world;

use crate::args::{Args, Backend};
use crate::election::Election;
use crate::metrics::DemoMetricsProvider;
use crate::phases::{continue_world, progress_bar, read_world, seed, Stops, View, SETTLE_LIMIT};
use crate::prom::{Prometheus, Tee};
use crate::reconcile_log::{ReconcileLog, Wrap};
use crate::report::{Report, ReportOrFailure};
use crate::restart::CountingLists;
use crate::sharded::Sharded;
use crate::source::Source;
use crate::world::{check, Ctx, Pod, ReplicaSet, Rng, User, UserStats, OWNER_INDEX};
use kcache_controller::{ConsistencyStore, Controller};
use kcache_core::{Clock, ObjectKey, SystemClock};
use kcache_indexer::Indexers;
use kcache_informer::{HandlerFuncs, InformerFactory, InformerOptions, SharedIndexInformer};
use kcache_memory::MemorySource;
use kcache_reflector::{FaultInjector, FaultPlan};
use kcache_workqueue::{ItemExponentialFailureRateLimiter, MetricsProvider};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    let args = match args::parse(std::env::args_os()) {
        Ok(args) => args,
        // `--help` and `--version` print and exit 0; a bad flag prints what was wrong and exits 2.
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kcache-demo: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = runtime.block_on(run_on_backend(&args));
    report.print(&args);
    if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs the demo on the backend the flags chose.
async fn run_on_backend(args: &Args) -> ReportOrFailure {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    match &args.backend {
        Backend::Memory => {
            let sets = MemorySource::<ReplicaSet>::with_clock(SystemClock);
            let pods = MemorySource::<Pod>::with_clock(SystemClock);
            run(args, clock, sets, pods, None, None).await
        }
        #[cfg(feature = "etcd")]
        Backend::Etcd { url, prefix } => {
            // Replicas share the world, and a demo that restarts warm continues it: only a lone
            // demo without snapshots clears it.
            let clear =
                args.election.is_none() && args.shard.is_none() && args.snapshot_dir.is_none();
            let (sets, pods) = match etcd::connect(url, prefix, clock.clone(), clear).await {
                Ok(pair) => pair,
                Err(e) => return Report::failed(vec![e]),
            };
            let election = match &args.election {
                None => None,
                Some(e) => {
                    let lock = etcd::leader_lock(&sets, prefix, &e.identity);
                    match Election::spawn(lock, e.lease_secs) {
                        Ok(election) => Some(election),
                        Err(e) => return Report::failed(vec![e]),
                    }
                }
            };
            let shard = match &args.shard {
                None => None,
                Some(s) => {
                    let members = etcd::shard_members(&sets, prefix);
                    let markers = etcd::EtcdMarkers::new(&sets, prefix);
                    let config = sharded::config(&s.identity, s.lease_secs, clock.clone());
                    match Sharded::spawn(members, config, markers, s.user) {
                        Ok(shard) => Some(shard),
                        Err(e) => return Report::failed(vec![e]),
                    }
                }
            };
            run(args, clock, sets, pods, election, shard).await
        }
    }
}

async fn run<S: Source<ReplicaSet>, P: Source<Pod>>(
    args: &Args,
    clock: Arc<dyn Clock>,
    sets_src: S,
    pods_src: P,
    election: Option<Election>,
    shard: Option<Sharded>,
) -> ReportOrFailure {
    let mut problems = Vec::new();
    let identity = election
        .as_ref()
        .map(|e| e.identity().to_owned())
        .or_else(|| shard.as_ref().map(|s| s.identity().to_owned()));
    let reconcile_log = match ReconcileLog::open_for(args, identity.as_deref()) {
        Ok(log) => log,
        Err(e) => return Report::failed(vec![e]),
    };
    let user_stats = Arc::new(UserStats::default());
    let mut user = User {
        sets: sets_src.clone(),
        pods: pods_src.clone(),
        rng: Rng::new(args.seed),
        live: Vec::new(),
        next_set: 0,
        target_sets: args.sets,
        max_replicas: args.max_replicas,
        chaos: args.chaos,
        stats: user_stats.clone(),
    };
    // A replica seeds the world only once it leads, or (sharded) if it runs the user (below).
    // A lone demo with snapshots continues the world its last run left (or seeds an empty one).
    if election.is_none() && shard.is_none() {
        let seeded = if args.snapshot_dir.is_some() {
            continue_world(&mut user, &sets_src, args.sets).await
        } else {
            seed(&mut user, args.sets).await
        };
        if let Err(e) = seeded {
            return Report::failed(vec![e]);
        }
    }

    // The informers list and watch through fault injectors (injecting nothing without --chaos).
    let plan = |salt: u64| {
        if args.chaos {
            FaultPlan::chaos(args.seed ^ salt)
        } else {
            FaultPlan::default()
        }
    };
    let sets_lw = FaultInjector::with_clock(sets_src.list_watcher(), plan(0x5e75), clock.clone());
    let pods_lw = FaultInjector::with_clock(pods_src.list_watcher(), plan(0x9006), clock.clone());
    let faults = [sets_lw.handle(), pods_lw.handle()];
    // Lists counted, so the report says whether a restart listed.
    let (sets_lw, sets_lists) = CountingLists::new(sets_lw);
    let (pods_lw, pods_lists) = CountingLists::new(pods_lw);

    // `--listen`: the metrics also go to a Prometheus registry.
    let prometheus = args.listen.map(|_| Prometheus::new());
    let factory = InformerFactory::new();
    #[cfg_attr(not(feature = "etcd"), allow(unused_mut))]
    let mut sets_options = informer_options("replicasets", prometheus.as_ref());
    let indexers = Indexers::new().with(OWNER_INDEX, |p: &Pod| Ok(vec![p.owner.clone()]));
    #[cfg_attr(not(feature = "etcd"), allow(unused_mut))]
    let mut pods_options = informer_options("pods", prometheus.as_ref()).indexers(indexers);
    // With --snapshot-dir, each informer starts from its last snapshot (see restart.rs).
    #[cfg(feature = "etcd")]
    if let Some(dir) = &args.snapshot_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return Report::failed(vec![format!("cannot create {}: {e}", dir.display())]);
        }
        sets_options = sets_options.restore_from(restart::file(dir, "replicasets"));
        pods_options = pods_options.restore_from(restart::file(dir, "pods"));
    }
    let informers = factory
        .informer_for("replicasets", || {
            SharedIndexInformer::with_options(sets_lw, sets_options)
        })
        .and_then(|sets| {
            let pods = factory.informer_for("pods", || {
                SharedIndexInformer::with_options(pods_lw, pods_options)
            })?;
            Ok((sets, pods))
        });
    let (sets, pods) = match informers {
        Ok(pair) => pair,
        Err(e) => return Report::failed(vec![format!("informer factory: {e}")]),
    };
    // Snapshots every few seconds and on stop.
    #[cfg(feature = "etcd")]
    let snapshot_writers = match &args.snapshot_dir {
        None => Vec::new(),
        Some(dir) => {
            let s = sets.snapshots(restart::file(dir, "replicasets"));
            let p = pods.snapshots(restart::file(dir, "pods"));
            vec![
                tokio::spawn(async move { s.run(restart::SNAPSHOT_PERIOD).await }),
                tokio::spawn(async move { p.run(restart::SNAPSHOT_PERIOD).await }),
            ]
        }
    };

    // Counts every notification the informers deliver (for events/s).
    let events = Arc::new(AtomicU64::new(0));
    let sets_counter = sets.add_event_handler(event_counter(&events));
    let pods_counter = pods.add_event_handler(event_counter(&events));
    if let Err(e) = sets_counter.and(pods_counter) {
        return Report::failed(vec![format!("event counter: {e}")]);
    }

    let provider = DemoMetricsProvider::default();
    // KEP-5647: a set whose last reconcile wrote pods is not reconciled again before the pod
    // cache shows them.
    let consistency = ConsistencyStore::with_clock(clock.clone());
    let mut builder = Controller::builder("replicaset-controller").consistency_store(&consistency);
    if let Some(e) = &election {
        builder = builder.leader_election(e.status());
    }
    if let Some(s) = &shard {
        builder = builder.shard(s.gate());
        if let Some(p) = &prometheus {
            p.shard.add(&s.gate());
        }
    }
    let queue_metrics: Arc<dyn MetricsProvider> = match &prometheus {
        Some(p) => {
            builder = builder.stale_sync_skips_metric(p.stale_sync_skips.clone());
            Arc::new(Tee(Arc::new(provider.clone()), Arc::new(p.queue.clone())))
        }
        None => Arc::new(provider.clone()),
    };
    let controller = builder
        .workers(args.workers)
        .metrics(queue_metrics)
        .clock(clock.clone())
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        ))
        .watches(&sets)
        .owns(&pods, |pod: &Pod| {
            ObjectKey::new(pod.owner.as_str())
                .ok()
                .into_iter()
                .collect()
        })
        .build();
    let controller = match controller {
        Ok(c) => c,
        Err(e) => return Report::failed(vec![format!("controller: {e}")]),
    };
    let mut ctx = Ctx::<S, P>::new(
        sets.clone(),
        pods.clone(),
        pods_src.clone(),
        clock.clone(),
        &consistency,
    );
    if let Some(id) = &identity {
        // Replicas name their pods apart: a set's pods may come from several of them.
        ctx.pod_prefix = format!("{id}-");
    }
    let ctx = Arc::new(ctx);
    let reconcile_stats = ctx.stats.clone();
    let reconcile_ctx = ctx.clone();
    let wrap = Wrap {
        clock: clock.clone(),
        delay: args.reconcile_delay,
        log: reconcile_log.clone(),
    };
    let handle = match controller.run_async(move |key: ObjectKey| {
        let (ctx, wrap) = (reconcile_ctx.clone(), wrap.clone());
        async move { wrap.run(key.clone(), world::reconcile(ctx, key)).await }
    }) {
        Ok(h) => h,
        Err(e) => return Report::failed(vec![format!("controller: {e}")]),
    };

    // `--listen`: /readyz answers 503 until the informers below have synced.
    let _ops = match (args.listen, prometheus) {
        (Some(addr), Some(prometheus)) => {
            let leader = election.as_ref().zip(args.election.as_ref());
            let leader = leader.map(|(e, a)| (e.status(), Duration::from_secs(a.lease_secs)));
            match prom::serve(addr, prometheus, &factory, &handle, leader) {
                Ok(server) => {
                    println!(
                        "kcache-demo: serving /metrics, /healthz and /readyz on http://{}",
                        server.local_addr()
                    );
                    Some(server)
                }
                Err(e) => return Report::failed(vec![e]),
            }
        }
        _ => None,
    };

    let start = clock.now();
    let bar = progress_bar(args);
    bar.set_message("starting informers");
    if let Err(e) = factory.wait_for_cache_sync().await {
        problems.push(format!("informers did not sync: {e}"));
    }
    let synced_after = clock.now().saturating_duration_since(start);
    // How each informer started: restored or listed (list calls counted up to the sync).
    #[cfg(feature = "etcd")]
    let starts = vec![
        restart::describe(
            "replicasets",
            &sets.restore_outcome(),
            sets_lists.load(Relaxed),
        ),
        restart::describe("pods", &pods.restore_outcome(), pods_lists.load(Relaxed)),
    ];
    #[cfg(not(feature = "etcd"))]
    let starts = vec![
        format!("replicasets: {} list call(s)", sets_lists.load(Relaxed)),
        format!("pods: {} list call(s)", pods_lists.load(Relaxed)),
    ];

    // A replica waits (warm) for the lease, then takes the world over as it finds it.
    let led = match &election {
        None => None,
        Some(e) => {
            bar.set_message("standing by");
            match e.wait_to_lead().await {
                Ok(led) => {
                    if let Err(e) = continue_world(&mut user, &sets_src, args.sets).await {
                        problems.push(e);
                    }
                    Some(led)
                }
                Err(e) => {
                    problems.push(e);
                    None
                }
            }
        }
    };
    let leading = || led.as_ref().is_none_or(|l| l.term.is_held());

    // A sharded replica with the user claims it, waits for the other replicas if asked to, and
    // seeds or continues the world; the others skip the user phase.
    let runs_user = shard.as_ref().is_none_or(|s| s.runs_user());
    let terminated = || shard.as_ref().is_some_and(|s| s.terminated());
    if let (Some(s), Some(a)) = (shard.as_ref().filter(|s| s.runs_user()), &args.shard) {
        bar.set_message("waiting for the other replicas");
        let started = match s.prepare_user(a.members, clock.as_ref()).await {
            Ok(()) => continue_world(&mut user, &sets_src, args.sets).await,
            Err(e) => Err(e),
        };
        if let Err(e) = started {
            problems.push(e);
        }
    }

    // The user phase.
    let view = View {
        clock: clock.as_ref(),
        bar: &bar,
        sets: sets.indexer(),
        pods: pods.indexer(),
        handle: &handle,
        start,
    };
    let stops = Stops {
        leading: &leading,
        terminated: &terminated,
    };
    let user_phase = Duration::from_secs(args.duration_secs);
    let user_ops = if runs_user {
        let deadline = clock.now() + user_phase;
        phases::user_phase(
            &view,
            &stops,
            &mut user,
            &user_stats,
            deadline,
            &mut problems,
        )
        .await
    } else {
        0
    };
    let mut user_ended = clock.now();
    for f in &faults {
        f.heal();
    }
    // Sharded: the user's replica tells the others it has finished; they wait for that.
    if let Some(s) = shard.as_ref().filter(|_| problems.is_empty()) {
        bar.set_message("waiting for the user to finish");
        match s
            .user_finished(clock.as_ref(), user_phase, || bar.tick())
            .await
        {
            Ok(()) => user_ended = clock.now(),
            Err(e) => problems.push(e),
        }
    }
    if args.quiet {
        println!(
            "kcache-demo: user phase over after {user_ops} actions; faults healed; waiting for convergence"
        );
    }

    // Settle: wait until the queue is idle, the caches hold exactly what a read of the sources
    // returns, and that read checks out.
    let settled = phases::settle(
        &view,
        &stops,
        (&sets_src, &pods_src),
        user_ended,
        &mut problems,
    )
    .await;
    let converged_at = clock.now();
    let stopped = terminated();
    bar.finish_and_clear();

    // Stop everything: the controller drains its queue, then the informers stop.
    let stats = handle.shutdown_async().await;
    let shard_line = match shard {
        Some(s) => {
            let line = sharded::stats_line(&s.leave().await);
            Some(if stopped {
                format!("{line}; stopped by SIGTERM before the world converged, left the group")
            } else {
                line
            })
        }
        None => None,
    };
    factory.shutdown().await;
    // The informers stopped: each writer wrote its last snapshot and returned.
    #[cfg(feature = "etcd")]
    for w in snapshot_writers {
        if let Err(e) = w.await {
            problems.push(format!("snapshot writer: {e}"));
        }
    }
    let election_line = match (&election, &led) {
        (Some(e), Some(led)) => Some(format!(
            "{} led term {} after standing by {:.2} s{}; released the lease",
            e.identity(),
            led.term.term(),
            led.waited.as_secs_f64(),
            led.previous
                .as_deref()
                .map(|p| format!(" (took over from {p})"))
                .unwrap_or_default()
        )),
        _ => None,
    };
    if let Some(e) = election {
        e.step_down().await;
    }
    // The final word is a fresh read of the sources (for etcd: range reads of both prefixes).
    let (final_sets, final_pods, final_problems) = match read_world(&sets_src, &pods_src).await {
        // A replica stopped by SIGTERM leaves the world to the others.
        Ok((s, p)) if stopped => (s.len(), p.len(), Vec::new()),
        Ok((s, p)) => {
            let found = check(&s, &p);
            (s.len(), p.len(), found)
        }
        Err(e) => (0, 0, vec![format!("final read of the sources: {e}")]),
    };
    // An earlier problem (the run never settled) is the reason already.
    if !settled.converged && !stopped && problems.is_empty() {
        problems.push(format!(
            "the world did not converge within {SETTLE_LIMIT:?} after the user stopped"
        ));
        problems.extend(settled.last_problems.into_iter().take(10));
    }
    problems.extend(final_problems.into_iter().take(10));
    if let Some(p) = reconcile_log.as_ref().and_then(|l| l.problem()) {
        problems.push(p);
    }
    let elapsed = converged_at.saturating_duration_since(start);

    Report {
        problems,
        sets: final_sets,
        pods: final_pods,
        user_ops,
        user: user_stats,
        events: events.load(Relaxed),
        elapsed,
        synced_after,
        settle: converged_at.saturating_duration_since(user_ended),
        controller: stats,
        reconciles: reconcile_stats,
        metrics: provider,
        faults: faults.iter().map(|f| f.stats()).collect(),
        election: election_line,
        shard: shard_line,
        reconcile_log: reconcile_log.map(|l| (args.reconcile_log.clone(), l.written())),
        starts,
    }
    .into()
}

/// An informer's options: its name, and with `--listen` the Prometheus informer metrics.
fn informer_options<T>(name: &str, prometheus: Option<&Prometheus>) -> InformerOptions<T> {
    let options = InformerOptions::new().name(name);
    match prometheus {
        Some(p) => options.metrics(Arc::new(p.informers.clone())),
        None => options,
    }
}

/// A handler that counts every notification into `events`.
fn event_counter<T: Send + Sync + 'static>(events: &Arc<AtomicU64>) -> HandlerFuncs<T> {
    let (a, u, d) = (events.clone(), events.clone(), events.clone());
    HandlerFuncs::new()
        .add_func(move |_, _| {
            a.fetch_add(1, Relaxed);
        })
        .update_func(move |_, _| {
            u.fetch_add(1, Relaxed);
        })
        .delete_func(move |_| {
            d.fetch_add(1, Relaxed);
        })
}
