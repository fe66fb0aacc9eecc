//! `LeaseMembers` against the loopback server: member Leases listed by their group label,
//! compare-and-swap writes, deletes with a resourceVersion precondition, and two sharded replicas
//! handing a key over through them.

mod support;

use kcache_controller::shard::{HashRing, Shard, ShardConfig, DEFAULT_VNODES};
use kcache_core::FakeClock;
use kcache_kube::{LeaseMembers, SHARD_GROUP_LABEL};
use kcache_leaderelection::{LockError, MemberRecord, MemberStore};
use kcache_memory::MemoryConfig;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use support::Loopback;

fn record(id: &str, view: &[&str]) -> MemberRecord {
    MemberRecord {
        holder_identity: id.into(),
        lease_duration: Duration::from_secs(15),
        renew_time: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        view: view.iter().map(|s| (*s).to_owned()).collect(),
        view_generation: 2,
    }
}

#[tokio::test]
async fn member_leases_are_labelled_compare_and_swapped_and_deleted_with_a_precondition() {
    let server = Loopback::start(MemoryConfig::new()).await.unwrap();
    let store = LeaseMembers::new(server.client(), "kube-system", "sets");
    let other_group = LeaseMembers::new(server.client(), "kube-system", "pods");
    let v1 = store.create(&record("a", &[])).await.unwrap();
    assert!(matches!(
        store.create(&record("a", &[])).await,
        Err(LockError::AlreadyExists)
    ));
    other_group.create(&record("z", &[])).await.unwrap();
    let stored = server.lease("kube-system", "sets-a").expect("stored");
    assert_eq!(stored["metadata"]["labels"][SHARD_GROUP_LABEL], "sets");

    let v2 = store.update(&v1, &record("a", &["a", "b"])).await.unwrap();
    assert!(matches!(
        store.update(&v1, &record("a", &[])).await,
        Err(LockError::Conflict)
    ));
    let listed = store.list().await.unwrap();
    assert_eq!(listed.len(), 1, "only the group's Leases");
    assert_eq!(listed[0].record, record("a", &["a", "b"]));
    assert_eq!(listed[0].version, v2);

    assert!(matches!(
        store.delete("a", &v1).await,
        Err(LockError::Conflict)
    ));
    store.delete("a", &v2).await.unwrap();
    store.delete("a", &v2).await.unwrap();
    assert!(store.list().await.unwrap().is_empty());
    assert_eq!(other_group.list().await.unwrap().len(), 1);

    server.set_leases_available(false);
    assert!(matches!(store.list().await, Err(LockError::Backend(_))));
}

#[tokio::test]
async fn two_replicas_hand_a_key_over_through_member_leases() {
    let server = Loopback::start(MemoryConfig::new()).await.unwrap();
    let clock = FakeClock::new();
    let config = |id: &str| {
        ShardConfig::new(id)
            .lease_duration(Duration::from_secs(15))
            .renew_deadline(Duration::from_secs(10))
            .retry_period(Duration::from_secs(2))
            .clock(Arc::new(clock.clone()))
    };
    let members = || LeaseMembers::new(server.client(), "default", "sets");
    let a = Shard::new(members(), config("a")).unwrap();
    a.tick().await;
    let two = HashRing::new(["a", "b"], DEFAULT_VNODES);
    let key = (0..200)
        .map(|i| format!("ns/k{i}"))
        .find(|k| two.owns("b", k))
        .unwrap();
    let claim = a.gate().try_start(&key).expect("a alone owns every key");
    let b = Shard::new(members(), config("b")).unwrap();
    for _ in 0..3 {
        b.tick().await;
        a.tick().await;
        assert!(b.gate().try_start(&key).is_none(), "a still reconciles it");
    }
    drop(claim);
    a.tick().await;
    b.tick().await;
    assert!(b.gate().try_start(&key).is_some(), "handed over");
    b.leave().await;
    assert!(
        server.lease("default", "sets-b").is_none(),
        "deleted on leave"
    );
    a.tick().await;
    assert!(a.gate().try_start(&key).is_some());
}
