//! Convergence under faults: seeded schedules of source mutations and injected faults (watch
//! cuts, failed lists and watches, expired versions, duplicated events, delays). Once the faults
//! stop, the informer's cache must equal the source exactly, and every handler's view (its
//! notifications replayed into a map) must equal it too: an ordered handler, a coalescing one,
//! and one that joined halfway. The faults include a misbehaving server's answers
//! (`FaultPlan::hostile`: endless lists, empty continue tokens, watches that close right after an
//! event, bookmarks without a version).
//!
//! `KCACHE_CONVERGENCE_SEEDS` (default 200) and `KCACHE_CONVERGENCE_SEED_START` (default 0)
//! choose the seeds, as in the reflector's suite; a failing seed prints the command that replays
//! it alone.

mod common;

use common::*;
use kcache_informer::{BufferMode, HandlerOptions, InformerOptions, SharedIndexInformer};
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::{FaultInjector, FaultPlan};
use std::sync::Arc;
use std::time::Duration;

/// Seeds `cargo test` runs when `KCACHE_CONVERGENCE_SEEDS` is not set.
const DEFAULT_SEEDS: u64 = 200;
const OPS: usize = 30;
const KEYS: u64 = 6;

/// SplitMix64: a tiny seeded generator for the schedules.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

async fn one_seed(seed: u64) -> (usize, u64) {
    let clock = kcache_core::FakeClock::new();
    let src: MemorySource<Pod> = MemorySource::with_config(
        MemoryConfig::new()
            .with_clock(clock.clone())
            .with_history_window(8),
    );
    let faulty = FaultInjector::with_clock(
        src.clone(),
        FaultPlan::hostile(seed),
        Arc::new(clock.clone()),
    );
    let faults = faulty.handle();
    let mut options = InformerOptions::new()
        .name(format!("seed-{seed}"))
        .resync_period(Duration::from_secs(3))
        .max_list_pages(100)
        // Lists of several pages (applied page by page, the next fetched once the last was
        // applied) meet the faults too: failures and expired continue tokens mid-list.
        .page_size(1 + (seed % 3) as u32)
        .clock(Arc::new(clock.clone()));
    // The memory source streams its lists by default (watch-list, falling back to a list when a
    // stream fails); every fourth seed lists only.
    if seed % 4 == 3 {
        options = options.streaming_initial_list(false);
    }
    let inf = Arc::new(SharedIndexInformer::with_options(faulty, options));
    let ordered = Recorder::new();
    let coalescing = Recorder::new();
    inf.add_event_handler(ordered.clone()).unwrap();
    inf.add_event_handler_with_options(
        coalescing.clone(),
        HandlerOptions::new().buffer_mode(BufferMode::Coalescing),
    )
    .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let i2 = inf.clone();
    let task = tokio::spawn(async move {
        i2.run(async {
            let _ = stop_rx.await;
        })
        .await
    });

    let mut rng = Rng(seed ^ 0x5eed);
    let mut late = None;
    for op in 0..OPS {
        let name = format!("k{}", rng.below(KEYS));
        let key = format!("default/{name}");
        let value = rng.below(1000) as u32;
        let written = match (src.get(&key).is_some(), rng.below(4)) {
            (false, _) => src.create(Pod::new(&name, value)),
            (true, 0) => src.delete(&key),
            (true, _) => src.update(Pod::new(&name, value)),
        };
        // Now and then let the informer catch up (a short, bounded wait), so that its watches
        // and relists interleave with the writes and meet the injected faults.
        if let (Ok(w), 0) = (written, rng.below(2)) {
            let _ = tokio::time::timeout(
                Duration::from_millis(2),
                inf.wait_for_resource_version(&w.rv),
            )
            .await;
        }
        if op == OPS / 2 {
            let rec = Recorder::new();
            late = Some((rec.clone(), inf.add_event_handler(rec).unwrap()));
        }
        clock.advance(Duration::from_millis(rng.below(3000)));
        if rng.below(3) == 0 {
            tokio::task::yield_now().await;
        }
    }
    faults.heal();
    let (late, late_reg) = late.unwrap();

    let want = source_view(&src);
    let target = src.resource_version();
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(
            steps < 2000,
            "seed {seed}: no convergence; source {want:?}\ncache {:?}\nordered {:?}\ncoalescing {:?}\nlate {:?}",
            cache_view(inf.indexer().list()),
            ordered.view(),
            coalescing.view(),
            late.view(),
        );
        let reached = tokio::time::timeout(
            Duration::from_millis(5),
            inf.wait_for_resource_version(&target),
        )
        .await
        .is_ok();
        if reached
            && cache_view(inf.indexer().list()) == want
            && ordered.view() == want
            && coalescing.view() == want
            && late.view() == want
        {
            break;
        }
        if !reached {
            clock.advance(Duration::from_secs(5));
        } else {
            // The cache is there; give the handlers' threads a moment (a bounded wait on their
            // notifications, not a sleep).
            let counts = (ordered.len(), coalescing.len(), late.len());
            let _ = tokio::time::timeout(Duration::from_millis(5), async {
                tokio::join!(
                    ordered.wait_for_quiet(counts.0 + 1),
                    coalescing.wait_for_quiet(counts.1 + 1),
                    late.wait_for_quiet(counts.2 + 1)
                )
            })
            .await;
        }
    }
    // Its view is complete; its last call may still be returning.
    let synced = tokio::time::timeout(WAIT, late_reg.synced()).await;
    assert_eq!(synced, Ok(true), "seed {seed}: the late handler has synced");
    stop_tx.send(()).unwrap();
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let stats = faults.stats();
    (
        steps,
        stats.list_errors
            + stats.watch_errors
            + stats.clean_cuts
            + stats.error_cuts
            + stats.duplicates
            + stats.delays
            + stats.endless_pages
            + stats.empty_continues
            + stats.instant_closes
            + stats.unversioned_bookmarks,
    )
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_faults_stop_the_cache_and_every_handler_view_equal_the_source() {
    use futures::FutureExt;
    let count = env_u64("KCACHE_CONVERGENCE_SEEDS", DEFAULT_SEEDS);
    let start = env_u64("KCACHE_CONVERGENCE_SEED_START", 0);
    let started = kcache_core::Clock::now(&kcache_core::SystemClock);
    let mut faults = 0;
    let mut max_steps = 0;
    for seed in start..start.saturating_add(count) {
        let outcome = std::panic::AssertUnwindSafe(one_seed(seed))
            .catch_unwind()
            .await;
        let (steps, f) = outcome.unwrap_or_else(|panic| {
            eprintln!(
                "seed {seed} failed; replay: KCACHE_CONVERGENCE_SEED_START={seed} \
                 KCACHE_CONVERGENCE_SEEDS=1 cargo test -p kcache-informer --test convergence"
            );
            std::panic::resume_unwind(panic)
        });
        faults += f;
        max_steps = max_steps.max(steps);
    }
    assert!(
        faults > 2 * count,
        "the schedules injected faults ({faults})"
    );
    let elapsed = kcache_core::Clock::now(&kcache_core::SystemClock) - started;
    eprintln!(
        "informer convergence: {count} seeds from {start} converged; {faults} faults injected; \
         at most {max_steps} steps after healing; {:.1} s",
        elapsed.as_secs_f64()
    );
}
