//! `PollingListWatcher`: a list-only source (a table in a map) turned into list + watch. Its watch
//! reports what changed between polls (by row version, or by content hash for unversioned rows),
//! refuses listings it cannot diff, and a reflector over it converges under injected faults.

mod common;

use common::{MapStore, Pod};
use futures::{FutureExt, StreamExt};
use kcache_core::{Clock, FakeClock, ResourceVersion};
use kcache_reflector::{
    content_fingerprint, BackendError, BackoffConfig, ErrorKind, FaultInjector, FaultPlan,
    ListOptions, ListWatcher, PollError, PollingListWatcher, Reflector, WatchEvent, WatchOptions,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PERIOD: Duration = Duration::from_secs(5);

/// A list-only source: rows name -> (value, row version); the next `fail` polls fail.
#[derive(Clone, Default)]
struct Table {
    rows: Arc<Mutex<BTreeMap<String, (u64, u64)>>>,
    fail: Arc<AtomicU32>,
    polls: Arc<AtomicU32>,
    version: Arc<AtomicU32>,
}

impl Table {
    fn put(&self, name: &str, value: u64) {
        let v = u64::from(self.version.fetch_add(1, Ordering::SeqCst)) + 1;
        self.rows.lock().unwrap().insert(name.into(), (value, v));
    }
    fn remove(&self, name: &str) {
        self.rows.lock().unwrap().remove(name);
    }
    /// The rows as pods; `versioned` puts the row version in `rv`, else leaves it empty.
    fn read(&self, versioned: bool) -> Result<Vec<Pod>, std::io::Error> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(std::io::Error::other("table unreachable"));
        }
        let rows = self.rows.lock().unwrap();
        Ok(rows
            .iter()
            .map(|(name, (value, v))| Pod {
                ns: "ns".into(),
                name: name.clone(),
                rv: if versioned {
                    v.to_string().into()
                } else {
                    ResourceVersion::default()
                },
                value: *value,
            })
            .collect())
    }
    /// The rows as the store must end up: key -> the version the poller reports.
    fn view(&self, versioned: bool) -> BTreeMap<String, String> {
        let rows = self.rows.lock().unwrap();
        rows.iter()
            .map(|(name, (value, v))| {
                let rv = if versioned {
                    v.to_string()
                } else {
                    format!("h{:016x}", fingerprint_of(name, *value))
                };
                (format!("ns/{name}"), rv)
            })
            .collect()
    }
}

fn fingerprint_of(name: &str, value: u64) -> u64 {
    content_fingerprint(&(name, value))
}

type ListFn = Box<
    dyn Fn() -> futures::future::Ready<Result<Vec<Pod>, std::io::Error>> + Send + Sync + 'static,
>;

fn poller(table: &Table, clock: &FakeClock, versioned: bool) -> PollingListWatcher<Pod, ListFn> {
    let t = table.clone();
    let list: ListFn = Box::new(move || futures::future::ready(t.read(versioned)));
    let lw = PollingListWatcher::new(list)
        .period(PERIOD)
        .clock(Arc::new(clock.clone()));
    if versioned {
        lw
    } else {
        lw.content_hash(|p: &Pod| fingerprint_of(&p.name, p.value))
    }
}

fn describe(ev: &WatchEvent<Pod>) -> String {
    match ev {
        WatchEvent::Added(o) => format!("+{}={}", o.name, o.value),
        WatchEvent::Modified(o) => format!("~{}={}", o.name, o.value),
        WatchEvent::Deleted(o) => format!("-{}={}", o.name, o.value),
        WatchEvent::Bookmark(b) => format!(
            "#{}{}",
            b.resource_version,
            if b.initial_events_end { " end" } else { "" }
        ),
    }
}

/// The watch's next item, within a bound (a hang fails the test instead of stalling it).
async fn next(
    watch: &mut kcache_reflector::WatchStream<Pod, PollError<std::io::Error>>,
) -> Option<Result<WatchEvent<Pod>, PollError<std::io::Error>>> {
    let bound = Duration::from_secs(10);
    tokio::time::timeout(bound, watch.next())
        .await
        .expect("the watch answered within the bound")
}

