//! Figures of kcache-etcd against a real etcd: how long a reflector takes to sync 100,000 keys,
//! and how many events per second it follows.
//!
//! ```text
//! KCACHE_ETCD_ENDPOINTS=http://127.0.0.1:2379 cargo run --release -p kcache-etcd --example etcd_figures [-- KEYS UPDATES]
//! ```
//! It writes under a fresh prefix `/kcache-figures/<pid>-<n>/` and deletes it at the end.

use etcd_client::{Client, DeleteOptions, Txn, TxnOp};
use futures::StreamExt;
use kcache_core::{Clock, Object, ReflectorStore, ResourceVersion, SystemClock};
use kcache_etcd::{EtcdListWatcher, SetResourceVersion};
use kcache_reflector::{ListWatcher, Reflector, WatchEvent, WatchOptions};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Serialize, Deserialize)]
struct Item {
    namespace: String,
    name: String,
    value: u64,
    #[serde(skip)]
    rv: ResourceVersion,
}

impl Object for Item {
    fn namespace(&self) -> Option<&str> {
        Some(&self.namespace)
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

/// A map store that counts what it applied.
#[derive(Default, Clone)]
struct Counting {
    objects: Arc<Mutex<HashMap<String, Arc<Item>>>>,
    events: Arc<AtomicU64>,
    replaced: Arc<AtomicU64>,
}

impl ReflectorStore<Item> for Counting {
    type Error = std::convert::Infallible;
    fn add(&self, o: Arc<Item>) -> Result<(), Self::Error> {
        self.update(o)
    }
    fn update(&self, o: Arc<Item>) -> Result<(), Self::Error> {
        let key = format!("{}/{}", o.namespace, o.name);
        self.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, o);
        self.events.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn delete(&self, o: Arc<Item>) -> Result<(), Self::Error> {
        let key = format!("{}/{}", o.namespace, o.name);
        self.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.events.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn replace(&self, all: Vec<Arc<Item>>, _rv: ResourceVersion) -> Result<(), Self::Error> {
        let map = all
            .into_iter()
            .map(|o| (format!("{}/{}", o.namespace, o.name), o))
            .collect();
        *self.objects.lock().unwrap_or_else(|e| e.into_inner()) = map;
        self.replaced.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn resync(&self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Writes `n` keys with `value` in transactions of 100, 8 at a time; returns the last revision.
async fn write(client: &Client, prefix: &str, n: u64, value: u64) -> Result<i64, Box<dyn Error>> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (client, prefix, next) = (client.clone(), prefix.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut last = 0;
            loop {
                let start = next.fetch_add(100, Ordering::SeqCst);
                if start >= n {
                    return Ok::<i64, etcd_client::Error>(last);
                }
                let ops: Vec<TxnOp> = (start..(start + 100).min(n))
                    .map(|i| {
                        let it = Item {
                            namespace: "ns".into(),
                            name: format!("item-{i:06}"),
                            value,
                            rv: ResourceVersion::default(),
                        };
                        let v = serde_json::to_vec(&it).unwrap_or_default();
                        TxnOp::put(format!("{prefix}ns/{}", it.name), v, None)
                    })
                    .collect();
                let resp = client.kv_client().txn(Txn::new().and_then(ops)).await?;
                last = last.max(resp.header().map(|h| h.revision()).unwrap_or(0));
            }
        }));
    }
    let mut last = 0;
    for t in tasks {
        last = last.max(t.await??);
    }
    Ok(last)
}

async fn wait_until(what: &str, limit: Duration, cond: impl Fn() -> bool) -> Result<(), String> {
    let clock = SystemClock;
    let deadline = clock.now() + limit;
    while !cond() {
        if clock.now() > deadline {
            return Err(format!("timed out after {limit:?} waiting for {what}"));
        }
        clock.sleep_async(Duration::from_millis(2)).await;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let endpoint =
        std::env::var("KCACHE_ETCD_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    let mut args = std::env::args().skip(1);
    let keys: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let updates: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let client = Client::connect([endpoint.as_str()], None).await?;
    let prefix = format!(
        "/kcache-figures/{}-{}/",
        std::process::id(),
        std::time::SystemTime::UNIX_EPOCH
            .elapsed()
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let clock = SystemClock;
    println!("etcd {endpoint}, prefix {prefix}: {keys} keys, then {updates} updates");

    let t = clock.now();
    let written_rev = write(&client, &prefix, keys, 1).await?;
    println!("setup: wrote {keys} keys in {:.2?}", clock.now() - t);

    // 1. Sync: a reflector lists every key (pages of 500 at one revision) into an empty store.
    let store = Counting::default();
    let lw = EtcdListWatcher::<Item>::new(client.clone(), &prefix);
    let reflector = Reflector::builder(lw.clone(), store.clone()).build();
    let handle = reflector.handle();
    let t = clock.now();
    tokio::spawn(reflector.run());
    let replaced = store.replaced.clone();
    wait_until("the sync", Duration::from_secs(300), || {
        replaced.load(Ordering::SeqCst) >= 1
    })
    .await?;
    let sync = clock.now() - t;
    let synced = store.objects.lock().map(|m| m.len()).unwrap_or(0);
    println!(
        "sync: {synced} keys in {:.3} s ({:.0} keys/s)",
        sync.as_secs_f64(),
        synced as f64 / sync.as_secs_f64()
    );

    // 2. Follow: `updates` live writes; time from the first write to the last event applied.
    let events = store.events.clone();
    let before = events.load(Ordering::SeqCst);
    let t = clock.now();
    write(&client, &prefix, updates, 2).await?;
    let writes_done = clock.now() - t;
    wait_until("the updates", Duration::from_secs(300), || {
        events.load(Ordering::SeqCst) - before >= updates
    })
    .await?;
    let follow = clock.now() - t;
    println!(
        "follow (live): {updates} update events applied in {:.3} s ({:.0} events/s; the writes alone took {:.3} s)",
        follow.as_secs_f64(),
        updates as f64 / follow.as_secs_f64(),
        writes_done.as_secs_f64()
    );
    handle.stop();

    // 3. Catch-up: a watch replaying the same `updates` events from etcd's history, decoded.
    let t = clock.now();
    let mut w = lw
        .watch(&WatchOptions {
            resource_version: ResourceVersion::from(written_rev.to_string()),
            ..WatchOptions::default()
        })
        .await?;
    let mut seen = 0;
    while seen < updates {
        match w.next().await {
            Some(Ok(WatchEvent::Modified(_) | WatchEvent::Added(_))) => seen += 1,
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => return Err("the watch ended early".into()),
        }
    }
    let replay = clock.now() - t;
    println!(
        "catch-up (watch replay): {seen} events in {:.3} s ({:.0} events/s)",
        replay.as_secs_f64(),
        seen as f64 / replay.as_secs_f64()
    );
    drop(w);

    client
        .kv_client()
        .delete(prefix.as_str(), Some(DeleteOptions::new().with_prefix()))
        .await?;
    Ok(())
}
