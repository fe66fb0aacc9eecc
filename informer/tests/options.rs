//! The reflector settings `InformerOptions` passes through: page size, streaming initial list.

mod common;

use common::{cache_view, source, source_view, Pod, WAIT};
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_memory::MemorySource;
use kcache_reflector::{ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// A source that records the requests it receives.
#[derive(Clone)]
struct Recording {
    inner: MemorySource<Pod>,
    lists: Arc<Mutex<Vec<ListOptions>>>,
    watches: Arc<Mutex<Vec<WatchOptions>>>,
}

impl ListWatcher<Pod> for Recording {
    type Error = <MemorySource<Pod> as ListWatcher<Pod>>::Error;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<Pod>, Self::Error>> + Send {
        self.lists.lock().unwrap().push(opts.clone());
        self.inner.list(opts)
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<Pod, Self::Error>, Self::Error>> + Send {
        self.watches.lock().unwrap().push(opts.clone());
        self.inner.watch(opts)
    }
}

async fn sync_with(options: InformerOptions<Pod>, pods: usize) -> Recording {
    let (clock, src) = source();
    for i in 0..pods {
        src.create(Pod::new(&format!("p{i}"), 1)).unwrap();
    }
    let rec = Recording {
        inner: src.clone(),
        lists: Arc::default(),
        watches: Arc::default(),
    };
    let inf = Arc::new(SharedIndexInformer::with_options(
        rec.clone(),
        options.clock(Arc::new(clock)),
    ));
    let (tx, rx) = oneshot::channel::<()>();
    let task = {
        let inf = inf.clone();
        tokio::spawn(async move {
            inf.run(async {
                let _ = rx.await;
            })
            .await
        })
    };
    assert!(tokio::time::timeout(WAIT, inf.wait_for_cache_sync())
        .await
        .unwrap());
    assert_eq!(cache_view(inf.indexer().list()), source_view(&src));
    let _ = tx.send(());
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    rec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_size_reaches_the_reflector_s_list_requests() {
    let rec = sync_with(InformerOptions::new().page_size(2), 5).await;
    let lists = rec.lists.lock().unwrap().clone();
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert!(lists.iter().all(|l| l.limit == Some(2)), "{lists:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_initial_list_syncs_through_one_watch_and_no_list() {
    let rec = sync_with(
        InformerOptions::new()
            .streaming_initial_list(true)
            .min_watch_timeout(Duration::from_secs(600)),
        5,
    )
    .await;
    assert!(rec.lists.lock().unwrap().is_empty());
    let watches = rec.watches.lock().unwrap().clone();
    assert!(watches[0].send_initial_events, "{watches:?}");
    let timeout = watches[0].timeout.unwrap();
    assert!(timeout >= Duration::from_secs(600) && timeout <= Duration::from_secs(1200));
}
