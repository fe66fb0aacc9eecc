//! The kcache Reflector over kcache-etcd against a real etcd (`KCACHE_ETCD_ENDPOINTS`; skipped,
//! with a message, when it is not set): sync, follow, a burst of 100,000 writes, malformed values.

mod common;

use common::*;
use etcd_client::Client;
use kcache_core::{Clock, ObjectKey, SystemClock};
use kcache_etcd::{EtcdListWatcher, EtcdObjects};
use kcache_reflector::{ErrorKind, Reflector, ReflectorHandle};
use std::time::Duration;

type Lw = EtcdListWatcher<Item>;

/// Starts a reflector over `prefix` into a new store; returns the store, its stop handle and
/// what its hook saw.
fn start(client: &Client, prefix: &str) -> (TestStore, ReflectorHandle, Reports) {
    let store = TestStore::default();
    let reports = Reports::default();
    let reflector = Reflector::builder(Lw::new(client.clone(), prefix), store.clone())
        .name(prefix.to_owned())
        .backoff(quick_backoff())
        .on_watch_error(reports.hook())
        .build();
    let handle = reflector.handle();
    tokio::spawn(reflector.run());
    (store, handle, reports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reflector_syncs_the_store_and_follows_updates() {
    let Some(endpoint) = endpoints("reflector_sync") else {
        return;
    };
    let client = connect(&endpoint).await;
    let prefix = unique_prefix("reflector_sync");
    put_all(&client, &prefix, items(2_000, 1), 4).await;

    let (store, handle, reports) = start(&client, &prefix);
    converge(&store, &client, &prefix, Duration::from_secs(30)).await;
    assert_eq!(store.len(), 2_000);

    // Updates, deletes, creates, and a cluster-scoped object.
    let writer = EtcdObjects::<Item>::new(client.clone(), &prefix);
    put_all(&client, &prefix, items(500, 2), 2).await;
    for i in 1_000..1_100 {
        let key = ObjectKey::namespaced("ns", &format!("item-{i:06}")).expect("key");
        writer.delete(&key).await.expect("delete");
    }
    for i in 0..50 {
        writer
            .create(&item("other", &format!("new-{i}"), 3))
            .await
            .expect("create");
    }
    writer
        .create(&item("", "cluster-wide", 4))
        .await
        .expect("create");
    converge(&store, &client, &prefix, Duration::from_secs(30)).await;
    assert_eq!(store.len(), 2_000 - 100 + 51);
    assert_eq!(
        store.replaces(),
        1,
        "followed by watch, no relist: {:?}",
        reports.all()
    );
    handle.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_100_000_writes_converges() {
    let Some(endpoint) = endpoints("burst") else {
        return;
    };
    let client = connect(&endpoint).await;
    let prefix = unique_prefix("burst");
    put_all(&client, &prefix, items(10, 0), 1).await;
    let (store, handle, reports) = start(&client, &prefix);
    converge(&store, &client, &prefix, Duration::from_secs(30)).await;

    let clock = SystemClock;
    let t0 = clock.now();
    // 100,000 writes: 60,000 creates, then 40,000 updates of them.
    within(
        Duration::from_secs(120),
        "100,000 writes",
        put_all(&client, &prefix, items(60_000, 1), 8),
    )
    .await;
    within(
        Duration::from_secs(120),
        "100,000 writes",
        put_all(&client, &prefix, items(40_000, 2), 8),
    )
    .await;
    let written = clock.now() - t0;
    converge(&store, &client, &prefix, Duration::from_secs(120)).await;
    let converged = clock.now() - t0;
    eprintln!("burst: 100,000 writes in {written:?}, store equal to etcd after {converged:?}, {} store events, errors: {:?}", store.events(), reports.all());
    assert_eq!(store.len(), 60_000);
    handle.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_values_reach_the_watch_error_hook_and_the_rest_stays_correct() {
    let Some(endpoint) = endpoints("reflector_malformed") else {
        return;
    };
    let client = connect(&endpoint).await;
    let prefix = unique_prefix("reflector_malformed");
    let mut kv = client.kv_client();
    put_all(&client, &prefix, items(100, 1), 2).await;
    kv.put(format!("{prefix}ns/listed-bad"), "not json", None)
        .await
        .expect("put");

    let (store, handle, reports) = start(&client, &prefix);
    converge(&store, &client, &prefix, Duration::from_secs(30)).await;
    wait_for(
        Duration::from_secs(20),
        "the list's bad value in the hook",
        || reports.any(ErrorKind::Retry, "ns/listed-bad"),
    )
    .await;
    assert_eq!(store.len(), 100);

    // While watching: a good object turns bad, a bad key, then more good writes.
    kv.put(format!("{prefix}ns/item-000007"), [0xffu8, 0xfe], None)
        .await
        .expect("put");
    kv.put(format!("{prefix}ns/watched-bad"), "{\"name\":", None)
        .await
        .expect("put");
    put_all(&client, &prefix, items(50, 2), 1).await; // 0..50 good again, item-000007 too
    kv.put(format!("{prefix}ns/item-000090"), "[]", None)
        .await
        .expect("put");
    converge(&store, &client, &prefix, Duration::from_secs(30)).await;
    wait_for(
        Duration::from_secs(20),
        "the watched bad values in the hook",
        || {
            reports.any(ErrorKind::Retry, "ns/watched-bad")
                && reports.any(ErrorKind::Retry, "ns/item-000090")
        },
    )
    .await;
    assert!(
        store.get("ns/item-000090").is_none(),
        "the last good state of a now-bad key is gone"
    );
    assert_eq!(store.get("ns/item-000007").map(|o| o.value), Some(2));
    assert_eq!(store.len(), 99);
    handle.stop();
}
