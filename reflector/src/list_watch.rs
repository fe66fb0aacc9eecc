//! [`ListWatch`]: a [`ListWatcher`] made of two closures (client-go's `cache.ListWatch`).

use crate::{BackendError, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use futures::future::{BoxFuture, FutureExt};
use std::fmt;
use std::future::Future;

/// A [`ListWatcher`] built from a list function and a watch function, like client-go's
/// `cache.ListWatch{ListFunc, WatchFunc}`: the quickest way to plug a source in without writing a
/// type and a trait implementation.
///
/// Each function takes its options by value and returns a future that owns what it needs (clone
/// your client into it), so the closures are usually `move |opts| { let c = client.clone();
/// async move { … } }`. The error type is the backend's, classified through [`BackendError`]
/// (which errors relist is said there, on [`ErrorKind`](crate::ErrorKind)). For a source that can
/// only be listed, see [`PollingListWatcher`](crate::PollingListWatcher).
///
/// # Examples
/// A source of two fixed objects whose watch never reports a change, behind an informer run by
/// `tokio::spawn`:
/// ```
/// use futures::stream::{self, StreamExt};
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_informer::SharedIndexInformer;
/// use kcache_reflector::{
///     BackendError, ErrorKind, ListOptions, ListPage, ListWatch, ListWatcher, WatchOptions,
///     WatchStream,
/// };
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// struct Job { name: String }
/// impl Object for Job {
///     fn namespace(&self) -> Option<&str> { None }
///     fn name(&self) -> &str { &self.name }
///     fn resource_version(&self) -> ResourceVersion { ResourceVersion::from("1") }
/// }
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("the job table is unreachable")]
/// struct Unreachable;
/// impl BackendError for Unreachable {
///     fn kind(&self) -> ErrorKind { ErrorKind::Retry }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let lw = ListWatch::new(
///     |_opts: ListOptions| async {
///         let items = ["nightly", "hourly"].map(|n| Arc::new(Job { name: n.into() }));
///         Ok::<_, Unreachable>(ListPage {
///             items: items.into(),
///             resource_version: ResourceVersion::from("1"),
///             continue_token: None,
///         })
///     },
///     |_opts: WatchOptions| async {
///         Ok::<WatchStream<Job, Unreachable>, _>(stream::pending().boxed())
///     },
/// );
/// // Closures cannot tell the source's version without listing (a warm restart relists).
/// assert_eq!(lw.current_resource_version().await?, None);
///
/// let informer = Arc::new(SharedIndexInformer::new(lw, Duration::ZERO));
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = informer.clone();
/// let task = tokio::spawn(async move { running.run(async { let _ = stopped.await; }).await });
/// assert!(informer.wait_for_cache_sync().await);
/// assert_eq!(informer.indexer().list().len(), 2);
/// let _ = stop.send(());
/// task.await??;
/// # Ok(())
/// # }
/// ```
#[doc(alias = "ListFunc")]
#[doc(alias = "WatchFunc")]
pub struct ListWatch<T, E> {
    list: ListFn<T, E>,
    watch: WatchFn<T, E>,
}

/// The boxed list function of a [`ListWatch`].
type ListFn<T, E> =
    Box<dyn Fn(ListOptions) -> BoxFuture<'static, Result<ListPage<T>, E>> + Send + Sync>;

/// The boxed watch function of a [`ListWatch`].
type WatchFn<T, E> =
    Box<dyn Fn(WatchOptions) -> BoxFuture<'static, Result<WatchStream<T, E>, E>> + Send + Sync>;

impl<T, E> ListWatch<T, E>
where
    T: Send + Sync + 'static,
    E: BackendError,
{
    /// A `ListWatcher` whose `list` calls `list` and whose `watch` calls `watch`.
    ///
    /// The futures the closures return are boxed here, so `ListWatch<T, E>` names no closure
    /// or future type: it can be stored in a struct field, and an informer over it can be
    /// handed to `tokio::spawn` (with the closure types inside, the compiler's check that the
    /// spawned future is `Send` failed with E0308 "one type is more general than the other",
    /// a known limitation of rustc's auto-trait checking of async blocks). The box costs one
    /// allocation per list or watch call, which each do I/O anyway.
    pub fn new<L, LF, W, WF>(list: L, watch: W) -> Self
    where
        L: Fn(ListOptions) -> LF + Send + Sync + 'static,
        LF: Future<Output = Result<ListPage<T>, E>> + Send + 'static,
        W: Fn(WatchOptions) -> WF + Send + Sync + 'static,
        WF: Future<Output = Result<WatchStream<T, E>, E>> + Send + 'static,
    {
        Self {
            list: Box::new(move |opts| list(opts).boxed()),
            watch: Box::new(move |opts| watch(opts).boxed()),
        }
    }
}

impl<T, E> fmt::Debug for ListWatch<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListWatch").finish_non_exhaustive()
    }
}

impl<T, E> ListWatcher<T> for ListWatch<T, E>
where
    T: Send + Sync + 'static,
    E: BackendError,
{
    type Error = E;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, Self::Error>> + Send {
        (self.list)(opts.clone())
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, Self::Error>, Self::Error>> + Send {
        (self.watch)(opts.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, WatchEvent};
    use futures::stream::{self, StreamExt};
    use kcache_core::ResourceVersion;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    #[derive(Debug, thiserror::Error)]
    #[error("gone")]
    struct Gone;
    impl BackendError for Gone {
        fn kind(&self) -> ErrorKind {
            ErrorKind::Expired
        }
    }

    #[test]
    fn list_and_watch_call_their_closures_with_the_options_given() {
        let listed = Arc::new(Mutex::new(Vec::new()));
        let watched = Arc::new(AtomicUsize::new(0));
        let (l, w) = (listed.clone(), watched.clone());
        let lw = ListWatch::new(
            move |opts: ListOptions| {
                l.lock().unwrap().push(opts);
                async {
                    Ok::<_, Gone>(ListPage {
                        items: vec![Arc::new(7u32)],
                        resource_version: ResourceVersion::from("3"),
                        continue_token: None,
                    })
                }
            },
            move |opts: WatchOptions| {
                w.fetch_add(1, Ordering::SeqCst);
                async move {
                    if opts.resource_version.as_str() == "old" {
                        return Err(Gone);
                    }
                    let ev: Result<WatchEvent<u32>, Gone> = Ok(WatchEvent::Added(Arc::new(8)));
                    Ok(stream::iter([ev]).boxed())
                }
            },
        );
        futures::executor::block_on(async {
            let opts = ListOptions {
                limit: Some(5),
                ..ListOptions::default()
            };
            let page = lw.list(&opts).await.unwrap();
            assert_eq!(*page.items[0], 7);
            assert_eq!(listed.lock().unwrap().as_slice(), [opts]);

            let mut s = lw.watch(&WatchOptions::default()).await.unwrap();
            assert!(matches!(s.next().await, Some(Ok(WatchEvent::Added(o))) if *o == 8));
            assert!(s.next().await.is_none());

            let old = WatchOptions {
                resource_version: ResourceVersion::from("old"),
                ..WatchOptions::default()
            };
            let err = lw.watch(&old).await.err().unwrap();
            assert_eq!(err.kind(), ErrorKind::Expired);
            assert_eq!(watched.load(Ordering::SeqCst), 2);
        });
    }
}
