//! [`Reflector`]: the thin async driver around the state machine.

use crate::handle::{ReflectorHandle, Shared, Stopped};
use crate::machine::{Command, Config, Input, Machine, StoreCall};
use crate::{ListWatcher, ReflectorBuilder, ReflectorError, StoreOperation, WatchStream};
use futures::future::Either;
use futures::{FutureExt, StreamExt};
use kcache_core::{
    Clock, Meta, ObjectAccessor, PagedReplace, ReflectorStore, ResourceVersion, Sleep,
};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::time::Instant;

pub(crate) type Hook<E, SE> = Arc<dyn Fn(&ReflectorError<E, SE>) + Send + Sync>;
pub(crate) type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// Keeps a [`ReflectorStore`] in step with a [`ListWatcher`], following client-go's reflector.
///
/// `run` lists (resource version `"0"` first, then the last synced version, `""` after an
/// Expired or TooLarge answer; paged by client-go's rule, with a full list at the same version if
/// a continue token expires),
/// replaces the store's content (a store with a [page-by-page form](kcache_core::PagedReplace)
/// gets each page as it arrives, and the next page is fetched only once the store took it; the
/// list then ends with `finish_list` instead of one `replace`), then watches from the list's version with bookmarks and a
/// randomized timeout, applying each event to the store. A clean close re-watches (after a backoff
/// when several watches in a row closed within a second: [`ReflectorError::ShortWatches`]); a `Retry` error
/// backs off and re-watches; any other error backs off and relists. A streaming list replaces the
/// list when the backend serves one (see [`ReflectorBuilder::streaming_initial_list`]), and a
/// resync timer may call `store.resync()`. Backoff, timeouts and resync all run on the [`Clock`].
///
/// Build one with [`Reflector::builder`]; see the crate documentation for an example.
#[doc(alias = "ListAndWatch")]
pub struct Reflector<T, L: ListWatcher<T>, S: ReflectorStore<T>, M = ObjectAccessor> {
    pub(crate) lw: L,
    pub(crate) store: S,
    pub(crate) name: String,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: Config,
    pub(crate) should_resync: Option<ShouldResync>,
    pub(crate) hook: Option<Hook<L::Error, S::Error>>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) _types: PhantomData<fn() -> (T, M)>,
}

impl<T, L: ListWatcher<T>, S: ReflectorStore<T>> Reflector<T, L, S, ObjectAccessor> {
    /// A builder for a reflector from `lw` into `store` (keys read through [`ObjectAccessor`];
    /// change it with [`ReflectorBuilder::meta`]).
    pub fn builder(lw: L, store: S) -> ReflectorBuilder<T, L, S, ObjectAccessor> {
        ReflectorBuilder::new(lw, store)
    }
}

