//! An informer over a `PollingListWatcher` (a list-only "table" polled every period) behaves like
//! an informer over any other backend: adds, updates and deletes reach the handlers as such, a
//! failing source backs off and leaves the cache as it was, and under injected faults the cache and
//! every handler's view converge to the table.

mod common;

use common::*;
use kcache_core::{Clock, FakeClock, ResourceVersion};
use kcache_informer::{BufferMode, Event, HandlerOptions, InformerOptions, SharedIndexInformer};
use kcache_reflector::{
    content_fingerprint, FaultInjector, FaultPlan, ListWatcher, PollingListWatcher,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

const PERIOD: Duration = Duration::from_secs(1);

/// A list-only source: rows name -> (value, row version). While `failing`, every poll fails.
#[derive(Clone)]
struct Table {
    rows: Arc<Mutex<BTreeMap<String, (u32, u64)>>>,
    version: Arc<AtomicU32>,
    failing: Arc<Mutex<bool>>,
    clock: FakeClock,
    /// The clock's time at every poll, and a counter to wait on.
    polls: Arc<Mutex<Vec<Instant>>>,
    polled: Arc<watch::Sender<usize>>,
}

impl Table {
    fn new(clock: &FakeClock) -> Self {
        Self {
            rows: Arc::default(),
            version: Arc::default(),
            failing: Arc::default(),
            clock: clock.clone(),
            polls: Arc::default(),
            polled: Arc::new(watch::Sender::new(0)),
        }
    }
    fn put(&self, name: &str, value: u32) {
        let v = u64::from(self.version.fetch_add(1, Ordering::SeqCst)) + 1;
        self.rows.lock().unwrap().insert(name.into(), (value, v));
    }
    fn remove(&self, name: &str) {
        self.rows.lock().unwrap().remove(name);
    }
    fn read(&self, versioned: bool) -> Result<Vec<Pod>, std::io::Error> {
        self.polls.lock().unwrap().push(self.clock.now());
        self.polled.send_modify(|n| *n += 1);
        if *self.failing.lock().unwrap() {
            return Err(std::io::Error::other("table unreachable"));
        }
        let rows = self.rows.lock().unwrap();
        Ok(rows
            .iter()
            .map(|(name, (value, v))| {
                let mut p = Pod::new(name, *value);
                if versioned {
                    p.rv = ResourceVersion::from(v.to_string());
                }
                p
            })
            .collect())
    }
    /// What the cache must hold: key -> (value, the version the poller reports).
    fn view(&self, versioned: bool) -> BTreeMap<String, (u32, String)> {
        let rows = self.rows.lock().unwrap();
        rows.iter()
            .map(|(name, (value, v))| {
                let rv = if versioned {
                    v.to_string()
                } else {
                    format!("h{:016x}", fingerprint(name, *value))
                };
                (format!("default/{name}"), (*value, rv))
            })
            .collect()
    }
}

fn fingerprint(name: &str, value: u32) -> u64 {
    content_fingerprint(&(name, value))
}

fn poller(table: &Table, clock: &FakeClock, versioned: bool) -> impl ListWatcher<Pod> {
    let t = table.clone();
    let lw = PollingListWatcher::new(move || std::future::ready(t.read(versioned)))
        .period(PERIOD)
        .clock(Arc::new(clock.clone()));
    if versioned {
        lw
    } else {
        lw.content_hash(|p: &Pod| fingerprint(&p.name, p.value))
    }
}

fn informer_over<L: ListWatcher<Pod>>(
    lw: L,
    clock: &FakeClock,
    name: &str,
) -> Arc<SharedIndexInformer<Pod, L>> {
    Arc::new(SharedIndexInformer::with_options(
        lw,
        InformerOptions::new()
            .name(name)
            .clock(Arc::new(clock.clone())),
    ))
}

/// Runs `informer` until the returned sender fires.
fn start<L: ListWatcher<Pod>>(
    informer: &Arc<SharedIndexInformer<Pod, L>>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), kcache_informer::InformerError>>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let inf = informer.clone();
    let task = tokio::spawn(async move {
        inf.run(async {
            let _ = rx.await;
        })
        .await
    });
    (tx, task)
}

