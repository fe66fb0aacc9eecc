//! The reflector's state machine: a pure step function from (state, input, now) to the next
//! command. No I/O, no clock reads: the driver in `reflector.rs` performs each command and feeds
//! its outcome back as the next [`Input`]. Modelled on kube-runtime's watcher.

use crate::backoff::{Backoff, BackoffConfig, SplitMix64};
use crate::defaults::{DEFAULT_MAX_LIST_OBJECTS, DEFAULT_MAX_LIST_PAGES, DEFAULT_PAGE_SIZE};
use crate::error::{BadInput, ReflectorError, StoreOperation};
use crate::list_watcher::{
    BackendError, ErrorKind, ListOptions, ListPage, WatchEvent, WatchOptions,
};
use kcache_core::{Meta, ResourceVersion};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod list;
mod stream;
#[cfg(test)]
mod tests;

use list::ListState;
use stream::{AfterPage, InitialEvents};

/// A watch that closes cleanly without events sooner than this is a "very short watch".
pub(crate) const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

/// After this many clean closes in a row, each sooner than [`VERY_SHORT_WATCH`] (or the minimum
/// watch timeout, if smaller) after its watch opened, the reflector backs off before it
/// re-watches: a server or proxy that closes every watch right after an event would otherwise
/// turn the reflector into a hot loop of watches (client-go re-watches at once).
pub(crate) const SHORT_WATCH_RUN: u32 = 5;

/// The machine's fixed parameters.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Page size of lists as the user set it: `Some(0)` lists in one request; `None` (not
    /// set) follows client-go's rule (see [`Machine::list_limit`]).
    pub(crate) page_size: Option<u32>,
    pub(crate) min_watch_timeout: Duration,
    pub(crate) resync_period: Option<Duration>,
    pub(crate) streaming: bool,
    pub(crate) backoff: BackoffConfig,
    pub(crate) seed: Option<u64>,
    /// Bounds on a single list (and streaming list).
    pub(crate) limits: ListLimits,
    /// The store takes lists page by page ([`PagedReplace`](kcache_core::PagedReplace)): each
    /// page goes to the store as it arrives ([`StoreCall::ListPage`]) and the list ends with
    /// [`StoreCall::FinishList`], instead of one [`StoreCall::Replace`] of the gathered pages.
    pub(crate) paged: bool,
    /// Start by watching from this version instead of listing: the store already holds the
    /// source's state at it (a cache restored from a snapshot). Taken by the first start.
    pub(crate) resume_from: Option<ResourceVersion>,
}

/// How long one list may go on: a source that returns a continue token on every page (or
/// streams initial events without end) must not keep the reflector listing forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListLimits {
    /// Most pages of one list.
    pub(crate) max_pages: u64,
    /// Most objects of one list.
    pub(crate) max_objects: usize,
}

impl Default for ListLimits {
    fn default() -> Self {
        Self {
            max_pages: DEFAULT_MAX_LIST_PAGES,
            max_objects: DEFAULT_MAX_LIST_OBJECTS,
        }
    }
}

/// What happened: the outcome of the previous command, or a timer.
pub(crate) enum Input<T, E, SE> {
    /// The reflector starts.
    Start,
    /// A list request answered.
    Listed(Result<ListPage<T>, E>),
    /// A watch request answered (the driver keeps the stream).
    WatchOpened(Result<(), E>),
    /// The open watch delivered an event.
    Event(WatchEvent<T>),
    /// The open watch ended with an error.
    WatchFailed(E),
    /// The open watch ended cleanly.
    WatchClosed,
    /// The store call of a [`Command::Store`] returned.
    StoreDone(Result<(), SE>),
    /// The sleep of a [`Command::Sleep`] is over.
    Slept,
    /// The resync deadline of [`Command::ReadWatch`] passed; `allowed` is `should_resync()`.
    ResyncDue { allowed: bool },
}

/// A store call for the driver to make.
pub(crate) enum StoreCall<T> {
    Add(Arc<T>),
    Update(Arc<T>),
    Delete(Arc<T>),
    Replace(Vec<Arc<T>>, ResourceVersion),
    /// One page of a paged list (`first`: the first page of a list attempt).
    ListPage {
        items: Vec<Arc<T>>,
        first: bool,
    },
    /// The paged list is complete at this version.
    FinishList(ResourceVersion),
    /// A `Deleted` initial event of a streaming list handed to a paged store.
    ListDelete(Arc<T>),
    Resync,
    Bookmark(ResourceVersion),
}