impl<T, L, S, M> Reflector<T, L, S, M>
where
    T: Send + Sync + 'static,
    L: ListWatcher<T>,
    S: ReflectorStore<T>,
    M: Meta<T>,
{
    /// The reflector's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store the reflector writes into.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// A handle to stop the reflector and read its last synced resource version.
    pub fn handle(&self) -> ReflectorHandle {
        ReflectorHandle {
            shared: self.shared.clone(),
        }
    }

    /// The resource version of the last list, event or bookmark applied to the store.
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.handle().last_sync_resource_version()
    }

    /// Runs until [`ReflectorHandle::stop`] is called. Every error goes to the watch-error hook;
    /// the reflector recovers from all of them by itself.
    ///
    /// # Cancel safety
    /// Dropping the future stops the reflector; the store keeps what was applied.
    pub async fn run(self) {
        self.run_until(std::future::pending::<()>()).await;
    }

    /// Runs until `shutdown` completes or [`ReflectorHandle::stop`] is called, whichever is first.
    pub async fn run_until<F: Future<Output = ()> + Send>(self, shutdown: F) {
        let shared = self.shared.clone();
        let shutdown = pin!(shutdown);
        let mut stop = pin!(futures::future::select(shutdown, Stopped(&shared)));
        // A store that takes lists page by page gets each page as it arrives (see
        // `PagedReplace`); `list_open` says a paged list attempt has pages with the store.
        let paged = self.store.paged();
        let mut config = self.config.clone();
        config.paged = paged.is_some();
        let mut list_open = false;
        let mut machine: Machine<T, M> = Machine::new(config);
        let mut stream: Option<WatchStream<T, L::Error>> = None;
        let mut resync: Option<(Instant, Sleep)> = None;
        let mut now = self.clock.now();
        let mut out = machine.step(Input::Start, now);
        // Watch events taken from the stream without waiting (see `ReadWatch`) since the stop and
        // resync futures were last polled.
        let mut fast_streak = 0u32;
        // The version last published to the handle (publishing takes its lock).
        let mut published = ResourceVersion::default();
        // The end of the watch (an error or a close), held back while a due resync runs first.
        let mut held: Option<Input<T, L::Error, S::Error>> = None;
        // The input is a watch event taken without waiting (see `ReadWatch`): it is stepped at
        // the time last read, at most one streak of events old, instead of reading the clock
        // once more per event.
        let mut taken_at_once = false;
        // Publishes the machine's version to the handle if it changed (the handle's lock). Under
        // a stream of ready events this happens once per streak, before the reflector waits or
        // yields, not once per event.
        let publish = |machine: &Machine<T, M>, published: &mut ResourceVersion| {
            if machine.last_sync_resource_version() != published {
                *published = machine.last_sync_resource_version().clone();
                self.shared.publish(published);
            }
        };
        loop {
            if !matches!(out.command, Command::Store(_) | Command::ReadWatch { .. }) {
                publish(&machine, &mut published);
            }
            if fast_streak == 0 && stop.as_mut().now_or_never().is_some() {
                publish(&machine, &mut published);
                return;
            }
            if let (Some(err), Some(hook)) = (out.report.as_ref(), self.hook.as_ref()) {
                hook(err);
            }
            if list_open
                && !matches!(
                    out.command,
                    Command::List(_)
                        | Command::Store(
                            StoreCall::ListPage { .. }
                                | StoreCall::FinishList(_)
                                | StoreCall::ListDelete(_)
                        )
                )
                && !(matches!(out.command, Command::ReadWatch { .. }) && machine.is_streaming())
            {
                // The paged list attempt failed (a backoff, a new attempt, or a list or stream
                // instead).
                list_open = false;
                if let Some(paged) = paged {
                    paged.abandon_list();
                }
            }
            let resumed = match &out.command {
                Command::ReadWatch { .. } => held.take(),
                Command::Store(_) => None,
                _ => {
                    held = None;
                    None
                }
            };
            let input = match out.command {
                _ if resumed.is_some() => match resumed {
                    Some(input) => input,
                    None => continue,
                },
                Command::List(opts) => {
                    stream = None;
                    match race(&mut stop, self.lw.list(&opts)).await {
                        Some(res) => Input::Listed(res),
                        None => return,
                    }
                }
                Command::Watch(opts) => {
                    stream = None;
                    match race(&mut stop, self.lw.watch(&opts)).await {
                        Some(Ok(s)) => {
                            stream = Some(s);
                            Input::WatchOpened(Ok(()))
                        }
                        Some(Err(e)) => Input::WatchOpened(Err(e)),
                        None => return,
                    }
                }
                Command::Store(call) => {
                    // A watch event's store call takes microseconds: its result is stepped at
                    // the time of the step that asked for it (one clock read per event). A
                    // replace or resync may take long, so the clock is read again after it.
                    let quick = matches!(
                        call,
                        StoreCall::Add(_)
                            | StoreCall::Update(_)
                            | StoreCall::Delete(_)
                            | StoreCall::Bookmark(_)
                    );
                    let page = matches!(call, StoreCall::ListPage { .. });
                    list_open = page || (list_open && !matches!(call, StoreCall::FinishList(_)));
                    let done = Input::StoreDone(self.apply(call, paged));
                    if let (true, Some(paged)) = (page, paged) {
                        // Back-pressure: the next page is fetched once the store took this one.
                        if race(&mut stop, paged.page_taken()).await.is_none() {
                            return;
                        }
                    }
                    if !quick {
                        now = self.clock.now();
                    }
                    out = machine.step(done, now);
                    continue;
                }
                Command::Sleep(deadline) => {
                    stream = None;
                    match race(&mut stop, self.clock.sleep_until_async(deadline)).await {
                        Some(()) => Input::Slept,
                        None => return,
                    }
                }
                Command::ReadWatch { resync_at } => {
                    match (resync_at, resync.as_ref()) {
                        (None, _) => resync = None,
                        (Some(t), Some((cur, _))) if *cur == t => {}
                        (Some(t), _) => resync = Some((t, self.clock.sleep_until_async(t))),
                    }
                    // An event already buffered in the stream is taken at once, without polling
                    // the stop and resync futures for it: under a stream of events those polls
                    // (waker registrations) cost as much as the rest of the loop. They are still
                    // polled at least every FAST_STREAK events, and whenever the stream is idle.
                    // After FAST_STREAK events in a row the reflector also yields once: a stream
                    // that always has an event ready would otherwise never let the rest of the
                    // task (an informer's pop loop, which shares it) or the executor run.
                    if fast_streak >= FAST_STREAK {
                        publish(&machine, &mut published);
                        YieldNow(false).await;
                    }
                    let ready = match stream.as_mut() {
                        Some(s) if fast_streak < FAST_STREAK => s.next().now_or_never(),
                        _ => None,
                    };
                    if ready.is_none() {
                        // About to wait for the stream (or the watch is gone).
                        publish(&machine, &mut published);
                    }
                    if ready.is_some() {
                        fast_streak += 1;
                    } else {
                        fast_streak = 0;
                    }
                    taken_at_once = matches!(ready, Some(Some(Ok(_))));
                    let input = match (ready, stream.as_mut()) {
                        (Some(Some(Ok(ev))), _) => Input::Event(ev),
                        (Some(Some(Err(e))), _) => Input::WatchFailed(e),
                        (Some(None), _) | (None, None) => Input::WatchClosed,
                        (None, Some(s)) => {
                            // The tick goes first when both are ready, so a stream that always
                            // has an event cannot starve it.
                            let tick = async {
                                match resync.as_mut() {
                                    Some((_, sleep)) => sleep.await,
                                    None => std::future::pending().await,
                                }
                            };
                            let tick = pin!(tick);
                            let next = futures::future::select(tick, s.next());
                            match race(&mut stop, next).await {
                                None => return,
                                Some(Either::Right((Some(Ok(ev)), _))) => Input::Event(ev),
                                Some(Either::Right((Some(Err(e)), _))) => Input::WatchFailed(e),
                                Some(Either::Right((None, _))) => Input::WatchClosed,
                                Some(Either::Left(_)) => {
                                    resync = None;
                                    Input::ResyncDue {
                                        allowed: self.should_resync(),
                                    }
                                }
                            }
                        }
                    };
                    // client-go checks resync on its own timer, beside the watch: a tick already
                    // due when the watch ends runs before the end is handled, or the relist
                    // that follows would restart the timer and the tick would be lost.
                    let ends_watch = matches!(input, Input::WatchFailed(_) | Input::WatchClosed);
                    match resync_at {
                        Some(t) if ends_watch && self.clock.now() >= t => {
                            held = Some(input);
                            resync = None;
                            Input::ResyncDue {
                                allowed: self.should_resync(),
                            }
                        }
                        _ => input,
                    }
                }
            };
            if !std::mem::take(&mut taken_at_once) {
                now = self.clock.now();
            }
            out = machine.step(input, now);
        }
    }

    /// Whether the store should resync at a tick (`true` without a `should_resync` function).
    fn should_resync(&self) -> bool {
        self.should_resync.as_ref().is_none_or(|f| f())
    }

    fn apply(
        &self,
        call: StoreCall<T>,
        paged: Option<&dyn PagedReplace<T, Error = S::Error>>,
    ) -> Result<(), S::Error> {
        match call {
            // The machine asks for pages only when the store is paged (`Config::paged`).
            StoreCall::ListPage { items, first } => match paged {
                Some(paged) => {
                    if first {
                        paged.begin_list();
                    }
                    self.taken_what_it_could(paged.list_page(items))
                }
                None => self.store.replace(items, ResourceVersion::default()),
            },
            StoreCall::FinishList(rv) => match paged {
                Some(paged) => paged.finish_list(rv),
                None => Ok(()),
            },
            StoreCall::ListDelete(obj) => match paged {
                Some(paged) => paged.list_delete(obj),
                None => Ok(()),
            },
            StoreCall::Add(o) => self.store.add(o),
            StoreCall::Update(o) => self.store.update(o),
            StoreCall::Delete(o) => self.store.delete(o),
            StoreCall::Replace(items, rv) => {
                self.taken_what_it_could(self.store.replace(items, rv))
            }
            StoreCall::Resync => self.store.resync(),
            StoreCall::Bookmark(rv) => self.store.bookmark(rv),
        }
    }

    /// A replace's (or a list page's) result: when the store took what it could
    /// (`replace_applied`), the error is reported and the list goes on (a relist would fail the
    /// same way).
    fn taken_what_it_could(&self, result: Result<(), S::Error>) -> Result<(), S::Error> {
        match result {
            Err(source) if self.store.replace_applied(&source) => {
                if let Some(hook) = &self.hook {
                    hook(&ReflectorError::Store {
                        operation: StoreOperation::Replace,
                        source,
                    });
                }
                Ok(())
            }
            other => other,
        }
    }
}