fn from(rv: &ResourceVersion) -> WatchOptions {
    WatchOptions {
        resource_version: rv.clone(),
        allow_bookmarks: true,
        ..WatchOptions::default()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_reports_each_change_between_two_polls_then_a_bookmark() {
    let (table, clock) = (Table::default(), FakeClock::new());
    table.put("a", 1);
    table.put("b", 1);
    let lw = poller(&table, &clock, true);
    let page = lw.list(&ListOptions::default()).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.resource_version.as_str(), "poll-1");
    let mut watch = lw.watch(&from(&page.resource_version)).await.unwrap();

    table.put("a", 2);
    table.remove("b");
    table.put("c", 3);
    assert!(
        watch.next().now_or_never().is_none(),
        "no poll before the period"
    );
    clock.advance(PERIOD - Duration::from_millis(1));
    assert!(
        watch.next().now_or_never().is_none(),
        "no poll before the period"
    );
    clock.advance(Duration::from_millis(1));
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(describe(&next(&mut watch).await.unwrap().unwrap()));
    }
    assert_eq!(got, ["~a=2", "-b=1", "+c=3", "#poll-2"]);

    // A poll that finds nothing new sends nothing.
    clock.advance(PERIOD);
    assert!(watch.next().now_or_never().is_none());
    table.remove("a");
    clock.advance(PERIOD);
    let got: Vec<_> = [next(&mut watch).await, next(&mut watch).await]
        .iter()
        .map(|e| describe(e.as_ref().unwrap().as_ref().unwrap()))
        .collect();
    assert_eq!(got, ["-a=2", "#poll-3"]);
    assert_eq!(table.polls.load(Ordering::SeqCst), 4);
}