impl<T> StoreCall<T> {
    fn operation(&self) -> StoreOperation {
        match self {
            Self::Add(_) => StoreOperation::Add,
            Self::Update(_) => StoreOperation::Update,
            Self::Delete(_) => StoreOperation::Delete,
            Self::Replace(..)
            | Self::ListPage { .. }
            | Self::FinishList(_)
            | Self::ListDelete(_) => StoreOperation::Replace,
            Self::Resync => StoreOperation::Resync,
            Self::Bookmark(_) => StoreOperation::Bookmark,
        }
    }
}

/// What the driver must do next. Any command but `Store` and `ReadWatch` drops the open watch.
pub(crate) enum Command<T> {
    List(ListOptions),
    Watch(WatchOptions),
    Store(StoreCall<T>),
    Sleep(Instant),
    /// Read the next event of the open watch, or wake at `resync_at`.
    ReadWatch {
        resync_at: Option<Instant>,
    },
}

/// One step's result: an error for the hook (if any) and the next command.
pub(crate) struct Output<T, E, SE> {
    pub(crate) report: Option<ReflectorError<E, SE>>,
    pub(crate) command: Command<T>,
}

/// What to do when a backoff sleep ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Relist,
    Rewatch,
    Stream,
}

enum Phase<T> {
    Idle,
    Listing(ListState<T>),
    /// A page of a paged list is with the store; `next` continues the list.
    Paging {
        st: ListState<T>,
        next: Option<String>,
    },
    Streaming {
        requested: ResourceVersion,
        items: InitialEvents<T>,
    },
    /// A page (or a delete) of a streaming list is with a paged store; `after` follows.
    StreamPaging {
        requested: ResourceVersion,
        items: InitialEvents<T>,
        after: AfterPage<T>,
    },
    Replacing {
        rv: ResourceVersion,
        from_stream: bool,
    },
    OpeningWatch,
    Watching,
    Applying {
        /// The version to record once the store took the event (`None`: record nothing).
        rv: Option<ResourceVersion>,
        operation: StoreOperation,
    },
    Resyncing,
    BackingOff(After),
}

/// The reflector's state: client-go's `ListAndWatch` as data.
pub(crate) struct Machine<T, M> {
    config: Config,
    phase: Phase<T>,
    last_sync_rv: ResourceVersion,
    rv_unavailable: bool,
    /// An RV "0" list came back in several pages: the server ignored its watch cache, so later
    /// lists keep paging (client-go's `paginatedResult`).
    paginated_result: bool,
    backoff: Backoff,
    rng: SplitMix64,
    resync_at: Option<Instant>,
    watch_opened_at: Option<Instant>,
    watch_events: u64,
    /// Clean closes in a row of watches that lived less than the short-watch threshold.
    short_watches: u32,
    /// The open watch started at "" or "0", and has delivered only `Added` events so far: those
    /// are the server's synthetic initial events, in no version order, so their versions are
    /// not recorded until the first other event (client-go, kubernetes PR #136583).
    synthetic_adds: bool,
    /// The first watch resumes from [`Config::resume_from`] and has delivered nothing yet: if
    /// the source says that version is gone, list at once (no backoff: nothing failed).
    resuming: bool,
    /// Scratch for checking objects' keys without building them ([`Meta::write_key`]).
    key_buf: String,
    _meta: PhantomData<fn() -> M>,
}

type Out<T, E, SE> = Output<T, E, SE>;

impl<T, M: Meta<T>> Machine<T, M> {
    pub(crate) fn new(config: Config) -> Self {
        let rng = config
            .seed
            .map_or_else(SplitMix64::from_entropy, SplitMix64::new);
        Self {
            backoff: Backoff::new(config.backoff),
            config,
            phase: Phase::Idle,
            last_sync_rv: ResourceVersion::default(),
            rv_unavailable: false,
            paginated_result: false,
            rng,
            resync_at: None,
            watch_opened_at: None,
            watch_events: 0,
            short_watches: 0,
            synthetic_adds: false,
            resuming: false,
            key_buf: String::new(),
            _meta: PhantomData,
        }
    }

    /// The accessor's key error for `obj`, if any: checked through [`Meta::write_key`], so an
    /// accessor that writes the key's parts allocates nothing for a valid object.
    pub(super) fn key_error(&mut self, obj: &T) -> Option<kcache_core::KeyError> {
        M::write_key(obj, &mut self.key_buf).err()
    }

