//! kcache-informer's `SharedIndexInformer` over `EtcdListWatcher` against a real etcd
//! (`KCACHE_ETCD_ENDPOINTS`; skipped, with a message, when it is not set): it syncs a prefix, its
//! handler hears every create, update and delete written through `EtcdObjects`, and its cache ends
//! equal to a raw range read of the prefix.

mod common;

use common::*;
use kcache_core::ObjectKey;
use kcache_etcd::{EtcdError, EtcdListWatcher, EtcdObjects};
use kcache_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// What the handler heard, in order.
#[derive(Debug, Clone, PartialEq)]
enum Heard {
    /// (key, value, in the initial list)
    Added(String, u64, bool),
    /// (key, old value, new value, new resource version)
    Updated(String, u64, u64, String),
    /// (key, last known value, final state unknown)
    Deleted(String, Option<u64>, bool),
}

fn key_of(it: &Item) -> String {
    match it.namespace.as_str() {
        "" => it.name.clone(),
        ns => format!("{ns}/{}", it.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_over_etcd_syncs_hears_every_change_and_ends_equal_to_etcd() {
    let Some(endpoint) = endpoints("informer_over_etcd") else {
        return;
    };
    let client = connect(&endpoint).await;
    let prefix = unique_prefix("informer");
    put_all(&client, &prefix, items(300, 1), 2).await;

    let informer = Arc::new(SharedIndexInformer::with_options(
        EtcdListWatcher::<Item>::new(client.clone(), &prefix),
        InformerOptions::new().name("etcd-items"),
    ));
    let heard = Arc::new(Mutex::new(Vec::new()));
    let (h1, h2, h3) = (heard.clone(), heard.clone(), heard.clone());
    let push = |h: &Arc<Mutex<Vec<Heard>>>, e: Heard| {
        h.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    };
    let registration = informer
        .add_event_handler(
            HandlerFuncs::new()
                .add_func(move |it: &Arc<Item>, initial| {
                    push(&h1, Heard::Added(key_of(it), it.value, initial))
                })
                .update_func(move |old: &Arc<Item>, new: &Arc<Item>| {
                    push(
                        &h2,
                        Heard::Updated(
                            key_of(new),
                            old.value,
                            new.value,
                            new.rv.as_str().to_owned(),
                        ),
                    )
                })
                .delete_func(move |d| {
                    push(
                        &h3,
                        Heard::Deleted(
                            d.key().as_str().to_owned(),
                            d.object().map(|it| it.value),
                            d.is_final_state_unknown(),
                        ),
                    )
                }),
        )
        .expect("register the handler");
    let heard_now = || heard.lock().unwrap_or_else(|p| p.into_inner()).clone();

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let informer = informer.clone();
        tokio::spawn(async move {
            informer
                .run(async move {
                    let _ = stop_rx.await;
                })
                .await
        })
    };

    // Sync: the whole prefix, each object once as an initial add.
    assert!(
        within(WAIT, "cache sync", informer.wait_for_cache_sync()).await,
        "the informer stopped before it synced"
    );
    assert!(within(WAIT, "handler sync", registration.synced()).await);
    assert_eq!(informer.indexer().len(), 300);
    let initial = heard_now();
    assert_eq!(initial.len(), 300, "one initial add per object");
    assert!(initial
        .iter()
        .all(|h| matches!(h, Heard::Added(_, 1, true))));

    // Changes through the writer: 40 updates (from the cached state, with optimistic
    // concurrency), 25 deletes, 15 creates (5 of them cluster-scoped).
    let writer = EtcdObjects::<Item>::new(client.clone(), &prefix);
    let stale = informer
        .indexer()
        .get_by_key("ns/item-000000")
        .expect("cached");
    let mut last_rv = None;
    for i in 0..40 {
        let key = format!("ns/item-{i:06}");
        let mut it = (*informer.indexer().get_by_key(&key).expect("cached")).clone();
        it.value = 2;
        last_rv = Some(writer.update(&it).await.expect("update").rv);
    }
    // The copy of item 0 read before its update is stale: an update from it is a conflict,
    // and no event.
    let mut it = (*stale).clone();
    it.value = 9;
    assert!(matches!(
        writer.update(&it).await,
        Err(EtcdError::Conflict { .. })
    ));
    for i in 100..125 {
        let key = ObjectKey::namespaced("ns", &format!("item-{i:06}")).expect("key");
        last_rv = Some(writer.delete(&key).await.expect("delete"));
    }
    for i in 0..15 {
        let ns = if i < 5 { "" } else { "new" };
        let created = writer
            .create(&item(ns, &format!("made-{i}"), 3))
            .await
            .expect("create");
        last_rv = Some(created.rv);
    }
    let last_rv = last_rv.expect("wrote something");
    within(
        WAIT,
        "the cache to reach the last write",
        informer.wait_for_resource_version(&last_rv),
    )
    .await
    .expect("informer running");
    wait_for(WAIT, "the handler to hear 80 changes", || {
        heard_now().len() >= 300 + 80
    })
    .await;

    let changes: Vec<Heard> = heard_now().split_off(300);
    assert_eq!(changes.len(), 80, "no extra notification: {changes:?}");
    let updates: Vec<_> = changes
        .iter()
        .filter_map(|h| match h {
            Heard::Updated(k, old, new, _) => Some((k.clone(), *old, *new)),
            _ => None,
        })
        .collect();
    let expected_updates: Vec<_> = (0..40).map(|i| (format!("ns/item-{i:06}"), 1, 2)).collect();
    assert_eq!(updates, expected_updates, "updates in write order");
    let update_revisions: Vec<u64> = changes
        .iter()
        .filter_map(|h| match h {
            Heard::Updated(_, _, _, rv) => rv.parse().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(update_revisions.len(), 40, "updates carry etcd revisions");
    assert!(
        update_revisions.windows(2).all(|w| w[0] < w[1]),
        "each update is stamped with its own, later revision: {update_revisions:?}"
    );
    let deletes: Vec<_> = changes
        .iter()
        .filter(|h| matches!(h, Heard::Deleted(..)))
        .cloned()
        .collect();
    let expected_deletes: Vec<_> = (100..125)
        .map(|i| Heard::Deleted(format!("ns/item-{i:06}"), Some(1), false))
        .collect();
    assert_eq!(deletes, expected_deletes, "deletes with their last state");
    let mut adds: Vec<_> = changes
        .iter()
        .filter_map(|h| match h {
            Heard::Added(k, v, initial) => Some((k.clone(), *v, *initial)),
            _ => None,
        })
        .collect();
    adds.sort();
    let mut expected_adds: Vec<_> = (0..15)
        .map(|i| {
            let k = if i < 5 {
                format!("made-{i}")
            } else {
                format!("new/made-{i}")
            };
            (k, 3, false)
        })
        .collect();
    expected_adds.sort();
    assert_eq!(adds, expected_adds);

    // The cache equals a final range read of the prefix, resource versions included.
    let (raw, _) = raw_state(&client, &prefix, None).await;
    let want = expected(&raw);
    let got: BTreeMap<String, (u64, String)> = informer
        .indexer()
        .list()
        .iter()
        .map(|it| (key_of(it), (it.value, it.rv.as_str().to_owned())))
        .collect();
    assert_eq!(got.len(), 300 - 25 + 15);
    assert_eq!(got, want, "the cache differs from etcd");

    let _ = stop_tx.send(());
    within(WAIT, "the informer to stop", running)
        .await
        .expect("informer task")
        .expect("informer run");
    assert!(informer.is_stopped());
}
