//! [`Replay`]: a [`ListWatcher`] that answers from prebuilt input, so a workload times the
//! informer and nothing of a source.
//!
//! Lists are served page by page (honouring `limit` and the continue token) from a
//! [`ListSource`]: prebuilt objects shared as `Arc`s, or objects built afresh for every list call,
//! as a client decoding a list response would allocate them. Watches follow a script, one
//! [`WatchScript`] per watch call in order: prebuilt events (moved out, not cloned) or an
//! expired-version error. Either is held back until [`Replay::open`] is called, so a workload can
//! start its clock at the sync point with every event already waiting. A watch past the end of
//! the script stays open and silent.
//!
//! # Examples
//! ```
//! use kcache_benches::replay::{ListSource, Replay, WatchScript};
//! use kcache_reflector::{ListOptions, ListWatcher, WatchEvent};
//! use std::sync::Arc;
//!
//! let replay = Replay::new(
//!     ListSource::Prebuilt((0..5u32).map(Arc::new).collect()),
//!     vec![WatchScript::Events(vec![WatchEvent::Modified(Arc::new(9))])],
//! );
//! let page = futures::executor::block_on(replay.list(&ListOptions {
//!     limit: Some(2),
//!     ..ListOptions::default()
//! }))
//! .unwrap();
//! assert_eq!(page.items.len(), 2);
//! assert!(page.continue_token.is_some());
//! assert_eq!(replay.lists(), 0, "a list counts once its last page is out");
//! ```

use futures::StreamExt;
use kcache_core::ResourceVersion;
use kcache_reflector::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchEvent, WatchOptions,
    WatchStream,
};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a list answers with.
pub enum ListSource<T> {
    /// The same prebuilt objects on every list (the page holds clones of their `Arc`s).
    Prebuilt(Vec<Arc<T>>),
    /// `len` objects built by `make(i)` at the moment their page is listed: every list call hands
    /// out new allocations.
    Fresh {
        /// How many objects a list holds.
        len: usize,
        /// Builds object `i`.
        make: Box<dyn Fn(usize) -> T + Send + Sync>,
    },
}

impl<T> ListSource<T> {
    fn len(&self) -> usize {
        match self {
            Self::Prebuilt(items) => items.len(),
            Self::Fresh { len, .. } => *len,
        }
    }

    fn page(&self, from: usize, to: usize) -> Vec<Arc<T>> {
        match self {
            Self::Prebuilt(items) => items[from..to].to_vec(),
            Self::Fresh { make, .. } => (from..to).map(|i| Arc::new(make(i))).collect(),
        }
    }
}

/// What one watch call does, once the replay is [opened](Replay::open).
pub enum WatchScript<T> {
    /// Delivers these events, then stays open and silent.
    Events(Vec<WatchEvent<T>>),
    /// Fails with [`ReplayError::Expired`] (a compacted resource version: the reflector relists).
    Expired,
}

/// The error a replay reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// The watched resource version is too old.
    Expired,
    /// A continue token this replay did not hand out.
    BadContinue(String),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expired => f.write_str("replay: the resource version has expired"),
            Self::BadContinue(t) => write!(f, "replay: bad continue token {t:?}"),
        }
    }
}

impl std::error::Error for ReplayError {}

impl BackendError for ReplayError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Expired => ErrorKind::Expired,
            Self::BadContinue(_) => ErrorKind::Other,
        }
    }
}

struct Inner<T> {
    source: ListSource<T>,
    /// The version of list call `k` (the last one for every later call).
    list_rvs: Vec<ResourceVersion>,
    script: Mutex<VecDeque<WatchScript<T>>>,
    gate: tokio::sync::watch::Sender<bool>,
    lists: AtomicUsize,
    watches: AtomicUsize,
}

/// The replaying source (see the module documentation). Clones share one script.
pub struct Replay<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Replay<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Replay<T> {
    /// A replay listing `source` at resource version "100000" and answering watch calls with
    /// `script`, in order.
    pub fn new(source: ListSource<T>, script: Vec<WatchScript<T>>) -> Self {
        Self::with_list_versions(source, script, vec![ResourceVersion::from("100000")])
    }

    /// As [`new`](Self::new), list call `k` (from 0) answering at `list_rvs[k]` (the last one
    /// for every later call).
    pub fn with_list_versions(
        source: ListSource<T>,
        script: Vec<WatchScript<T>>,
        list_rvs: Vec<ResourceVersion>,
    ) -> Self {
        let (gate, _) = tokio::sync::watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                source,
                list_rvs,
                script: Mutex::new(script.into()),
                gate,
                lists: AtomicUsize::new(0),
                watches: AtomicUsize::new(0),
            }),
        }
    }

    /// Releases every watch script, those already opened and those to come.
    pub fn open(&self) {
        self.inner.gate.send_replace(true);
    }

    /// How many complete lists were served (a list counts when its last page is handed out).
    pub fn lists(&self) -> usize {
        self.inner.lists.load(Ordering::Acquire)
    }

    /// How many watch calls were made.
    pub fn watches(&self) -> usize {
        self.inner.watches.load(Ordering::Acquire)
    }
}

