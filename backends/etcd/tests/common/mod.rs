//! Shared by the etcd test files: the object type, server discovery (and skipping), an etcd
//! process of the test's own, a store for reflectors, raw reads and batched writes.
#![allow(dead_code, unreachable_pub)]

use etcd_client::{Client, GetOptions, Txn, TxnOp};
use kcache_core::{Clock, Object, ReflectorStore, ResourceVersion, SystemClock};
use kcache_etcd::SetResourceVersion;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The object of every test: `namespace/name` with a number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub namespace: String,
    pub name: String,
    pub value: u64,
    #[serde(skip)]
    pub rv: ResourceVersion,
}

impl Object for Item {
    fn namespace(&self) -> Option<&str> {
        Some(self.namespace.as_str()).filter(|ns| !ns.is_empty())
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        self.rv.clone()
    }
}

impl SetResourceVersion for Item {
    fn set_resource_version(&mut self, rv: ResourceVersion) {
        self.rv = rv;
    }
}

pub fn item(ns: &str, name: &str, value: u64) -> Item {
    Item {
        namespace: ns.into(),
        name: name.into(),
        value,
        rv: ResourceVersion::default(),
    }
}

pub fn json(it: &Item) -> Vec<u8> {
    serde_json::to_vec(it).unwrap_or_default()
}

const HOW_TO: &str = "to run it: apt-get install etcd-server; \
    etcd --data-dir /tmp/e & \
    KCACHE_ETCD_ENDPOINTS=http://127.0.0.1:2379 KCACHE_ETCD_BIN=/usr/bin/etcd cargo test -p kcache-etcd \
    (bash .ci/run does this)";

/// The shared server's endpoint, or `None` (after saying that `test` was skipped and how to run it).
pub fn endpoints(test: &str) -> Option<String> {
    match std::env::var("KCACHE_ETCD_ENDPOINTS") {
        Ok(e) if !e.trim().is_empty() => Some(e),
        _ => {
            eprintln!("SKIPPED {test}: KCACHE_ETCD_ENDPOINTS is not set; {HOW_TO}");
            None
        }
    }
}

/// The etcd binary for tests that run their own server, or `None` (after saying it was skipped).
pub fn etcd_bin(test: &str) -> Option<PathBuf> {
    match std::env::var("KCACHE_ETCD_BIN") {
        Ok(b) if !b.trim().is_empty() => Some(PathBuf::from(b)),
        _ => {
            eprintln!(
                "SKIPPED {test}: KCACHE_ETCD_BIN is not set (it starts its own etcd); {HOW_TO}"
            );
            None
        }
    }
}

