//! An informer (kcache-informer) over a real `kube::Client` and the loopback list/watch server.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_core::{Meta, ResourceVersion};
use kcache_deltafifo::DeltaFifoError;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_kube::{KubeError, KubeListWatcher, KubeMeta};
use kcache_memory::MemoryConfig;
use kcache_reflector::{BackendError, BadInput, ErrorKind, ReflectorError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{config_map, Loopback};

type Informer = SharedIndexInformer<ConfigMap, KubeListWatcher<ConfigMap>, KubeMeta>;
type Errors = Arc<Mutex<Vec<String>>>;

/// A generous bound for waits on real I/O (they normally end in milliseconds).
const BOUND: Duration = Duration::from_secs(30);

struct Running {
    informer: Arc<Informer>,
    errors: Errors,
    kinds: Arc<Mutex<Vec<ErrorKind>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn start(lw: KubeListWatcher<ConfigMap>) -> Self {
        Self::start_with(lw, InformerOptions::new()).await
    }

    /// Lists, then watches, instead of streaming the list (the default against this server).
    async fn start_listing(lw: KubeListWatcher<ConfigMap>) -> Self {
        Self::start_with(lw, InformerOptions::new().streaming_initial_list(false)).await
    }

    async fn start_with(
        lw: KubeListWatcher<ConfigMap>,
        options: InformerOptions<ConfigMap>,
    ) -> Self {
        let informer: Arc<Informer> = Arc::new(SharedIndexInformer::with_accessor(
            lw,
            options.name("configmaps"),
        ));
        let errors: Errors = Arc::default();
        let kinds: Arc<Mutex<Vec<ErrorKind>>> = Arc::default();
        let (e, k) = (errors.clone(), kinds.clone());
        informer
            .set_watch_error_handler(move |err: &ReflectorError<KubeError, DeltaFifoError>| {
                let kind = match err {
                    ReflectorError::List(e)
                    | ReflectorError::WatchOpen(e)
                    | ReflectorError::Watch(e) => Some(e.kind()),
                    _ => None,
                };
                if let Ok(mut e) = e.lock() {
                    e.push(describe(err));
                }
                if let Some(kind) = kind {
                    if let Ok(mut k) = k.lock() {
                        k.push(kind);
                    }
                }
            })
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let inf = informer.clone();
        let task = tokio::spawn(async move {
            inf.run(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self {
            informer,
            errors,
            kinds,
            stop: Some(stop),
            task,
        }
    }

    async fn synced(&self) {
        let inf = self.informer.clone();
        tokio::time::timeout(BOUND, async move {
            while !inf.has_synced() {
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the informer did not sync within the bound");
    }

    /// Waits until the cache has applied everything up to the source's current version.
    async fn caught_up(&self, server: &Loopback) {
        let rv = server.source().resource_version();
        tokio::time::timeout(BOUND, self.informer.wait_for_resource_version(&rv))
            .await
            .expect("the cache did not reach the source's version within the bound")
            .unwrap();
    }

    fn cache(&self) -> BTreeMap<String, (ResourceVersion, Option<BTreeMap<String, String>>)> {
        snapshot(self.informer.indexer().list())
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(BOUND, &mut self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

fn describe(err: &ReflectorError<KubeError, DeltaFifoError>) -> String {
    match err {
        ReflectorError::List(KubeError::Decode(_)) => "list: decode".into(),
        ReflectorError::Watch(KubeError::Decode(_)) => "watch: decode".into(),
        ReflectorError::BadInput(BadInput::ObjectKey(k)) => format!("bad input: key: {k}"),
        ReflectorError::List(e) | ReflectorError::WatchOpen(e) | ReflectorError::Watch(e) => {
            let code = e.status().map_or(0, |s| s.code);
            format!("{err}: {code}")
        }
        other => other.to_string(),
    }
}

fn snapshot(
    objs: Vec<Arc<ConfigMap>>,
) -> BTreeMap<String, (ResourceVersion, Option<BTreeMap<String, String>>)> {
    objs.iter()
        .map(|o| {
            let key = KubeMeta::key(&**o).unwrap().to_string();
            (key, (KubeMeta::resource_version(&**o), o.data.clone()))
        })
        .collect()
}

fn source_state(
    server: &Loopback,
) -> BTreeMap<String, (ResourceVersion, Option<BTreeMap<String, String>>)> {
    snapshot(server.source().list_all())
}

async fn server() -> Loopback {
    Loopback::start(MemoryConfig::new()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_over_kube_client_syncs_and_follows_creates_updates_and_deletes() {
    let server = server().await;
    for i in 0..5 {
        server
            .source()
            .create(config_map("apps", &format!("cm-{i}"), "a"))
            .unwrap();
    }
    let lw = KubeListWatcher::new(kube::Api::<ConfigMap>::all(server.client()));
    let running = Running::start(lw).await;
    running.synced().await;
    assert_eq!(running.cache(), source_state(&server));

    server
        .source()
        .create(config_map("other", "new", "x"))
        .unwrap();
    server
        .source()
        .update(config_map("apps", "cm-1", "b"))
        .unwrap();
    server.source().delete("apps/cm-2").unwrap();
    running.caught_up(&server).await;
    assert_eq!(running.cache(), source_state(&server));
    assert!(running.informer.indexer().get_by_key("apps/cm-2").is_none());
    assert_eq!(
        running
            .informer
            .indexer()
            .get_by_key("apps/cm-1")
            .unwrap()
            .data
            .as_ref()
            .unwrap()["v"],
        "b"
    );
    let requests = server.requests();
    assert!(requests
        .iter()
        .any(|r| r.contains("watch=true") && r.contains("allowWatchBookmarks=true")));
    assert!(
        running.errors.lock().unwrap().is_empty(),
        "{:?}",
        running.errors.lock().unwrap()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_api_with_selectors_caches_only_matching_objects() {
    let server = server().await;
    let mut labelled = config_map("apps", "web", "1");
    labelled.metadata.labels = Some(BTreeMap::from([("tier".into(), "web".into())]));
    server.source().create(labelled.clone()).unwrap();
    server
        .source()
        .create(config_map("apps", "plain", "1"))
        .unwrap();
    let mut elsewhere = labelled.clone();
    elsewhere.metadata.namespace = Some("other".into());
    server.source().create(elsewhere).unwrap();

    let api = kube::Api::<ConfigMap>::namespaced(server.client(), "apps");
    let running = Running::start(KubeListWatcher::new(api).labels("tier=web")).await;
    running.synced().await;
    assert_eq!(running.informer.indexer().list_keys().len(), 1);
    assert!(running.informer.indexer().get_by_key("apps/web").is_some());

    let mut second = config_map("apps", "web-2", "1");
    second.metadata.labels = labelled.metadata.labels.clone();
    server.source().create(second).unwrap();
    server
        .source()
        .create(config_map("apps", "plain-2", "1"))
        .unwrap();
    // The filtered watch never sees the other writes' versions: wait for the object itself.
    let keys = || {
        let mut keys: Vec<String> = running
            .informer
            .indexer()
            .list_keys()
            .iter()
            .map(|k| k.to_string())
            .collect();
        keys.sort();
        keys
    };
    until("the second labelled object", || keys().len() == 2).await;
    let keys = keys();
    assert_eq!(keys, ["apps/web", "apps/web-2"]);
    assert!(server
        .requests()
        .iter()
        .all(|r| r.starts_with("/api/v1/namespaces/apps/configmaps?")
            && r.contains("labelSelector=tier=web")));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_version_gets_error_410_and_the_informer_relists() {
    let server = Loopback::start(MemoryConfig::new().with_history_window(4))
        .await
        .unwrap();
    server
        .source()
        .create(config_map("apps", "first", "1"))
        .unwrap();
    let running = Running::start(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;
    let lists_before = relists(&server);

    // Let the watch deliver an event (a watch closed within 1 s without events is a
    // "very short watch", which relists instead of re-watching).
    server
        .source()
        .create(config_map("apps", "second", "1"))
        .unwrap();
    running.caught_up(&server).await;

    // Hold re-watches, cut the open watch, and write more than the history keeps.
    server.hold_watches(true);
    server.close_watches();
    for i in 0..20 {
        server
            .source()
            .create(config_map("apps", &format!("later-{i}"), "1"))
            .unwrap();
    }
    server.hold_watches(false);
    running.caught_up(&server).await;

    assert_eq!(running.cache(), source_state(&server));
    assert!(relists(&server) > lists_before, "no relist after the 410");
    assert!(running.kinds.lock().unwrap().contains(&ErrorKind::Expired));
    assert!(running
        .errors
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.ends_with(": 410")));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_watch_error_410_makes_the_informer_relist_and_converge() {
    let server = server().await;
    server
        .source()
        .create(config_map("apps", "a", "1"))
        .unwrap();
    server.expire_next_watches(2);
    let running = Running::start(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;
    server
        .source()
        .create(config_map("apps", "b", "1"))
        .unwrap();
    let kinds = running.kinds.clone();
    until("two expired watches", || {
        let kinds = kinds.lock().unwrap();
        kinds.iter().filter(|k| **k == ErrorKind::Expired).count() == 2
    })
    .await;
    running.caught_up(&server).await;
    assert_eq!(running.cache(), source_state(&server));
    assert!(relists(&server) >= 2, "a relist after the expired watches");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_thousand_objects_are_listed_in_pages_of_500() {
    let server = server().await;
    for i in 0..3000 {
        server
            .source()
            .create(config_map("bulk", &format!("cm-{i:05}"), "x"))
            .unwrap();
    }
    let running =
        Running::start_listing(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;
    assert_eq!(running.informer.indexer().len(), 3000);
    assert_eq!(running.cache(), source_state(&server));
    let pages = server
        .requests()
        .iter()
        .filter(|r| !r.contains("watch=") && r.contains("limit=500"))
        .count();
    assert_eq!(pages, 6, "{:?}", server.requests());
    assert!(server.requests().iter().any(|r| r.contains("continue=")));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_requests_are_retry_errors_and_the_informer_still_syncs() {
    let server = server().await;
    server
        .source()
        .create(config_map("apps", "a", "1"))
        .unwrap();
    server.throttle_next(1);
    let running = Running::start(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;
    assert_eq!(running.cache(), source_state(&server));
    assert_eq!(
        running.kinds.lock().unwrap().first(),
        Some(&ErrorKind::Retry)
    );
    assert!(running.errors.lock().unwrap()[0].ends_with(": 429"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_and_nameless_watch_objects_are_typed_errors_and_the_cache_stays_correct() {
    let server = server().await;
    server
        .source()
        .create(config_map("apps", "a", "1"))
        .unwrap();
    let running = Running::start(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;

    let bad_lines = [
        "this is not json",
        r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"apps","resourceVersion":"999"},"data":7}}"#,
        r#"{"type":"SURPRISE","object":{}}"#,
        r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap"}}"#,
    ];
    for (i, line) in bad_lines.iter().enumerate() {
        wait_for_watch(&server).await;
        let before = running.errors.lock().unwrap().len();
        server.push_raw_line(line);
        let errors = running.errors.clone();
        tokio::time::timeout(BOUND, async move {
            while errors.lock().unwrap().len() == before {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("no error reported for a bad line");
        server
            .source()
            .create(config_map("apps", &format!("after-{i}"), "1"))
            .unwrap();
        running.caught_up(&server).await;
        assert_eq!(running.cache(), source_state(&server));
    }
    let errors = running.errors.lock().unwrap().clone();
    assert_eq!(
        errors.iter().filter(|e| *e == "watch: decode").count(),
        3,
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("bad input: key")),
        "{errors:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_list_is_a_typed_error_and_the_next_list_syncs() {
    let server = server().await;
    server
        .source()
        .create(config_map("apps", "a", "1"))
        .unwrap();
    server.corrupt_next_lists(1);
    let running =
        Running::start_listing(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;
    assert_eq!(running.cache(), source_state(&server));
    assert_eq!(
        running.errors.lock().unwrap().first().map(String::as_str),
        Some("list: decode")
    );
    running.stop().await;
}

/// The lists and streaming lists the server was asked for.
fn relists(server: &Loopback) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| !r.contains("watch=") || r.contains("sendInitialEvents=true"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_informer_streams_its_list_by_default_and_never_lists() {
    let server = server().await;
    for i in 0..700 {
        server
            .source()
            .create(config_map("bulk", &format!("cm-{i:05}"), "x"))
            .unwrap();
    }
    let running = Running::start(KubeListWatcher::new(kube::Api::all(server.client()))).await;
    running.synced().await;
    assert_eq!(running.informer.indexer().len(), 700);
    assert_eq!(running.cache(), source_state(&server));
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r.contains("watch=")),
        "no list: {requests:?}"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.contains("sendInitialEvents=true"))
            .count(),
        1,
        "{requests:?}"
    );
    running.stop().await;
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

async fn wait_for_watch(server: &Loopback) {
    tokio::time::timeout(BOUND, async {
        while server.open_watches() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("no watch opened");
}
