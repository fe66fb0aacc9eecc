//! Convergence under faults: seeded random schedules of source mutations (creates, updates,
//! deletes, bursts on hot keys) interleaved with injected faults (failed lists and watches of
//! every error class, cut watches, duplicated events, delays) and a misbehaving server's answers
//! (`FaultPlan::hostile`: endless lists, empty continue tokens, instant clean closes, bookmarks
//! without a version), on a `FakeClock`. After the
//! injector heals and time passes, the store the reflector wrote must equal the source exactly.
//!
//! `KCACHE_CONVERGENCE_SEEDS` (default 500) and `KCACHE_CONVERGENCE_SEED_START` (default 0) choose
//! the seeds; a failing seed prints the command that replays it alone.

mod common;

use common::{MapStore, Pod};
use kcache_core::FakeClock;
use kcache_memory::{MemoryConfig, MemorySource};
use kcache_reflector::{BackoffConfig, FaultInjector, FaultPlan, Reflector};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// SplitMix64, for the schedule.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn source_view(source: &MemorySource<Pod>) -> BTreeMap<String, String> {
    source
        .list_all()
        .iter()
        .map(|p| (format!("{}/{}", p.ns, p.name), p.rv.to_string()))
        .collect()
}

async fn yield_n(n: u64) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// One schedule; `Err` describes the divergence.
async fn run_seed(seed: u64) -> Result<String, String> {
    let mut rng = Rng(seed ^ 0x5eed_c0de);
    let clock = FakeClock::new();
    let config = MemoryConfig::new()
        .with_clock(clock.clone())
        .with_history_window(8 + rng.below(64) as usize)
        .with_bookmark_interval(Duration::from_secs(1 + rng.below(20)))
        .with_watcher_buffer(16 + rng.below(256) as usize);
    let source: MemorySource<Pod> = MemorySource::with_config(config);
    // A flaky network and a misbehaving server (endless lists, empty continue tokens, watches
    // that close right after an event, bookmarks without a version).
    let mut plan = FaultPlan::hostile(seed);
    plan.list_error = rng.below(40) as f64 / 100.0;
    plan.watch_error = rng.below(40) as f64 / 100.0;
    plan.cut_watch = (20 + rng.below(70)) as f64 / 100.0;
    plan.max_events_before_cut = rng.below(20) as u32;
    let faulty = FaultInjector::with_clock(source.clone(), plan, Arc::new(clock.clone()));
    let faults = faulty.handle();
    let store = MapStore::default();
    let backoff = if rng.chance(70) {
        BackoffConfig {
            initial: Duration::from_millis(20),
            cap: Duration::from_secs(1),
            ..BackoffConfig::default()
        }
    } else {
        BackoffConfig::default()
    };
    let errors = Arc::new(AtomicU64::new(0));
    let counter = errors.clone();
    let reflector = Reflector::builder(faulty, store.clone())
        .backoff(backoff)
        .on_watch_error(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .clock(Arc::new(clock.clone()))
        .seed(seed)
        .page_size(1 + rng.below(12) as u32)
        .max_list_pages(200)
        .min_watch_timeout(Duration::from_secs(1 + rng.below(10)))
        .streaming_initial_list(rng.chance(50))
        .build();
    let handle = reflector.handle();
    let task = tokio::spawn(reflector.run());

    let keys = 6 + rng.below(40);
    let mut value = 0u64;
    for _ in 0..(50 + rng.below(250)) {
        let burst = if rng.chance(10) { 5 + rng.below(15) } else { 1 };
        let hot = rng.chance(40);
        let pick = |rng: &mut Rng| if hot { rng.below(3) } else { rng.below(keys) };
        let k = pick(&mut rng);
        for _ in 0..burst {
            value += 1;
            let name = format!("p{k}");
            let obj = Pod {
                ns: "ns".into(),
                name: name.clone(),
                rv: "".into(),
                value,
            };
            if source.get(&format!("ns/{name}")).is_none() {
                let _ = source.create(obj);
            } else if rng.chance(25) {
                let _ = source.delete(&format!("ns/{name}"));
            } else {
                let _ = source.update(obj);
            }
        }
        if rng.chance(70) {
            clock.advance(Duration::from_millis(rng.below(1500)));
        }
        yield_n(rng.below(8)).await;
    }

    faults.heal();
    let want = source_view(&source);
    let mut converged_at = None;
    for round in 0..400u32 {
        clock.advance(Duration::from_secs(2));
        yield_n(40).await;
        if store.snapshot() == want {
            converged_at = Some(round);
            break;
        }
    }
    let Some(round) = converged_at else {
        let got = store.snapshot();
        handle.stop();
        let _ = task.await;
        return Err(format!(
            "store never matched the source\n source ({}): {want:?}\n store  ({}): {got:?}\n faults: {:?}",
            want.len(),
            got.len(),
            faults.stats()
        ));
    };
    // Stable: more time and more bookmarks change nothing.
    for _ in 0..20 {
        clock.advance(Duration::from_secs(7));
        yield_n(20).await;
    }
    let got = store.snapshot();
    handle.stop();
    let _ = task.await;
    if got != want {
        return Err(format!(
            "store drifted after converging: {got:?} vs {want:?}"
        ));
    }
    Ok(format!(
        "converged after {round} rounds; {} errors reported; faults {:?}",
        errors.load(Ordering::Relaxed),
        faults.stats()
    ))
}

#[test]
fn the_store_equals_the_source_after_faults_heal_for_every_seed() {
    let count = env_u64("KCACHE_CONVERGENCE_SEEDS", 500);
    let start = env_u64("KCACHE_CONVERGENCE_SEED_START", 0);
    let started = kcache_core::Clock::now(&kcache_core::SystemClock);
    let mut failures = Vec::new();
    for seed in start..start.saturating_add(count) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime");
        let outcome = rt.block_on(run_seed(seed));
        if std::env::var_os("KCACHE_CONVERGENCE_VERBOSE").is_some() {
            eprintln!("seed {seed}: {outcome:?}");
        }
        if let Err(why) = outcome {
            eprintln!(
                "seed {seed} diverged: {why}\nreplay: KCACHE_CONVERGENCE_SEED_START={seed} \
                 KCACHE_CONVERGENCE_SEEDS=1 cargo test -p kcache-reflector --test convergence"
            );
            failures.push(seed);
        }
    }
    let elapsed = kcache_core::Clock::now(&kcache_core::SystemClock) - started;
    eprintln!(
        "convergence: {count} seeds from {start}, {} divergences, {:.1} s",
        failures.len(),
        elapsed.as_secs_f64()
    );
    assert!(failures.is_empty(), "diverging seeds: {failures:?}");
}
