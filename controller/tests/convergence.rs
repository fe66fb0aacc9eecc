//! End-to-end convergence under faults: a ReplicaSet-like controller (sets and their children,
//! two informers, the controller's rate-limited queue, real retries) on a fake clock, with both
//! informers behind fault injectors (`FaultPlan::chaos`), a seeded user that creates, scales and
//! deletes sets and kills children, and reconciles that fail now and then. Once the faults stop,
//! the source must converge: every set has exactly its desired children, no child is orphaned,
//! and the queue falls idle.
//!
//! The reconcile is the level-triggered pattern of the demo: read the caches, write the
//! difference, wait until the child cache shows the writes, look again, and requeue while the
//! set differs. A reconcile that returns `Done` after its writes instead never converges on some
//! seeds (children created and killed while a child watch was cut leave no event).
//!
//! `KCACHE_CONTROLLER_SEEDS` (default 200) and `KCACHE_CONTROLLER_SEED_START` (default 0)
//! choose the seeds; a failing seed prints the command that replays it.

// The informer's test support (a pod-like object).
#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::Pod;
use futures::future::{select, Either};
use futures::FutureExt;
use kcache_controller::{Action, Controller, ControllerHandle};
use kcache_core::{Clock, FakeClock, ObjectKey, SystemClock};
use kcache_indexer::Indexers;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::{FaultHandle, FaultInjector, FaultPlan};
use kcache_workqueue::ItemExponentialFailureRateLimiter;
use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DEFAULT_SEEDS: u64 = 200;
const OPS: usize = 40;
const SETS: u64 = 5;
const MAX_REPLICAS: u64 = 3;
const OWNER: &str = "owner";

type Informer = SharedIndexInformer<Pod, FaultInjector<MemorySource<Pod>>>;

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// A child's owner: its name up to the first '-'.
fn owner(child: &Pod) -> String {
    let set = child.name.split('-').next().unwrap_or_default();
    format!("{}/{set}", child.ns)
}

struct Ctx {
    sets: Arc<Informer>,
    children: Arc<Informer>,
    children_src: MemorySource<Pod>,
    clock: FakeClock,
    next_child: AtomicU64,
    /// Decides which reconciles fail before they write (a flaky API server), and which new
    /// children the user kills at once, before any cache could see them.
    flaky: Mutex<Rng>,
}

async fn reconcile(ctx: Arc<Ctx>, key: ObjectKey) -> Result<Action, String> {
    if ctx.flaky.lock().unwrap().below(10) == 0 {
        return Err("injected API error".into());
    }
    let observe = || -> Result<(usize, Vec<Arc<Pod>>), String> {
        let want = ctx
            .sets
            .indexer()
            .get_by_key(&key)
            .map_or(0, |s| s.value as usize);
        let have = ctx
            .children
            .indexer()
            .by_index(OWNER, key.as_str())
            .map_err(|e| e.to_string())?;
        Ok((want, have))
    };
    let (want, mut have) = observe()?;
    let mut last_write = None;
    if have.len() < want {
        for _ in have.len()..want {
            let n = ctx.next_child.fetch_add(1, Ordering::Relaxed);
            let child = Pod::new(&format!("{}-{n}", key.name()), 0);
            let created = ctx.children_src.create(child).map_err(|e| e.to_string())?;
            last_write = Some(created.rv.clone());
            if ctx.flaky.lock().unwrap().below(4) == 0 {
                // The user kills it right away: only a cache that watches it sees it come and
                // go; one that is blind (a cut watch, a relist after backoff) never does.
                let _ = ctx.children_src.delete(&created.key());
            }
        }
    } else if have.len() > want {
        have.sort_by(|a, b| a.name.cmp(&b.name));
        for child in &have[want..] {
            // Gone already (killed by the user): its event brings the set back.
            if let Ok(deleted) = ctx.children_src.delete(&child.key()) {
                last_write = Some(deleted.rv.clone());
            }
        }
    }
    if let Some(rv) = last_write {
        let caught_up = pin!(ctx.children.wait_for_resource_version(&rv));
        match select(caught_up, ctx.clock.sleep_async(Duration::from_secs(2))).await {
            Either::Left((Ok(()), _)) => {}
            Either::Left((Err(e), _)) => return Err(e.to_string()),
            Either::Right(_) => return Err(format!("child cache has not reached {rv}")),
        }
    }
    let (want, have) = observe()?;
    Ok(if have.len() == want {
        Action::Done
    } else {
        Action::Requeue
    })
}

/// What is wrong with the source's world (empty: converged).
fn problems(sets: &MemorySource<Pod>, children: &MemorySource<Pod>) -> Vec<String> {
    let mut by_owner: BTreeMap<String, usize> = BTreeMap::new();
    for child in children.list_all() {
        *by_owner.entry(owner(&child)).or_default() += 1;
    }
    let mut found = Vec::new();
    for set in sets.list_all() {
        let have = by_owner.remove(&set.key()).unwrap_or(0);
        if have != set.value as usize {
            found.push(format!("{} wants {}, has {have}", set.key(), set.value));
        }
    }
    found.extend(
        by_owner
            .into_iter()
            .map(|(o, n)| format!("{n} orphans of {o}")),
    );
    found
}

fn idle(handle: &ControllerHandle) -> bool {
    let q = handle.queue();
    q.is_empty() && q.in_flight() == 0 && q.waiting_len() == 0
}

fn informer(
    src: &MemorySource<Pod>,
    clock: &FakeClock,
    seed: u64,
    name: &str,
) -> (Arc<Informer>, FaultHandle) {
    let faulty =
        FaultInjector::with_clock(src.clone(), FaultPlan::chaos(seed), Arc::new(clock.clone()));
    let faults = faulty.handle();
    let indexers = Indexers::new().with(OWNER, |p: &Pod| Ok(vec![owner(p)]));
    let options = InformerOptions::new()
        .name(name)
        .indexers(indexers)
        .clock(Arc::new(clock.clone()));
    (
        Arc::new(SharedIndexInformer::with_options(faulty, options)),
        faults,
    )
}