pub async fn connect(endpoint: &str) -> Client {
    match tokio::time::timeout(Duration::from_secs(10), Client::connect([endpoint], None)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => panic!("cannot connect to etcd at {endpoint}: {e}"),
        Err(_) => panic!("cannot connect to etcd at {endpoint}: timed out"),
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A prefix no other test (or earlier run) uses.
pub fn unique_prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::UNIX_EPOCH
        .elapsed()
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "/kcache-test/{test}/{}-{nanos}-{}/",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Polls `cond` every 20 ms until it holds; panics with `what` after `limit`.
pub async fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let clock = SystemClock;
    let deadline = clock.now() + limit;
    while !cond() {
        assert!(
            clock.now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        clock.sleep_async(Duration::from_millis(20)).await;
    }
}

/// Polls the async `cond` every 100 ms until it holds; panics with `what` after `limit`.
pub async fn wait_for_async<F: Future<Output = bool>>(
    limit: Duration,
    what: &str,
    mut cond: impl FnMut() -> F,
) {
    let clock = SystemClock;
    let deadline = clock.now() + limit;
    while !cond().await {
        assert!(
            clock.now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        clock.sleep_async(Duration::from_millis(100)).await;
    }
}

/// `fut`, or a panic naming `what` after `limit`.
pub async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(limit, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {limit:?}: {what}"),
    }
}

/// What etcd holds under `prefix` (at `rev`, or now): key below the prefix -> (value, mod_revision),
/// and the read's revision. A raw read that does not go through kcache-etcd.
pub async fn raw_state(
    client: &Client,
    prefix: &str,
    rev: Option<i64>,
) -> (BTreeMap<String, (Vec<u8>, i64)>, i64) {
    let mut opts = GetOptions::new().with_prefix();
    if let Some(r) = rev {
        opts = opts.with_revision(r);
    }
    let resp = within(
        Duration::from_secs(60),
        "raw range read",
        client
            .kv_client()
            .max_decoding_message_size(1 << 30)
            .get(prefix, Some(opts)),
    )
    .await
    .unwrap_or_else(|e| panic!("raw range read failed: {e}"));
    let read_rev = rev.unwrap_or_else(|| resp.header().map(|h| h.revision()).unwrap_or(0));
    let map = resp
        .kvs()
        .iter()
        .map(|kv| {
            let key = String::from_utf8_lossy(&kv.key()[prefix.len()..]).into_owned();
            (key, (kv.value().to_vec(), kv.mod_revision()))
        })
        .collect();
    (map, read_rev)
}

/// The decodable part of `raw`, as the cache should hold it: key -> (value, rv).
pub fn expected(raw: &BTreeMap<String, (Vec<u8>, i64)>) -> BTreeMap<String, (u64, String)> {
    raw.iter()
        .filter_map(|(k, (v, rev))| {
            let it: Item = serde_json::from_slice(v).ok()?;
            let key = match it.namespace.as_str() {
                "" => it.name.clone(),
                ns => format!("{ns}/{}", it.name),
            };
            (key == *k).then(|| (key, (it.value, rev.to_string())))
        })
        .collect()
}

/// Puts `items` under `prefix` in transactions of 100, `parallel` at a time; returns the last
/// revision written.
pub async fn put_all(client: &Client, prefix: &str, items: Vec<Item>, parallel: usize) -> i64 {
    let chunks: Vec<Vec<Item>> = items.chunks(100).map(<[Item]>::to_vec).collect();
    let queue = Arc::new(Mutex::new(chunks));
    let mut tasks = Vec::new();
    for _ in 0..parallel.max(1) {
        let queue = queue.clone();
        let client = client.clone();
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut last = 0;
            loop {
                let Some(chunk) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop() else {
                    return last;
                };
                let ops: Vec<TxnOp> = chunk
                    .iter()
                    .map(|it| {
                        TxnOp::put(
                            format!("{prefix}{}/{}", it.namespace, it.name),
                            json(it),
                            None,
                        )
                    })
                    .collect();
                let resp = client
                    .kv_client()
                    .txn(Txn::new().and_then(ops))
                    .await
                    .unwrap_or_else(|e| panic!("batched put failed: {e}"));
                last = last.max(resp.header().map(|h| h.revision()).unwrap_or(0));
            }
        }));
    }
    let mut last = 0;
    for t in tasks {
        last = last.max(t.await.unwrap_or_else(|e| panic!("writer task: {e}")));
    }
    last
}

/// `n` items `ns/item-00000` .. with value `value`.
pub fn items(n: usize, value: u64) -> Vec<Item> {
    (0..n)
        .map(|i| item("ns", &format!("item-{i:06}"), value))
        .collect()
}

/// A store for reflectors: key -> object, plus the operations seen.
#[derive(Default, Clone)]
pub struct TestStore {
    inner: Arc<Mutex<StoreInner>>,
}

#[derive(Default)]
struct StoreInner {
    objects: BTreeMap<String, Arc<Item>>,
    replaces: u64,
    events: u64,
    last_rv: String,
}

fn key_of(it: &Item) -> String {
    match it.namespace.as_str() {
        "" => it.name.clone(),
        ns => format!("{ns}/{}", it.name),
    }
}

impl TestStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, StoreInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// key -> (value, rv).
    pub fn snapshot(&self) -> BTreeMap<String, (u64, String)> {
        self.lock()
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), (v.value, v.rv.as_str().to_owned())))
            .collect()
    }
    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }
    pub fn replaces(&self) -> u64 {
        self.lock().replaces
    }
    pub fn events(&self) -> u64 {
        self.lock().events
    }
    pub fn get(&self, key: &str) -> Option<Arc<Item>> {
        self.lock().objects.get(key).cloned()
    }
}

impl ReflectorStore<Item> for TestStore {
    type Error = std::convert::Infallible;