    /// Whether a streaming list is reading its initial events (pages of it may be with a paged
    /// store).
    pub(crate) fn is_streaming(&self) -> bool {
        matches!(self.phase, Phase::Streaming { .. })
    }

    /// The resource version of the last list or event applied (client-go's
    /// `LastSyncResourceVersion`).
    pub(crate) fn last_sync_resource_version(&self) -> &ResourceVersion {
        &self.last_sync_rv
    }

    /// Advances the machine by one input.
    pub(crate) fn step<E: BackendError, SE>(
        &mut self,
        input: Input<T, E, SE>,
        now: Instant,
    ) -> Out<T, E, SE> {
        let phase = std::mem::replace(&mut self.phase, Phase::Idle);
        match (phase, input) {
            (Phase::Idle, Input::Start) => match self.config.resume_from.take() {
                Some(rv) if !rv.is_empty() => {
                    self.last_sync_rv = rv;
                    self.resuming = true;
                    self.start_watch(None)
                }
                _ => self.begin_cycle(now),
            },
            (Phase::BackingOff(after), Input::Slept) => match after {
                After::Relist => self.begin_cycle(now),
                After::Rewatch => self.start_watch(None),
                After::Stream => self.start_stream(None),
            },
            (Phase::Listing(st), Input::Listed(res)) => self.on_listed(st, res, now),
            (Phase::Paging { st, next }, Input::StoreDone(res)) => {
                self.on_page_taken(st, next, res, now)
            }
            (Phase::Replacing { rv, from_stream }, Input::StoreDone(res)) => match res {
                Ok(()) => {
                    self.last_sync_rv = rv;
                    self.rv_unavailable = false;
                    self.resync_at = self
                        .config
                        .resync_period
                        .map(|p| kcache_core::saturating_add(now, p));
                    if from_stream {
                        self.read_watch(None)
                    } else {
                        self.start_watch(None)
                    }
                }
                Err(e) => self.fail_cycle(store_error(StoreOperation::Replace, e), now),
            },
            (Phase::OpeningWatch, Input::WatchOpened(res)) => match res {
                Err(e) if self.resuming && gone(&e) => {
                    self.resuming = false;
                    // The source said the version is gone: list its most recent state, not
                    // at that version (client-go's relist after Expired).
                    self.rv_unavailable = true;
                    self.start_list(Some(ReflectorError::WatchOpen(e)))
                }
                Ok(()) => {
                    self.opened(now);
                    self.read_watch(None)
                }
                Err(e) if e.kind() == ErrorKind::Retry => {
                    self.back_off(After::Rewatch, ReflectorError::WatchOpen(e), now)
                }
                Err(e) => self.fail_cycle(ReflectorError::WatchOpen(e), now),
            },
            (Phase::Watching, Input::Event(ev)) => {
                self.resuming = false;
                self.on_event(ev, now)
            }
            (Phase::Watching, Input::WatchClosed) => {
                let lived = self
                    .watch_opened_at
                    .map(|t| now.saturating_duration_since(t));
                if self.watch_events == 0 && lived.is_some_and(|d| d < VERY_SHORT_WATCH) {
                    self.short_watches = 0;
                    return self.fail_cycle(
                        ReflectorError::VeryShortWatch {
                            within: VERY_SHORT_WATCH,
                        },
                        now,
                    );
                }
                let within = VERY_SHORT_WATCH.min(self.config.min_watch_timeout);
                if lived.is_some_and(|d| d < within) {
                    self.short_watches += 1;
                } else {
                    self.short_watches = 0;
                }
                if self.short_watches >= SHORT_WATCH_RUN {
                    let count = std::mem::take(&mut self.short_watches);
                    self.back_off(
                        After::Rewatch,
                        ReflectorError::ShortWatches { count, within },
                        now,
                    )
                } else {
                    self.start_watch(None)
                }
            }
            (Phase::Watching, Input::WatchFailed(e)) if self.resuming && gone(&e) => {
                self.resuming = false;
                self.rv_unavailable = true;
                self.start_list(Some(ReflectorError::Watch(e)))
            }
            (Phase::Watching, Input::WatchFailed(e)) => {
                if e.kind() == ErrorKind::Retry {
                    self.back_off(After::Rewatch, ReflectorError::Watch(e), now)
                } else {
                    self.fail_cycle(ReflectorError::Watch(e), now)
                }
            }
            (Phase::Watching, Input::ResyncDue { allowed }) => {
                self.resync_at = self
                    .config
                    .resync_period
                    .map(|p| kcache_core::saturating_add(now, p));
                if allowed {
                    self.phase = Phase::Resyncing;
                    cmd(Command::Store(StoreCall::Resync))
                } else {
                    self.read_watch(None)
                }
            }
            (Phase::Applying { rv, operation }, Input::StoreDone(res)) => {
                if let Some(rv) = rv {
                    self.last_sync_rv = rv;
                }
                self.read_watch(res.err().map(|e| store_error(operation, e)))
            }
            (Phase::Resyncing, Input::StoreDone(res)) => match res {
                Ok(()) => self.read_watch(None),
                Err(e) => self.fail_cycle(store_error(StoreOperation::Resync, e), now),
            },
            (Phase::Streaming { requested, items }, input) => {
                self.on_stream_input(requested, items, input, now)
            }
            (
                Phase::StreamPaging {
                    requested,
                    items,
                    after,
                },
                Input::StoreDone(res),
            ) => self.on_stream_page_taken(requested, items, after, res, now),
            // Anything else is a driver bug; recover by relisting after a backoff.
            (_, _) => {
                let delay = self.backoff.next_delay(now, &mut self.rng);
                self.phase = Phase::BackingOff(After::Relist);
                cmd(Command::Sleep(kcache_core::saturating_add(now, delay)))
            }
        }
    }