/// Runs one seed; returns (settle steps, faults injected, reconciles).
async fn one_seed(seed: u64) -> (usize, u64, u64) {
    let clock = FakeClock::new();
    let source = || {
        MemorySource::<Pod>::with_config(
            MemoryConfig::new()
                .with_clock(clock.clone())
                .with_history_window(16),
        )
    };
    let (sets_src, children_src) = (source(), source());
    let (sets, set_faults) = informer(&sets_src, &clock, seed, "sets");
    let (children, child_faults) = informer(&children_src, &clock, seed ^ 0xc41d, "children");
    let controller = Controller::builder(format!("rs-{seed}"))
        .workers(2)
        .clock(Arc::new(clock.clone()))
        .resync_period(Duration::ZERO)
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(2),
        ))
        .watches(&sets)
        .owns(&children, |child: &Pod| {
            ObjectKey::new(owner(child)).ok().into_iter().collect()
        })
        .build()
        .unwrap();
    let ctx = Arc::new(Ctx {
        sets: sets.clone(),
        children: children.clone(),
        children_src: children_src.clone(),
        clock: clock.clone(),
        next_child: AtomicU64::new(0),
        flaky: Mutex::new(Rng(seed ^ 0xf1a)),
    });
    let handle = controller
        .run_async(move |key| reconcile(ctx.clone(), key))
        .unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let runs: Vec<_> = [sets.clone(), children.clone()]
        .into_iter()
        .map(|inf| {
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                inf.run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
            })
        })
        .collect();

    // The user.
    let mut rng = Rng(seed ^ 0x05e7);
    for _ in 0..OPS {
        let name = format!("s{}", rng.below(SETS));
        let key = format!("default/{name}");
        let replicas = rng.below(MAX_REPLICAS + 1) as u32;
        let _ = match (sets_src.get(&key).is_some(), rng.below(5)) {
            (false, _) => sets_src.create(Pod::new(&name, replicas)).map(drop),
            (true, 0) => sets_src.delete(&key).map(drop),
            (true, 1) => {
                // Kill a random child.
                let all = children_src.list_all();
                match all.get(rng.below(all.len() as u64) as usize) {
                    Some(victim) => children_src.delete(&victim.key()).map(drop),
                    None => Ok(()),
                }
            }
            (true, _) => sets_src.update(Pod::new(&name, replicas)).map(drop),
        };
        clock.advance(Duration::from_millis(rng.below(1500)));
        // Let the informers and workers interleave with the user (a bounded wait, not a sleep).
        let seen = handle.stats().reconciles;
        let _ = tokio::time::timeout(
            Duration::from_millis(2),
            handle.wait_stats(|s| s.reconciles > seen),
        )
        .await;
    }
    set_faults.heal();
    child_faults.heal();

    let mut steps = 0;
    loop {
        steps += 1;
        if idle(&handle) && problems(&sets_src, &children_src).is_empty() {
            break;
        }
        assert!(
            steps < 3000,
            "seed {seed}: no convergence: {:?}; queue {} ready, {} in flight, {} waiting; {:?}",
            problems(&sets_src, &children_src),
            handle.queue().len(),
            handle.queue().in_flight(),
            handle.queue().waiting_len(),
            handle.stats()
        );
        clock.advance(Duration::from_millis(200));
        let seen = handle.stats().reconciles;
        let _ = tokio::time::timeout(
            Duration::from_millis(5),
            handle.wait_stats(|s| s.reconciles > seen),
        )
        .await;
    }
    let stats = handle.shutdown_async().await;
    stop.send_replace(true);
    for run in runs {
        let stopped = tokio::time::timeout(Duration::from_secs(20), run).await;
        assert!(
            matches!(stopped, Ok(Ok(Ok(())))),
            "seed {seed}: an informer did not stop cleanly"
        );
    }
    let injected = [set_faults.stats(), child_faults.stats()]
        .iter()
        .map(|s| {
            s.list_errors
                + s.watch_errors
                + s.clean_cuts
                + s.error_cuts
                + s.duplicates
                + s.delays
                + s.lifetime_cuts
        })
        .sum();
    (steps, injected, stats.reconciles)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_triggered_controller_converges_after_faults_stop() {
    let count = env_u64("KCACHE_CONTROLLER_SEEDS", DEFAULT_SEEDS);
    let start = env_u64("KCACHE_CONTROLLER_SEED_START", 0);
    let started = SystemClock.now();
    let (mut faults, mut reconciles, mut max_steps) = (0, 0, 0);
    for seed in start..start.saturating_add(count) {
        let outcome = std::panic::AssertUnwindSafe(one_seed(seed))
            .catch_unwind()
            .await;
        let (steps, f, r) = outcome.unwrap_or_else(|panic| {
            eprintln!(
                "seed {seed} failed; replay: KCACHE_CONTROLLER_SEED_START={seed} \
                 KCACHE_CONTROLLER_SEEDS=1 cargo test -p kcache-controller --test convergence"
            );
            std::panic::resume_unwind(panic)
        });
        faults += f;
        reconciles += r;
        max_steps = max_steps.max(steps);
    }
    assert!(
        faults > 2 * count,
        "the schedules injected faults ({faults})"
    );
    eprintln!(
        "controller convergence: {count} seeds from {start} converged; {faults} faults injected, \
         {reconciles} reconciles; at most {max_steps} steps after healing; {:.1} s",
        (SystemClock.now() - started).as_secs_f64()
    );
}
