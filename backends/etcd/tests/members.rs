//! `EtcdMembers` against a real etcd (`KCACHE_ETCD_ENDPOINTS`; skipped, with a message, when it
//! is not set): the store's compare-and-swap contract, and two sharded replicas handing a key
//! over through their records.

mod common;

use common::*;
use kcache_controller::shard::{HashRing, Shard, ShardConfig, DEFAULT_VNODES};
use kcache_core::FakeClock;
use kcache_etcd::EtcdMembers;
use kcache_leaderelection::{LockError, MemberRecord, MemberStore};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

fn record(id: &str, view: &[&str]) -> MemberRecord {
    MemberRecord {
        holder_identity: id.into(),
        lease_duration: Duration::from_secs(15),
        renew_time: UNIX_EPOCH,
        view: view.iter().map(|s| (*s).to_owned()).collect(),
        view_generation: 0,
    }
}

#[tokio::test]
async fn member_records_are_compare_and_swap_and_listed_under_the_prefix() {
    let Some(endpoint) = endpoints("members_contract") else {
        return;
    };
    let client = connect(&endpoint).await;
    let store = EtcdMembers::new(client, format!("{}/", unique_prefix("members")));
    let v1 = store.create(&record("a", &[])).await.unwrap();
    assert!(matches!(
        store.create(&record("a", &[])).await,
        Err(LockError::AlreadyExists)
    ));
    store.create(&record("b", &["a", "b"])).await.unwrap();
    let v2 = store.update(&v1, &record("a", &["a", "b"])).await.unwrap();
    assert!(matches!(
        store.update(&v1, &record("a", &[])).await,
        Err(LockError::Conflict)
    ));
    let mut listed = store.list().await.unwrap();
    listed.sort_by(|x, y| x.record.holder_identity.cmp(&y.record.holder_identity));
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].record, record("a", &["a", "b"]));
    assert_eq!(listed[0].version, v2);
    assert!(matches!(
        store.delete("a", &v1).await,
        Err(LockError::Conflict)
    ));
    store.delete("a", &v2).await.unwrap();
    store.delete("a", &v2).await.unwrap();
    assert_eq!(store.list().await.unwrap().len(), 1);
    assert!(matches!(
        store.create(&record("x/y", &[])).await,
        Err(LockError::Malformed(_))
    ));
}

#[tokio::test]
async fn two_replicas_hand_a_key_over_through_etcd() {
    let Some(endpoint) = endpoints("members_handover") else {
        return;
    };
    let client = connect(&endpoint).await;
    let prefix = format!("{}/", unique_prefix("shard"));
    let clock = FakeClock::new();
    let config = |id: &str| {
        ShardConfig::new(id)
            .lease_duration(Duration::from_secs(15))
            .renew_deadline(Duration::from_secs(10))
            .retry_period(Duration::from_secs(2))
            .clock(Arc::new(clock.clone()))
    };
    let a = Shard::new(
        EtcdMembers::new(client.clone(), prefix.clone()),
        config("a"),
    )
    .unwrap();
    a.tick().await;
    let two = HashRing::new(["a", "b"], DEFAULT_VNODES);
    let key = (0..200)
        .map(|i| format!("ns/k{i}"))
        .find(|k| two.owns("b", k))
        .unwrap();
    let claim = a.gate().try_start(&key).expect("a alone owns every key");

    let b = Shard::new(EtcdMembers::new(client, prefix), config("b")).unwrap();
    for _ in 0..3 {
        b.tick().await;
        a.tick().await;
        assert!(b.gate().try_start(&key).is_none(), "a still reconciles it");
    }
    drop(claim);
    a.tick().await;
    b.tick().await;
    assert!(b.gate().try_start(&key).is_some(), "handed over");
    assert!(a.gate().try_start(&key).is_none());

    // A graceful leave deletes the record; a takes the key at its next tick.
    b.leave().await;
    a.tick().await;
    assert_eq!(a.gate().stats().members, ["a"]);
    assert!(a.gate().try_start(&key).is_some());
    a.leave().await;
}