    /// The start of a `ListAndWatch` cycle: a streaming list if enabled, else a list.
    fn begin_cycle<E, SE>(&mut self, _now: Instant) -> Out<T, E, SE> {
        self.resync_at = None;
        if self.config.streaming {
            self.start_stream(None)
        } else {
            self.start_list(None)
        }
    }

    /// client-go's `relistResourceVersion`: "" after Expired/TooLarge, "0" before the first
    /// sync, else the last synced version.
    fn relist_rv(&self) -> ResourceVersion {
        if self.rv_unavailable {
            ResourceVersion::default()
        } else if self.last_sync_rv.is_empty() {
            ResourceVersion::from("0")
        } else {
            self.last_sync_rv.clone()
        }
    }

    fn start_list<E, SE>(&mut self, report: Option<ReflectorError<E, SE>>) -> Out<T, E, SE> {
        let rv = self.relist_rv();
        let limit = self.list_limit(&rv);
        let opts = ListOptions {
            resource_version: rv.clone(),
            limit,
            ..ListOptions::default()
        };
        self.phase = Phase::Listing(ListState::new(rv, limit));
        Output {
            report,
            command: Command::List(opts),
        }
    }

    /// The page size of a list at `rv` (client-go's reflector with its pager): the user's if
    /// set (0: one request); else pages of [`DEFAULT_PAGE_SIZE`](crate::DEFAULT_PAGE_SIZE),
    /// except that a list at a known version (neither "" nor "0") goes unpaged so a watch cache
    /// can serve it, unless an RV "0" list came back paginated (no watch cache answered).
    pub(super) fn list_limit(&self, rv: &ResourceVersion) -> Option<u32> {
        match self.config.page_size {
            Some(0) => None,
            Some(n) => Some(n),
            None if self.paginated_result => Some(DEFAULT_PAGE_SIZE),
            None if !rv.is_empty() && rv.as_str() != "0" => None,
            None => Some(DEFAULT_PAGE_SIZE),
        }
    }

    fn watch_timeout(&mut self) -> Duration {
        let min = self.config.min_watch_timeout;
        let nanos = u64::try_from(min.as_nanos()).unwrap_or(u64::MAX);
        min.saturating_add(Duration::from_nanos(
            self.rng.below(nanos.saturating_add(1)),
        ))
    }

    fn start_watch<E, SE>(&mut self, report: Option<ReflectorError<E, SE>>) -> Out<T, E, SE> {
        self.phase = Phase::OpeningWatch;
        self.synthetic_adds = matches!(self.last_sync_rv.as_str(), "" | "0");
        let opts = WatchOptions {
            resource_version: self.last_sync_rv.clone(),
            timeout: Some(self.watch_timeout()),
            allow_bookmarks: true,
            send_initial_events: false,
        };
        Output {
            report,
            command: Command::Watch(opts),
        }
    }

