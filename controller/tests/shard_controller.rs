//! Sharded controllers in one process over shared informers: each key is reconciled by its
//! owner only, a child object's event goes to the replica owning its owner, and a member's
//! graceful leave hands its keys to the other, which enqueues and reconciles them.

#[path = "../../informer/tests/common/mod.rs"]
mod common;

use common::{informer, run, source, Pod, WAIT};
use kcache_controller::shard::{Shard, ShardConfig, ShardGate};
use kcache_controller::{Action, Controller, ControllerHandle};
use kcache_core::ObjectKey;
use kcache_leaderelection::InProcessMembers;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

type Log = mpsc::UnboundedSender<(&'static str, ObjectKey)>;

fn owner_of(child: &Pod) -> Vec<ObjectKey> {
    let owner = child.name.split('-').next().unwrap_or_default();
    vec![ObjectKey::namespaced(&child.ns, owner).unwrap()]
}

async fn next(
    rx: &mut mpsc::UnboundedReceiver<(&'static str, ObjectKey)>,
) -> (&'static str, ObjectKey) {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(v)) => v,
        other => panic!("no reconcile within the bound: {other:?}"),
    }
}

fn controller(
    id: &'static str,
    gate: ShardGate,
    clock: &kcache_core::FakeClock,
    sets: &Arc<common::Informer>,
    children: &Arc<common::Informer>,
    log: Log,
) -> ControllerHandle {
    Controller::builder(format!("sets-{id}"))
        .workers(2)
        .clock(Arc::new(clock.clone()))
        .shard(gate)
        .watches(sets)
        .owns(children, owner_of)
        .build()
        .unwrap()
        .run_async(move |key: ObjectKey| {
            let log = log.clone();
            async move { log.send((id, key)).map(|()| Action::Done) }
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_and_each_childs_event_go_to_the_owner_replica_and_a_leave_hands_keys_over() {
    let (clock, sets_src) = source();
    let children_src = kcache_memory::MemorySource::<Pod>::with_clock(clock.clone());
    for i in 0..20 {
        sets_src.create(Pod::new(&format!("s{i}"), 0)).unwrap();
        children_src
            .create(Pod::new(&format!("s{i}-1"), 0))
            .unwrap();
    }
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);

    let store = InProcessMembers::new();
    let config = |id: &str| {
        ShardConfig::new(id)
            .retry_period(Duration::from_secs(2))
            .clock(Arc::new(clock.clone()))
    };
    let a = Shard::new(store.handle(), config("a")).unwrap();
    let b = Shard::new(store.handle(), config("b")).unwrap();
    for _ in 0..3 {
        a.tick().await;
        b.tick().await;
    }
    let (ga, gb) = (a.gate(), b.gate());
    assert_eq!(ga.stats().members, ["a", "b"]);

    let (tx, mut rx) = mpsc::unbounded_channel();
    let ha = controller("a", ga.clone(), &clock, &sets, &children, tx.clone());
    let hb = controller("b", gb.clone(), &clock, &sets, &children, tx);
    let (r1, r2) = (run(&sets), run(&children));

    let owner = |k: &ObjectKey| if ga.owns(k.as_ref()) { "a" } else { "b" };
    let mut seen: BTreeMap<ObjectKey, &str> = BTreeMap::new();
    while seen.len() < 20 {
        let (by, key) = next(&mut rx).await;
        assert_eq!(by, owner(&key), "{key} reconciled by {by}, not its owner");
        seen.insert(key, by);
    }
    let by_b: BTreeSet<ObjectKey> = seen
        .iter()
        .filter(|(_, b)| **b == "b")
        .map(|(k, _)| k.clone())
        .collect();
    assert!(
        !by_b.is_empty() && by_b.len() < 20,
        "both replicas have keys: b has {}",
        by_b.len()
    );

    // A child's event is mapped to its owner, then filtered: only the owner's replica acts.
    let child_of_b = by_b.iter().next().unwrap().name().to_owned();
    children_src
        .update(Pod::new(&format!("{child_of_b}-1"), 1))
        .unwrap();
    let (by, key) = next(&mut rx).await;
    assert_eq!((by, key.name()), ("b", child_of_b.as_str()));
    let skipped = ga.stats().skipped_not_owned + gb.stats().skipped_not_owned;
    assert!(
        skipped >= 20,
        "each replica skipped the other's keys: {skipped}"
    );

    // b leaves gracefully: a gains b's keys, enqueues and reconciles them.
    hb.shutdown_async().await;
    b.leave().await;
    a.tick().await;
    assert_eq!(ga.stats().members, ["a"]);
    let mut moved = BTreeSet::new();
    while moved.len() < by_b.len() {
        let (by, key) = next(&mut rx).await;
        assert_eq!(by, "a");
        if by_b.contains(&key) {
            moved.insert(key);
        }
    }
    ha.shutdown_async().await;
    r1.stop().await;
    r2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gained_owner_deleted_while_another_replica_owned_it_is_reconciled_for_its_children() {
    let (clock, sets_src) = source();
    let children_src = kcache_memory::MemorySource::<Pod>::with_clock(clock.clone());
    for i in 0..20 {
        sets_src.create(Pod::new(&format!("s{i}"), 0)).unwrap();
        children_src
            .create(Pod::new(&format!("s{i}-1"), 0))
            .unwrap();
    }
    let sets = informer(&clock, &sets_src, Duration::ZERO);
    let children = informer(&clock, &children_src, Duration::ZERO);
    let store = InProcessMembers::new();
    let config = |id: &str| ShardConfig::new(id).clock(Arc::new(clock.clone()));
    let a = Shard::new(store.handle(), config("a")).unwrap();
    let b = Shard::new(store.handle(), config("b")).unwrap();
    for _ in 0..3 {
        a.tick().await;
        b.tick().await;
    }
    let (ga, gb) = (a.gate(), b.gate());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ha = controller("a", ga.clone(), &clock, &sets, &children, tx.clone());
    let hb = controller("b", gb.clone(), &clock, &sets, &children, tx);
    let (r1, r2) = (run(&sets), run(&children));
    let mut seen = BTreeSet::new();
    while seen.len() < 20 {
        seen.insert(next(&mut rx).await.1);
    }

    // b's workers stop while b stays a member; a set of b's is deleted, and a skips the
    // deletion's key (b owns it). The set is in no cache now; only its child names it.
    hb.shutdown_async().await;
    let gone = (0..20)
        .map(|i| format!("s{i}"))
        .find(|s| gb.owns(&format!("default/{s}")))
        .unwrap();
    // a is idle first (its initial keys, b's skipped among them, are all done), so the next
    // skip is the deletion's.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ha.queue().is_empty() || ha.queue().in_flight() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "a never went idle");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let skipped = ga.stats().skipped_not_owned;
    sets_src.delete(&format!("default/{gone}")).unwrap();
    while ga.stats().skipped_not_owned == skipped {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a never saw the deletion"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // b leaves: a gains the deleted set's key through its child, and reconciles it.
    b.leave().await;
    a.tick().await;
    loop {
        let (by, key) = next(&mut rx).await;
        assert_eq!(by, "a");
        if key.name() == gone {
            break;
        }
    }
    ha.shutdown_async().await;
    r1.stop().await;
    r2.stop().await;
}