/// Advances `clock` by `step` until `done` holds, giving the informer a bounded moment after each
/// step; fails after `max_steps`.
async fn advance_until(
    clock: &FakeClock,
    step: Duration,
    max_steps: u32,
    what: &str,
    mut done: impl FnMut() -> bool,
) {
    for _ in 0..max_steps {
        if done() {
            return;
        }
        clock.advance(step);
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let _ = tokio::time::timeout(Duration::from_millis(2), std::future::pending::<()>()).await;
    }
    assert!(done(), "never happened: {what}");
}

fn describe(events: &[Event<Pod>]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Added { obj, .. } => format!("add {}={}", obj.name, obj.value),
            Event::Updated { old, new } => {
                format!("update {} {}->{}", new.name, old.value, new.value)
            }
            Event::Deleted(d) => format!(
                "delete {}={}{}",
                d.key(),
                d.object().map_or(-1, |o| i64::from(o.value)),
                if d.is_final_state_unknown() {
                    " (tombstone)"
                } else {
                    ""
                }
            ),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_updates_and_deletes_of_a_polled_table_reach_the_handlers_as_such() {
    for versioned in [true, false] {
        let clock = FakeClock::new();
        let table = Table::new(&clock);
        table.put("a", 1);
        table.put("b", 1);
        let inf = informer_over(poller(&table, &clock, versioned), &clock, "table");
        let rec = Recorder::new();
        inf.add_event_handler(rec.clone()).unwrap();
        let (stop, task) = start(&inf);
        let synced = tokio::time::timeout(WAIT, inf.wait_for_cache_sync()).await;
        assert_eq!(synced, Ok(true));
        rec.wait_for(2).await;

        table.put("a", 2);
        table.put("b", 1); // a new row version, same content
        table.remove("a");
        table.put("a", 3);
        table.remove("b");
        table.put("c", 1);
        clock.advance(PERIOD);
        rec.wait_for(5).await;
        assert_eq!(
            describe(&rec.events()),
            [
                "add a=1",
                "add b=1",
                "update a 1->3",
                "delete default/b=1",
                "add c=1"
            ],
            "versioned: {versioned}"
        );
        assert_eq!(cache_view(inf.indexer().list()), table.view(versioned));
        let _ = stop.send(());
        let r = tokio::time::timeout(WAIT, task).await;
        assert!(matches!(r, Ok(Ok(Ok(())))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_backs_off_and_the_cache_keeps_its_contents() {
    let clock = FakeClock::new();
    let table = Table::new(&clock);
    table.put("a", 1);
    table.put("b", 1);
    let inf = informer_over(poller(&table, &clock, true), &clock, "table");
    let rec = Recorder::new();
    inf.add_event_handler(rec.clone()).unwrap();
    let (stop, task) = start(&inf);
    assert_eq!(
        tokio::time::timeout(WAIT, inf.wait_for_cache_sync()).await,
        Ok(true)
    );
    rec.wait_for(2).await;

    *table.failing.lock().unwrap() = true;
    table.remove("a"); // unseen while the table fails
    let outage_start = clock.now();
    let before = table.polls.lock().unwrap().len();
    advance_until(
        &clock,
        Duration::from_millis(500),
        240,
        "two minutes of outage",
        || clock.now() - outage_start >= Duration::from_secs(120),
    )
    .await;
    let polls: Vec<Instant> = table.polls.lock().unwrap()[before..].to_vec();
    let gaps: Vec<Duration> = polls.windows(2).map(|w| w[1] - w[0]).collect();
    // Every period without backoff would be 120 polls; client-go's backoff (0.8 s doubling,
    // jitter, cap 30 s) allows about 8.
    assert!(polls.len() >= 3, "the source was retried: {polls:?}");
    assert!(
        polls.len() <= 15,
        "{} polls in 2 minutes: {gaps:?}",
        polls.len()
    );
    assert!(
        gaps.iter().any(|g| *g >= Duration::from_secs(10)),
        "the retries spread out: {gaps:?}"
    );
    assert_eq!(
        rec.len(),
        2,
        "no event while the source fails: {:?}",
        describe(&rec.events())
    );
    assert_eq!(
        inf.indexer().list().len(),
        2,
        "the cache keeps its contents"
    );

    *table.failing.lock().unwrap() = false;
    advance_until(&clock, Duration::from_secs(1), 120, "recovery", || {
        cache_view(inf.indexer().list()) == table.view(true)
    })
    .await;
    rec.wait_for(3).await;
    assert_eq!(describe(&rec.events())[2], "delete default/a=1");
    let _ = stop.send(());
    let r = tokio::time::timeout(WAIT, task).await;
    assert!(matches!(r, Ok(Ok(Ok(())))));
}

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

async fn one_seed(seed: u64) {
    let mut rng = Rng(seed ^ 0x9011);
    let versioned = rng.below(2) == 0;
    let clock = FakeClock::new();
    let table = Table::new(&clock);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let faulty = FaultInjector::with_clock(
        poller(&table, &clock, versioned),
        FaultPlan::chaos(seed),
        shared.clone(),
    );
    let faults = faulty.handle();
    let inf = Arc::new(SharedIndexInformer::with_options(
        faulty,
        InformerOptions::new()
            .name(format!("seed-{seed}"))
            .resync_period(Duration::from_secs(3))
            .streaming_initial_list(rng.below(2) == 0)
            .clock(shared),
    ));
    let ordered = Recorder::new();
    let coalescing = Recorder::new();
    inf.add_event_handler(ordered.clone()).unwrap();
    inf.add_event_handler_with_options(
        coalescing.clone(),
        HandlerOptions::new().buffer_mode(BufferMode::Coalescing),
    )
    .unwrap();
    let (stop, task) = start(&inf);
    for _ in 0..30 {
        let name = format!("k{}", rng.below(6));
        match rng.below(4) {
            0 => table.remove(&name),
            _ => table.put(&name, rng.below(5) as u32),
        }
        *table.failing.lock().unwrap() = rng.below(8) == 0;
        clock.advance(Duration::from_millis(rng.below(3000)));
        if rng.below(2) == 0 {
            let _ =
                tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>()).await;
        }
    }
    faults.heal();
    *table.failing.lock().unwrap() = false;
    let want = table.view(versioned);
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(
            steps < 2000,
            "seed {seed} (versioned {versioned}): no convergence; table {want:?}\ncache {:?}\nordered {:?}\ncoalescing {:?}\nfaults {:?}",
            cache_view(inf.indexer().list()),
            ordered.view(),
            coalescing.view(),
            faults.stats(),
        );
        if cache_view(inf.indexer().list()) == want
            && ordered.view() == want
            && coalescing.view() == want
        {
            break;
        }
        clock.advance(Duration::from_secs(2));
        let counts = (ordered.len(), coalescing.len());
        let _ = tokio::time::timeout(Duration::from_millis(5), async {
            tokio::join!(
                ordered.wait_for_quiet(counts.0 + 1),
                coalescing.wait_for_quiet(counts.1 + 1)
            )
        })
        .await;
    }
    let _ = stop.send(());
    let r = tokio::time::timeout(WAIT, task).await;
    assert!(
        matches!(r, Ok(Ok(Ok(())))),
        "seed {seed}: the informer stops cleanly"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_faults_stop_an_informer_over_a_polled_table_equals_the_table() {
    for seed in 0..60 {
        one_seed(seed).await;
    }
}