#[tokio::test(flavor = "current_thread")]
async fn an_unversioned_source_is_compared_by_content_and_stamped_with_its_hash() {
    let (table, clock) = (Table::default(), FakeClock::new());
    table.put("a", 1);
    table.put("b", 1);
    let unhashed = PollingListWatcher::new({
        let t = table.clone();
        move || futures::future::ready(t.read(false))
    });
    let err = unhashed.list(&ListOptions::default()).await.unwrap_err();
    assert!(matches!(&err, PollError::MissingResourceVersion(k) if k.as_str() == "ns/a"));
    assert_eq!(err.kind(), ErrorKind::Other);

    let lw = poller(&table, &clock, false);
    let page = lw.list(&ListOptions::default()).await.unwrap();
    let rvs: Vec<_> = page.items.iter().map(|p| p.rv.to_string()).collect();
    let want: Vec<_> = table.view(false).into_values().collect();
    assert_eq!(rvs, want);
    let mut watch = lw.watch(&from(&page.resource_version)).await.unwrap();
    table.put("b", 2); // the row version moves, but only the content counts here
    table.put("a", 1); // same content: not a change
    clock.advance(PERIOD);
    let changed = next(&mut watch).await.unwrap().unwrap();
    assert_eq!(describe(&changed), "~b=2");
    let WatchEvent::Modified(b) = changed else {
        unreachable!()
    };
    assert_eq!(b.rv.to_string(), table.view(false)["ns/b"]);
    assert_ne!(b.rv, page.items[1].rv);
    assert_eq!(
        describe(&next(&mut watch).await.unwrap().unwrap()),
        "#poll-2"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_resumes_only_from_a_recent_poll_and_ends_at_its_timeout() {
    let (table, clock) = (Table::default(), FakeClock::new());
    table.put("a", 1);
    let lw = poller(&table, &clock, true);
    let page = lw.list(&ListOptions::default()).await.unwrap();
    for rv in ["", "0", "1", "poll-9"] {
        let err = lw.watch(&from(&ResourceVersion::from(rv))).await.err();
        let err = err.unwrap_or_else(|| panic!("a watch from {rv:?} must expire"));
        assert!(matches!(err, PollError::Expired(_)));
        assert_eq!(err.kind(), ErrorKind::Expired);
    }
    let opts = WatchOptions {
        timeout: Some(PERIOD * 2 + Duration::from_secs(1)),
        ..from(&page.resource_version)
    };
    let mut watch = lw.watch(&opts).await.unwrap();
    table.put("b", 1);
    clock.advance(PERIOD);
    assert_eq!(describe(&next(&mut watch).await.unwrap().unwrap()), "+b=1");
    assert_eq!(
        describe(&next(&mut watch).await.unwrap().unwrap()),
        "#poll-2"
    );
    clock.advance(PERIOD);
    assert!(watch.next().now_or_never().is_none());
    clock.advance(Duration::from_secs(1));
    assert!(
        next(&mut watch).await.is_none(),
        "a clean end at the timeout"
    );
    assert!(lw
        .watch(&from(&ResourceVersion::from("poll-2")))
        .await
        .is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn a_streaming_list_sends_every_object_then_the_end_bookmark() {
    let (table, clock) = (Table::default(), FakeClock::new());
    table.put("a", 1);
    table.put("b", 2);
    let lw = poller(&table, &clock, true);
    let opts = WatchOptions {
        send_initial_events: true,
        ..WatchOptions::default()
    };
    let mut watch = lw.watch(&opts).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(describe(&next(&mut watch).await.unwrap().unwrap()));
    }
    assert_eq!(got, ["+a=1", "+b=2", "#poll-1 end"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_poll_ends_the_watch_with_a_retry_error_and_a_bad_listing_is_refused_whole() {
    let (table, clock) = (Table::default(), FakeClock::new());
    table.put("a", 1);
    let lw = poller(&table, &clock, true);
    let page = lw.list(&ListOptions::default()).await.unwrap();
    let mut watch = lw.watch(&from(&page.resource_version)).await.unwrap();
    table.fail.store(1, Ordering::SeqCst);
    clock.advance(PERIOD);
    let err = next(&mut watch).await.unwrap().unwrap_err();
    assert!(matches!(err, PollError::Source(_)));
    assert_eq!(err.kind(), ErrorKind::Retry);
    assert!(next(&mut watch).await.is_none());
    // The reflector watches again from the last poll it applied: still there.
    let mut watch = lw.watch(&from(&page.resource_version)).await.unwrap();
    table.put("b", 1);
    let got = next(&mut watch).await.unwrap().unwrap();
    assert_eq!(describe(&got), "+b=1", "a late re-watch polls at once");

    // Two rows under one key: refused, typed.
    let dup = PollingListWatcher::new(|| async {
        let p = Pod {
            ns: "ns".into(),
            name: "x".into(),
            rv: "1".into(),
            value: 0,
        };
        Ok::<_, std::io::Error>(vec![p.clone(), p])
    });
    let err = dup.list(&ListOptions::default()).await.unwrap_err();
    assert!(matches!(&err, PollError::DuplicateKey(k) if k.as_str() == "ns/x"));
}

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
}

async fn yield_n(n: u64) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// One seeded schedule of table writes and injected faults; `Err` describes a divergence.
async fn converge(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let versioned = rng.below(2) == 0;
    let (table, clock) = (Table::default(), FakeClock::new());
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let faulty = FaultInjector::with_clock(
        poller(&table, &clock, versioned),
        FaultPlan::chaos(seed),
        shared.clone(),
    );
    let faults = faulty.handle();
    table.fail.store(rng.below(3) as u32, Ordering::SeqCst);
    let store = MapStore::default();
    let reflector = Reflector::builder(faulty, store.clone())
        .clock(shared)
        .seed(seed)
        .backoff(BackoffConfig {
            initial: Duration::from_millis(100),
            cap: Duration::from_secs(4),
            ..BackoffConfig::default()
        })
        .min_watch_timeout(Duration::from_secs(1 + rng.below(30)))
        .streaming_initial_list(rng.below(2) == 0)
        .build();
    let handle = reflector.handle();
    let task = tokio::spawn(reflector.run());
    for _ in 0..60 {
        let name = format!("r{}", rng.below(8));
        match rng.below(4) {
            0 => table.remove(&name),
            _ => table.put(&name, rng.below(4)),
        }
        if rng.below(10) == 0 {
            table.fail.store(1 + rng.below(2) as u32, Ordering::SeqCst);
        }
        clock.advance(Duration::from_millis(rng.below(4000)));
        yield_n(rng.below(10)).await;
    }
    faults.heal();
    table.fail.store(0, Ordering::SeqCst);
    let want = table.view(versioned);
    let mut converged = false;
    for _ in 0..200 {
        clock.advance(Duration::from_secs(2));
        yield_n(30).await;
        if store.snapshot() == want {
            converged = true;
            break;
        }
    }
    handle.stop();
    let _ = task.await;
    if converged {
        Ok(())
    } else {
        Err(format!(
            "versioned={versioned}: store {:?} != table {want:?}; faults {:?}",
            store.snapshot(),
            faults.stats()
        ))
    }
}

#[test]
fn a_reflector_over_a_polled_table_converges_after_faults_heal() {
    let mut failures = Vec::new();
    for seed in 0..150 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime");
        if let Err(why) = rt.block_on(converge(seed)) {
            eprintln!("seed {seed}: {why}");
            failures.push(seed);
        }
    }
    assert!(failures.is_empty(), "diverging seeds: {failures:?}");
}