/// Returns `Pending` once (waking its task at once), so whatever else is ready runs first.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Most watch events taken without polling the stop and resync futures (and without yielding)
/// in a row. Each yield lets an informer's pop loop hand the streak's notifications to the
/// handlers' buffers, often waking a parked handler thread (a futex call each): 256 events
/// (a few hundred microseconds) between yields make that cost small per event.
const FAST_STREAK: u32 = 256;

/// Runs `f` unless `stop` completes first (`None`).
async fn race<S, F>(stop: &mut Pin<&mut S>, f: F) -> Option<F::Output>
where
    S: Future,
    F: Future,
{
    match futures::future::select(stop.as_mut(), pin!(f)).await {
        Either::Left(_) => None,
        Either::Right((v, _)) => Some(v),
    }
}

impl<T, L: ListWatcher<T>, S: ReflectorStore<T>, M> fmt::Debug for Reflector<T, L, S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("last_sync_resource_version", &self.shared_rv())
            .finish_non_exhaustive()
    }
}

impl<T, L: ListWatcher<T>, S: ReflectorStore<T>, M> Reflector<T, L, S, M> {
    fn shared_rv(&self) -> ResourceVersion {
        ReflectorHandle {
            shared: self.shared.clone(),
        }
        .last_sync_resource_version()
    }
}
