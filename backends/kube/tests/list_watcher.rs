//! `KubeListWatcher` against the loopback server: parameters, error classes, watch-list,
//! dynamic and metadata-only objects, and convergence of a reflector under the fault injector.

mod support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::{Meta, ReflectorStore, ResourceVersion};
use kcache_kube::{KubeError, KubeListWatcher, KubeMeta, KubeMetadataListWatcher};
use kcache_memory::MemoryConfig;
use kcache_reflector::{
    BackendError, BackoffConfig, ErrorKind, FaultInjector, FaultPlan, ListOptions, ListWatcher,
    ReflectorBuilder, ResourceVersionMatch, WatchEvent, WatchOptions,
};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{config_map, Loopback};

const BOUND: Duration = Duration::from_secs(30);

async fn server() -> Loopback {
    Loopback::start(MemoryConfig::new()).await.unwrap()
}

fn lw(server: &Loopback) -> KubeListWatcher<ConfigMap> {
    KubeListWatcher::new(kube::Api::all(server.client()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_parameters_and_pages_reach_the_server() {
    let server = server().await;
    for i in 0..5 {
        server
            .source()
            .create(config_map("apps", &format!("cm-{i}"), "x"))
            .unwrap();
    }
    let lw = lw(&server).fields("metadata.namespace=apps");
    let first = lw
        .list(&ListOptions {
            limit: Some(2),
            ..ListOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.resource_version, server.source().resource_version());
    let token = first.continue_token.clone().expect("a continue token");
    let second = lw
        .list(&ListOptions {
            limit: Some(2),
            continue_token: Some(token),
            ..ListOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(second.resource_version, first.resource_version);
    assert_eq!(second.items.len(), 2);

    let exact = lw
        .list(&ListOptions {
            resource_version: ResourceVersion::from("3"),
            resource_version_match: Some(ResourceVersionMatch::Exact),
            ..ListOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(
        exact.items.len(),
        2,
        "the state at version 3 holds two objects"
    );
    let requests = server.requests();
    assert!(
        requests[0].contains("limit=2")
            && requests[0].contains("fieldSelector=metadata.namespace=apps")
    );
    assert!(requests[1].contains("continue="));
    assert!(
        requests[2].contains("resourceVersion=3")
            && requests[2].contains("resourceVersionMatch=Exact")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_too_large_resource_version_is_classified_too_large() {
    let server = server().await;
    let err = lw(&server)
        .list(&ListOptions {
            resource_version: ResourceVersion::from("999999"),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            ..ListOptions::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLargeResourceVersion, "{err}");
    assert_eq!(err.status().map(|s| s.code), Some(504));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_version_yields_an_expired_error_item() {
    let server = Loopback::start(MemoryConfig::new().with_history_window(2))
        .await
        .unwrap();
    for i in 0..6 {
        server
            .source()
            .create(config_map("apps", &format!("cm-{i}"), "x"))
            .unwrap();
    }
    let mut stream = lw(&server)
        .watch(&WatchOptions {
            resource_version: ResourceVersion::from("2"),
            ..WatchOptions::default()
        })
        .await
        .unwrap();
    let first = tokio::time::timeout(BOUND, stream.next()).await.unwrap();
    let Some(Err(err)) = first else {
        panic!("expected an error item, got {first:?}")
    };
    assert_eq!(err.kind(), ErrorKind::Expired);
    assert!(matches!(
        err,
        KubeError::Status {
            in_watch_stream: true,
            ..
        }
    ));
    assert!(tokio::time::timeout(BOUND, stream.next())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_a_retry_error() {
    // Take a free port and close it again: nothing listens there.
    let port = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let lw = KubeListWatcher::new(kube::Api::<ConfigMap>::all(client));
    let err = lw.list(&ListOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Retry, "{err:?}");
    let err = lw
        .watch(&WatchOptions::default())
        .await
        .err()
        .expect("a watch error");
    assert_eq!(err.kind(), ErrorKind::Retry, "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_parameters_reach_the_server_and_the_timeout_ends_the_stream_cleanly() {
    let server = server().await;
    server
        .source()
        .create(config_map("apps", "a", "1"))
        .unwrap();
    let rv = server.source().resource_version();
    let mut stream = lw(&server)
        .labels("app=x")
        .watch(&WatchOptions {
            resource_version: rv.clone(),
            timeout: Some(Duration::from_millis(300)),
            allow_bookmarks: true,
            send_initial_events: false,
        })
        .await
        .unwrap();
    // Nothing matches the selector; the server ends the stream after one second.
    let end = tokio::time::timeout(BOUND, async {
        loop {
            match stream.next().await {
                None => return Ok(()),
                Some(Ok(WatchEvent::Bookmark(_))) => continue,
                Some(other) => return Err(format!("{other:?}")),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(end, Ok(()));
    let request = &server.requests()[0];
    for part in [
        "watch=true",
        "timeoutSeconds=1",
        "allowWatchBookmarks=true",
        "labelSelector=app=x",
    ] {
        assert!(request.contains(part), "{request} lacks {part}");
    }
    assert!(request.contains(&format!("resourceVersion={rv}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_ends_with_the_initial_events_end_bookmark() {
    let server = server().await;
    for i in 0..3 {
        server
            .source()
            .create(config_map("apps", &format!("cm-{i}"), "x"))
            .unwrap();
    }
    let mut stream = lw(&server)
        .watch(&WatchOptions {
            send_initial_events: true,
            ..WatchOptions::default()
        })
        .await
        .unwrap();
    let mut added = 0;
    loop {
        match tokio::time::timeout(BOUND, stream.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(_))) => added += 1,
            Some(Ok(WatchEvent::Bookmark(b))) if b.initial_events_end => {
                assert_eq!(b.resource_version, server.source().resource_version());
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, 3);
    let request = &server.requests()[0];
    assert!(
        request.contains("sendInitialEvents=true")
            && request.contains("resourceVersionMatch=NotOlderThan")
    );
    assert!(
        request.contains("allowWatchBookmarks=true"),
        "bookmarks are required for watch-list"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_objects_and_metadata_only_objects_list_and_watch() {
    let server = server().await;
    server
        .source()
        .create(config_map("apps", "a", "1"))
        .unwrap();
    let resource = ApiResource::erase::<ConfigMap>(&());
    let dynamic = KubeListWatcher::new(kube::Api::<DynamicObject>::all_with(
        server.client(),
        &resource,
    ));
    let page = dynamic.list(&ListOptions::default()).await.unwrap();
    assert_eq!(KubeMeta::key(&*page.items[0]).unwrap().as_str(), "apps/a");
    assert_eq!(page.items[0].data["data"]["v"], "1");

    let meta = KubeMetadataListWatcher::new(kube::Api::<ConfigMap>::all(server.client()));
    let page = ListWatcher::<PartialObjectMeta<ConfigMap>>::list(&meta, &ListOptions::default())
        .await
        .unwrap();
    assert_eq!(KubeMeta::key(&*page.items[0]).unwrap().as_str(), "apps/a");
    let from = WatchOptions {
        resource_version: page.resource_version,
        ..WatchOptions::default()
    };
    let mut stream = meta.watch(&from).await.unwrap();
    let updated = server
        .source()
        .update(config_map("apps", "a", "2"))
        .unwrap();
    let ev = tokio::time::timeout(BOUND, stream.next()).await.unwrap();
    let Some(Ok(WatchEvent::Modified(o))) = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(
        KubeMeta::resource_version(&*o),
        KubeMeta::resource_version(&*updated)
    );
}

/// What the tests compare: key → (version, data).
type State = BTreeMap<String, (ResourceVersion, Option<BTreeMap<String, String>>)>;

/// The simplest store: a shared map of key → (version, data).
#[derive(Clone, Default)]
struct Map(Arc<Mutex<State>>);

impl Map {
    fn entry(o: &ConfigMap) -> (String, (ResourceVersion, Option<BTreeMap<String, String>>)) {
        let key = KubeMeta::key(o).map(|k| k.to_string()).unwrap_or_default();
        (key, (KubeMeta::resource_version(o), o.data.clone()))
    }
    fn snapshot(&self) -> State {
        self.0.lock().unwrap().clone()
    }
}

impl ReflectorStore<ConfigMap> for Map {
    type Error = std::convert::Infallible;
    fn add(&self, o: Arc<ConfigMap>) -> Result<(), Self::Error> {
        self.update(o)
    }
    fn update(&self, o: Arc<ConfigMap>) -> Result<(), Self::Error> {
        let (k, v) = Map::entry(&o);
        self.0.lock().unwrap().insert(k, v);
        Ok(())
    }
    fn delete(&self, o: Arc<ConfigMap>) -> Result<(), Self::Error> {
        self.0.lock().unwrap().remove(&Map::entry(&o).0);
        Ok(())
    }
    fn replace(&self, all: Vec<Arc<ConfigMap>>, _rv: ResourceVersion) -> Result<(), Self::Error> {
        *self.0.lock().unwrap() = all.iter().map(|o| Map::entry(o)).collect();
        Ok(())
    }
    fn resync(&self) -> Result<(), Self::Error> {
        Ok(())
    }
}

fn source_state(
    server: &Loopback,
) -> BTreeMap<String, (ResourceVersion, Option<BTreeMap<String, String>>)> {
    server
        .source()
        .list_all()
        .iter()
        .map(|o| Map::entry(o))
        .collect()
}

fn fast_backoff() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(1),
        factor: 2.0,
        jitter: 0.0,
        cap: Duration::from_millis(20),
        reset_after: Duration::from_secs(120),
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    tokio::time::timeout(BOUND, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} did not happen within the bound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_fills_its_store_through_watch_list_without_any_list_request() {
    let server = server().await;
    for i in 0..50 {
        server
            .source()
            .create(config_map("apps", &format!("cm-{i}"), "x"))
            .unwrap();
    }
    let map = Map::default();
    let reflector =
        ReflectorBuilder::<ConfigMap, _, _, KubeMeta>::with_meta(lw(&server), map.clone())
            .streaming_initial_list(true)
            .build();
    let handle = reflector.handle();
    let task = tokio::spawn(reflector.run());
    until("the streaming list", || {
        map.snapshot() == source_state(&server)
    })
    .await;
    server
        .source()
        .create(config_map("apps", "later", "x"))
        .unwrap();
    until("the later create", || {
        map.snapshot() == source_state(&server)
    })
    .await;
    handle.stop();
    tokio::time::timeout(BOUND, task).await.unwrap().unwrap();
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r.contains("watch=true")),
        "{requests:?}"
    );
    assert!(requests[0].contains("sendInitialEvents=true"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_over_kube_converges_under_the_fault_injector() {
    let seeds: u64 = std::env::var("KCACHE_KUBE_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut injected = 0;
    for seed in 0..seeds {
        let server = Loopback::start(MemoryConfig::new().with_history_window(16))
            .await
            .unwrap();
        for i in 0..20 {
            server
                .source()
                .create(config_map("apps", &format!("cm-{i}"), "0"))
                .unwrap();
        }
        let plan = FaultPlan {
            max_delay: Duration::from_millis(20),
            ..FaultPlan::chaos(seed)
        };
        let faulty = FaultInjector::new(lw(&server), plan);
        let faults = faulty.handle();
        let map = Map::default();
        let reflector =
            ReflectorBuilder::<ConfigMap, _, _, KubeMeta>::with_meta(faulty, map.clone())
                .streaming_initial_list(seed % 2 == 1)
                .page_size(7)
                .backoff(fast_backoff())
                .min_watch_timeout(Duration::from_secs(2))
                .seed(seed)
                .build();
        let handle = reflector.handle();
        let task = tokio::spawn(reflector.run());
        for step in 0..60u32 {
            let name = format!("cm-{}", step % 25);
            let key = format!("apps/{name}");
            if step % 7 == 3 {
                let _ = server.source().delete(&key);
            } else if server.source().get(&key).is_some() {
                server
                    .source()
                    .update(config_map("apps", &name, &step.to_string()))
                    .unwrap();
            } else {
                server
                    .source()
                    .create(config_map("apps", &name, &step.to_string()))
                    .unwrap();
            }
            // Every few writes, let the reflector catch up through the faults (it must, since
            // every injected fault is transient).
            if step % 6 == 5 {
                until(&format!("catching up at step {step} (seed {seed})"), || {
                    map.snapshot() == source_state(&server)
                })
                .await;
            }
        }
        faults.heal();
        // After healing, a cut or close makes the reflector catch up; force one to be sure.
        server.close_watches();
        until(
            &format!("convergence (seed {seed}, replay: KCACHE_KUBE_FAULT_SEEDS)"),
            || map.snapshot() == source_state(&server),
        )
        .await;
        let stats = faults.stats();
        handle.stop();
        tokio::time::timeout(BOUND, task).await.unwrap().unwrap();
        injected += stats.list_errors + stats.watch_errors + stats.clean_cuts + stats.error_cuts;
    }
    assert!(injected > 0, "the fault plans injected no error and no cut");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_resource_version_is_a_one_object_consistent_list() {
    let server = server().await;
    for i in 0..3 {
        server
            .source()
            .create(config_map("apps", &format!("cm-{i}"), "x"))
            .unwrap();
    }
    let head = server.source().resource_version();
    let typed = lw(&server);
    assert_eq!(
        typed.current_resource_version().await.unwrap(),
        Some(head.clone())
    );
    let meta = KubeMetadataListWatcher::new(kube::Api::<ConfigMap>::all(server.client()));
    assert_eq!(meta.current_resource_version().await.unwrap(), Some(head));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert!(
            r.contains("limit=1") && !r.contains("resourceVersion="),
            "{r}"
        );
    }
}