    fn add(&self, obj: Arc<Item>) -> Result<(), Self::Error> {
        let mut s = self.lock();
        s.events += 1;
        s.objects.insert(key_of(&obj), obj);
        Ok(())
    }
    fn update(&self, obj: Arc<Item>) -> Result<(), Self::Error> {
        self.add(obj)
    }
    fn delete(&self, obj: Arc<Item>) -> Result<(), Self::Error> {
        let mut s = self.lock();
        s.events += 1;
        s.objects.remove(&key_of(&obj));
        Ok(())
    }
    fn replace(&self, objects: Vec<Arc<Item>>, rv: ResourceVersion) -> Result<(), Self::Error> {
        let mut s = self.lock();
        s.replaces += 1;
        s.last_rv = rv.as_str().to_owned();
        s.objects = objects.into_iter().map(|o| (key_of(&o), o)).collect();
        Ok(())
    }
    fn resync(&self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A free TCP port on 127.0.0.1 (free when asked; etcd binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// An etcd process of the test's own (from `KCACHE_ETCD_BIN`): its own data dir and ports, so it
/// can be compacted, killed and restarted without disturbing the shared server.
pub struct OwnEtcd {
    bin: PathBuf,
    pub dir: PathBuf,
    pub client_port: u16,
    peer_port: u16,
    extra: Vec<String>,
    child: Option<Child>,
}

impl OwnEtcd {
    /// Starts etcd and waits until it answers. `extra`: more flags.
    pub async fn start(bin: PathBuf, extra: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kcache-etcd-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut me = Self {
            bin,
            dir,
            client_port: free_port(),
            peer_port: free_port(),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            child: None,
        };
        me.spawn().await;
        me
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    async fn spawn(&mut self) {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::File::create(self.dir.with_extension("log"))
            .unwrap_or_else(|e| panic!("etcd log file: {e}"));
        let child = Command::new(&self.bin)
            .arg("--name")
            .arg("kcache-test")
            .arg("--data-dir")
            .arg(&self.dir)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("kcache-test={peer}")])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        self.child = Some(child);
        let endpoint = self.endpoint();
        wait_for_async(Duration::from_secs(30), "own etcd to answer", || {
            let endpoint = endpoint.clone();
            async move {
                match tokio::time::timeout(
                    Duration::from_secs(2),
                    Client::connect([&endpoint], None),
                )
                .await
                {
                    Ok(Ok(mut c)) => matches!(
                        tokio::time::timeout(Duration::from_secs(2), c.get("health", None)).await,
                        Ok(Ok(_))
                    ),
                    _ => false,
                }
            }
        })
        .await;
    }

    /// SIGKILL, no clean shutdown.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same data dir and ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(self.dir.with_extension("log"));
    }
}

/// What a reflector's watch-error hook saw: (kind, message) per error.
#[derive(Default, Clone)]
pub struct Reports(Arc<Mutex<Vec<(kcache_reflector::ErrorKind, String)>>>);

impl Reports {
    pub fn hook(
        &self,
    ) -> impl Fn(&kcache_reflector::ReflectorError<kcache_etcd::EtcdError, std::convert::Infallible>)
           + Send
           + Sync
           + 'static {
        use kcache_reflector::{BackendError, ErrorKind, ReflectorError};
        let me = self.clone();
        move |e| {
            let (kind, backend) = match e {
                ReflectorError::List(b)
                | ReflectorError::WatchOpen(b)
                | ReflectorError::Watch(b) => (b.kind(), Some(b)),
                _ => (ErrorKind::Other, None),
            };
            let text = match backend {
                Some(b) => format!("{e}: {b}"),
                None => e.to_string(),
            };
            me.0.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((kind, text));
        }
    }
    pub fn all(&self) -> Vec<(kcache_reflector::ErrorKind, String)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn any(&self, kind: kcache_reflector::ErrorKind, needle: &str) -> bool {
        self.all()
            .iter()
            .any(|(k, t)| *k == kind && t.contains(needle))
    }
}

/// Backoff for tests: client-go's shape, shorter.
pub fn quick_backoff() -> kcache_reflector::BackoffConfig {
    kcache_reflector::BackoffConfig {
        initial: Duration::from_millis(100),
        factor: 2.0,
        jitter: 0.5,
        cap: Duration::from_secs(2),
        reset_after: Duration::from_secs(60),
    }
}

/// Waits until the store holds exactly the decodable state of etcd under `prefix`.
pub async fn converge(store: &TestStore, client: &Client, prefix: &str, limit: Duration) {
    let clock = SystemClock;
    let deadline = clock.now() + limit;
    loop {
        let (raw, _) = raw_state(client, prefix, None).await;
        let want = expected(&raw);
        let got = store.snapshot();
        if got == want {
            return;
        }
        if clock.now() >= deadline {
            let missing = want.iter().filter(|(k, v)| got.get(*k) != Some(v)).count();
            let extra = got.keys().filter(|k| !want.contains_key(*k)).count();
            panic!(
                "store did not converge within {limit:?}: {} in store, {} in etcd, {missing} missing or stale, {extra} extra",
                got.len(),
                want.len()
            );
        }
        clock.sleep_async(Duration::from_millis(200)).await;
    }
}