    fn start_stream<E, SE>(&mut self, report: Option<ReflectorError<E, SE>>) -> Out<T, E, SE> {
        let requested = if self.rv_unavailable {
            ResourceVersion::default()
        } else {
            self.last_sync_rv.clone()
        };
        // The stream goes on as the watch after its end bookmark: past any synthetic event.
        self.synthetic_adds = false;
        let opts = WatchOptions {
            resource_version: requested.clone(),
            timeout: Some(self.watch_timeout()),
            allow_bookmarks: true,
            send_initial_events: true,
        };
        self.phase = Phase::Streaming {
            requested,
            items: InitialEvents::new(self.config.paged),
        };
        Output {
            report,
            command: Command::Watch(opts),
        }
    }

    fn opened(&mut self, now: Instant) {
        self.watch_opened_at = Some(now);
        self.watch_events = 0;
    }

    fn read_watch<E, SE>(&mut self, report: Option<ReflectorError<E, SE>>) -> Out<T, E, SE> {
        self.phase = Phase::Watching;
        Output {
            report,
            command: Command::ReadWatch {
                resync_at: self.resync_at,
            },
        }
    }

    fn on_event<E, SE>(&mut self, ev: WatchEvent<T>, now: Instant) -> Out<T, E, SE> {
        self.watch_events += 1;
        let (call, rv) = match ev {
            WatchEvent::Bookmark(b) => {
                if b.resource_version.is_empty() {
                    return self.fail_cycle(
                        ReflectorError::BadInput(BadInput::BookmarkWithoutResourceVersion),
                        now,
                    );
                }
                (
                    StoreCall::Bookmark(b.resource_version.clone()),
                    b.resource_version,
                )
            }
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)
                if self.key_error(&o).is_some() =>
            {
                // client-go skips an object it cannot read and goes on watching: ending the
                // watch would relist, and the relist would meet the same object again.
                let err = self
                    .key_error(&o)
                    .map_or(BadInput::EventWithoutResourceVersion, BadInput::ObjectKey);
                return self.read_watch(Some(ReflectorError::BadInput(err)));
            }
            // The version is read first, so the object moves on without a reference count.
            WatchEvent::Added(o) => {
                let rv = M::resource_version(&o);
                (StoreCall::Add(o), rv)
            }
            WatchEvent::Modified(o) => {
                let rv = M::resource_version(&o);
                (StoreCall::Update(o), rv)
            }
            WatchEvent::Deleted(o) => {
                let rv = M::resource_version(&o);
                (StoreCall::Delete(o), rv)
            }
        };
        if !matches!(call, StoreCall::Add(_)) {
            self.synthetic_adds = false;
        }
        let rv = if self.synthetic_adds {
            None
        } else if !rv.is_empty() {
            Some(rv)
        } else if self.last_sync_rv.is_empty() {
            // A source without versions (its list had none): apply, record nothing.
            None
        } else {
            return self.fail_cycle(
                ReflectorError::BadInput(BadInput::EventWithoutResourceVersion),
                now,
            );
        };
        self.phase = Phase::Applying {
            rv,
            operation: call.operation(),
        };
        cmd(Command::Store(call))
    }

    /// Reports `err`, backs off, then does `after`.
    fn back_off<E, SE>(
        &mut self,
        after: After,
        err: ReflectorError<E, SE>,
        now: Instant,
    ) -> Out<T, E, SE> {
        let delay = self.backoff.next_delay(now, &mut self.rng);
        self.phase = Phase::BackingOff(after);
        self.resync_at = if after == After::Relist {
            None
        } else {
            self.resync_at
        };
        Output {
            report: Some(err),
            command: Command::Sleep(kcache_core::saturating_add(now, delay)),
        }
    }

    /// Ends the `ListAndWatch` cycle: report, back off, relist.
    fn fail_cycle<E, SE>(&mut self, err: ReflectorError<E, SE>, now: Instant) -> Out<T, E, SE> {
        self.back_off(After::Relist, err, now)
    }
}

/// Whether `e` says the version asked for is not available (compacted away, or newer than the
/// source): a resumed watch then lists.
fn gone<E: BackendError>(e: &E) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Expired | ErrorKind::TooLargeResourceVersion
    )
}

pub(super) fn cmd<T, E, SE>(command: Command<T>) -> Output<T, E, SE> {
    Output {
        report: None,
        command,
    }
}

pub(super) fn store_error<E, SE>(operation: StoreOperation, source: SE) -> ReflectorError<E, SE> {
    ReflectorError::Store { operation, source }
}
