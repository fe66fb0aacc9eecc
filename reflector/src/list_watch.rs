//! [`ListWatch`]: a [`ListWatcher`] made of two closures (client-go's `cache.ListWatch`).

use crate::{BackendError, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream};
use std::fmt;
use std::future::Future;

/// A [`ListWatcher`] built from a list function and a watch function, like client-go's
/// `cache.ListWatch{ListFunc, WatchFunc}`: the quickest way to plug a source in without writing a
/// type and a trait implementation.
///
/// Each function takes its options by value and returns a future that owns what it needs (clone
/// your client into it), so the closures are usually `move |opts| { let c = client.clone();
/// async move { … } }`. The error type is the backend's, classified through [`BackendError`].
/// For a source that can only be listed, see [`PollingListWatcher`](crate::PollingListWatcher).
///
/// # Examples
/// A source of two fixed objects whose watch never reports a change:
/// ```
/// use futures::stream::{self, StreamExt};
/// use kcache_core::{Object, ResourceVersion};
/// use kcache_reflector::{
///     BackendError, ErrorKind, ListOptions, ListPage, ListWatch, ListWatcher, WatchOptions,
///     WatchStream,
/// };
/// use std::sync::Arc;
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
///
/// # futures::executor::block_on(async {
/// let page = lw.list(&ListOptions::default()).await?;
/// assert_eq!(page.items.len(), 2);
/// // Closures cannot tell the source's version without listing (a warm restart relists).
/// assert_eq!(lw.current_resource_version().await?, None);
/// # Ok::<(), Unreachable>(())
/// # }).unwrap();
/// ```
#[doc(alias = "ListFunc")]
#[doc(alias = "WatchFunc")]
pub struct ListWatch<L, W> {
    list: L,
    watch: W,
}

impl<L, W> ListWatch<L, W> {
    /// A `ListWatcher` whose `list` calls `list` and whose `watch` calls `watch`.
    pub fn new(list: L, watch: W) -> Self {
        Self { list, watch }
    }
}

impl<L, W> fmt::Debug for ListWatch<L, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListWatch").finish_non_exhaustive()
    }
}

impl<T, E, L, LF, W, WF> ListWatcher<T> for ListWatch<L, W>
where
    E: BackendError,
    L: Fn(ListOptions) -> LF + Send + Sync + 'static,
    LF: Future<Output = Result<ListPage<T>, E>> + Send,
    W: Fn(WatchOptions) -> WF + Send + Sync + 'static,
    WF: Future<Output = Result<WatchStream<T, E>, E>> + Send,
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
