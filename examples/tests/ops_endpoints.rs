//! The demo's `--listen` server (`kcache_demo::ops`) on 127.0.0.1:0 over real kcache parts, the
//! same checks the demo composes: /readyz answers 503 naming the informer until its cache has
//! synced, then 200; /healthz answers 503 once the leader stops renewing its lease; /metrics
//! carries the workqueue's client-go-named series. Time is a FakeClock.

use kcache_controller::{Action, Controller};
use kcache_core::health::HealthChecks;
use kcache_core::{FakeClock, Object, ObjectKey, ResourceVersion};
use kcache_demo::ops::{Endpoints, OpsServer};
use kcache_informer::{InformerFactory, InformerOptions, SharedIndexInformer};
use kcache_leaderelection::{
    InProcessLock, LeaderElectionConfig, LeaderElector, LeaderHealthCheck,
};
use kcache_memory::{MemoryConfig, MemorySource, SetResourceVersion};
use kcache_reflector::{FaultInjector, FaultPlan};
use kcache_workqueue::metrics::PrometheusMetricsProvider;
use prometheus_client::registry::Registry;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
struct Pod {
    name: String,
    rv: ResourceVersion,
}

impl Object for Pod {
    fn namespace(&self) -> Option<&str> {
        Some("default")
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Pod {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

/// `GET path` over HTTP/1.0 (the server closes the connection after the answer): the status
/// code and the body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

async fn get_async(addr: SocketAddr, path: &'static str) -> (u16, String) {
    tokio::task::spawn_blocking(move || get(addr, path))
        .await
        .expect("no panic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_caches_and_healthz_fails_for_a_leader_that_stopped_renewing() {
    let clock = FakeClock::new();
    let source = MemorySource::<Pod>::with_config(MemoryConfig::new().with_clock(clock.clone()));
    source
        .create(Pod {
            name: "web".into(),
            rv: ResourceVersion::default(),
        })
        .unwrap();
    // Every list fails until healed: the informer cannot sync yet.
    let lw = FaultInjector::with_clock(
        source.clone(),
        FaultPlan {
            list_error: 1.0,
            ..FaultPlan::default()
        },
        Arc::new(clock.clone()),
    );
    let faults = lw.handle();
    let factory = InformerFactory::new();
    let pods = factory
        .informer_for("memory/pods", || {
            SharedIndexInformer::with_options(
                lw,
                // Lists, not streams (the memory source's default), so the failing lists
                // keep it unsynced.
                InformerOptions::new()
                    .name("pods")
                    .clock(Arc::new(clock.clone()))
                    .streaming_initial_list(false),
            )
        })
        .unwrap();

    let mut registry = Registry::default();
    let queue_metrics = PrometheusMetricsProvider::new(&mut registry);
    let handle = Controller::builder("pods-controller")
        .clock(Arc::new(clock.clone()))
        .metrics(Arc::new(queue_metrics))
        .watches(&pods)
        .build()
        .unwrap()
        .run_async(|_: ObjectKey| async { Ok::<_, String>(Action::Done) })
        .unwrap();

    let lock = InProcessLock::new("replica-a");
    let config = LeaderElectionConfig::new()
        .lease_duration(Duration::from_secs(15))
        .name("demo");
    let elector = LeaderElector::with_clock(lock.clone(), config, Arc::new(clock.clone())).unwrap();
    let leader = LeaderHealthCheck::new(Duration::from_secs(15));
    leader.set_leader_election(elector.status());
    assert!(elector.try_acquire_or_renew().await.succeeded());

    let workers = handle.workers_check(Duration::from_secs(60));
    let readyz = HealthChecks::new()
        .with(factory.sync_check())
        .with(workers.clone());
    let healthz = HealthChecks::new().with(workers).with(leader);
    let endpoints = Arc::new(Endpoints::new(registry, healthz, readyz));
    let server = OpsServer::start(([127, 0, 0, 1], 0).into(), endpoints).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    factory.start().unwrap();
    let (status, body) = get_async(addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        "[-]informer-sync failed: not synced yet: memory/pods\n[+]pods-controller-workers ok\ncheck failed\n"
    );
    assert_eq!(get_async(addr, "/healthz").await.0, 200);

    // The source heals; the informer's next list (after its backoff) syncs it.
    faults.heal();
    let synced = tokio::time::timeout(Duration::from_secs(20), async {
        while !pods.has_synced() {
            clock.advance(Duration::from_millis(200));
            tokio::task::yield_now().await;
            let _ =
                tokio::time::timeout(Duration::from_millis(2), std::future::pending::<()>()).await;
        }
    })
    .await;
    assert!(synced.is_ok(), "the informer never synced");
    let (status, body) = get_async(addr, "/readyz").await;
    assert_eq!(
        (status, body.as_str()),
        (
            200,
            "[+]informer-sync ok\n[+]pods-controller-workers ok\ncheck passed\n"
        )
    );

    // The controller has reconciled the pod's key: the queue's series are on /metrics.
    let reconciled = tokio::time::timeout(
        Duration::from_secs(20),
        handle.wait_stats(|s| s.reconciles >= 1),
    )
    .await;
    assert!(reconciled.is_ok());
    let (status, metrics) = get_async(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("workqueue_adds_total{name=\"pods-controller\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE workqueue_depth gauge\n"),
        "{metrics}"
    );

    // The leader stops renewing (its store refuses every write, and nobody retries here): once
    // lease + tolerance have passed since its last renewal, /healthz fails on leaderElection.
    assert!(
        elector.try_acquire_or_renew().await.succeeded(),
        "a last renewal"
    );
    lock.set_available(false);
    assert!(!elector.try_acquire_or_renew().await.succeeded());
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        get_async(addr, "/healthz").await.0,
        200,
        "exactly lease + tolerance"
    );
    clock.advance(Duration::from_secs(1));
    let (status, body) = get_async(addr, "/healthz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("[+]pods-controller-workers ok\n[-]leaderElection failed: leader election \"demo\": replica-a holds the lease but has not renewed it for 31s\n"), "{body}");
    assert!(body.ends_with("check failed\n"));
    assert_eq!(
        get_async(addr, "/readyz").await.0,
        200,
        "readiness is about the caches"
    );

    server.stop();
    handle.shutdown_async().await;
    factory.shutdown().await;
}