impl<T: Send + Sync + 'static> ListWatcher<T> for Replay<T> {
    type Error = ReplayError;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, ReplayError>> + Send {
        let result = self.page(opts);
        async move { result }
    }

    fn watch(
        &self,
        _: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, ReplayError>, ReplayError>> + Send {
        self.inner.watches.fetch_add(1, Ordering::AcqRel);
        let next = self.inner.script.lock().pop_front();
        let mut open = self.inner.gate.subscribe();
        async move {
            let gate = futures::stream::once(async move {
                let _ = open.wait_for(|o| *o).await;
            })
            .filter_map(|()| async { None });
            let stream = match next {
                Some(WatchScript::Events(events)) => gate
                    .chain(futures::stream::iter(events.into_iter().map(Ok)))
                    .chain(futures::stream::pending())
                    .boxed(),
                Some(WatchScript::Expired) => gate
                    .chain(futures::stream::once(async { Err(ReplayError::Expired) }))
                    .boxed(),
                None => futures::stream::pending().boxed(),
            };
            Ok(stream)
        }
    }
}

impl<T> Replay<T> {
    fn page(&self, opts: &ListOptions) -> Result<ListPage<T>, ReplayError> {
        let inner = &self.inner;
        let len = inner.source.len();
        let from = match &opts.continue_token {
            None => 0,
            Some(t) => t
                .parse::<usize>()
                .ok()
                .filter(|&from| from < len)
                .ok_or_else(|| ReplayError::BadContinue(t.clone()))?,
        };
        let to = opts
            .limit
            .map_or(len, |l| from.saturating_add(l as usize).min(len));
        let call = inner.lists.load(Ordering::Acquire);
        let rv = inner
            .list_rvs
            .get(call)
            .or(inner.list_rvs.last())
            .cloned()
            .unwrap_or_default();
        let continue_token = (to < len).then(|| to.to_string());
        if continue_token.is_none() {
            inner.lists.fetch_add(1, Ordering::AcqRel);
        }
        Ok(ListPage {
            items: inner.source.page(from, to),
            resource_version: rv,
            continue_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    fn list_all(replay: &Replay<u32>, limit: u32) -> (Vec<u32>, Vec<ResourceVersion>) {
        let (mut items, mut rvs, mut token) = (Vec::new(), Vec::new(), None);
        loop {
            let page = block_on(replay.list(&ListOptions {
                limit: Some(limit),
                continue_token: token,
                ..ListOptions::default()
            }))
            .unwrap();
            items.extend(page.items.iter().map(|o| **o));
            rvs.push(page.resource_version);
            token = page.continue_token;
            if token.is_none() {
                return (items, rvs);
            }
        }
    }

    #[test]
    fn pages_cover_the_list_once_and_fresh_lists_allocate_anew() {
        let replay = Replay::with_list_versions(
            ListSource::Fresh {
                len: 7,
                make: Box::new(|i| i as u32 * 10),
            },
            Vec::new(),
            vec!["5".into(), "6".into()],
        );
        let (items, rvs) = list_all(&replay, 3);
        assert_eq!(items, vec![0, 10, 20, 30, 40, 50, 60]);
        assert!(rvs.iter().all(|rv| rv.as_str() == "5"));
        assert_eq!(replay.lists(), 1);
        let (items, rvs) = list_all(&replay, 500);
        assert_eq!(items.len(), 7);
        assert_eq!(rvs, vec![ResourceVersion::from("6")]);
        assert_eq!(replay.lists(), 2);
        let bad = block_on(replay.list(&ListOptions {
            continue_token: Some("99".into()),
            ..ListOptions::default()
        }));
        assert!(matches!(bad, Err(ReplayError::BadContinue(_))));
    }

    #[test]
    fn watches_follow_the_script_and_wait_for_the_gate() {
        let replay = Replay::new(
            ListSource::Prebuilt(Vec::new()),
            vec![
                WatchScript::Events(vec![WatchEvent::Modified(Arc::new(1u32))]),
                WatchScript::Expired,
            ],
        );
        let mut first = block_on(replay.watch(&WatchOptions::default())).unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(first.poll_next_unpin(&mut cx).is_pending(), "gate closed");
        replay.open();
        let event = block_on(first.next()).unwrap().unwrap();
        assert!(matches!(event, WatchEvent::Modified(o) if *o == 1));
        assert!(first.poll_next_unpin(&mut cx).is_pending(), "stays open");
        let mut second = block_on(replay.watch(&WatchOptions::default())).unwrap();
        assert!(matches!(
            block_on(second.next()),
            Some(Err(ReplayError::Expired))
        ));
        let mut third = block_on(replay.watch(&WatchOptions::default())).unwrap();
        assert!(third.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(replay.watches(), 3);
    }
}
