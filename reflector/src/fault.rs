//! [`FaultInjector`]: a [`ListWatcher`] wrapper that injects faults from a seeded schedule.

mod stream;

use crate::backoff::SplitMix64;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Arc, Mutex};
use crate::{
    BackendError, ErrorKind, ListOptions, ListPage, ListWatcher, WatchOptions, WatchStream,
};
use kcache_core::{Clock, ResourceVersion, SystemClock};
use std::fmt;
use std::future::Future;
use std::time::Duration;
use stream::{Cut, FaultyStream};

/// What a [`FaultInjector`] does, and how often. Every decision is drawn from a SplitMix64 generator
/// seeded with `seed`, in call order, so one seed replays one schedule (given the same sequence of
/// calls).
///
/// Probabilities are per call (`list_error`, `watch_error`, `cut_watch`, `instant_close`,
/// `delay`), per list answer (`endless_pages`, `empty_continue`) or per event (`duplicate`,
/// `unversioned_bookmark`, `cut_per_event`); `max_watch_lifetime` ends every watch within a
/// time window. The last two keep a long run faulty throughout: the per-call draws alone
/// decide nothing more once a watch that drew "no cut" stays open for good. [`FaultPlan::default`] injects nothing; [`FaultPlan::chaos`] is a
/// busy mix of a flaky network; [`FaultPlan::hostile`] adds a misbehaving server.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// The seed of the schedule.
    pub seed: u64,
    /// Probability that a list call fails with an injected error.
    pub list_error: f64,
    /// Probability that a watch call fails with an injected error.
    pub watch_error: f64,
    /// Probability that an opened watch is cut after a random number of events in
    /// `0..=max_events_before_cut`.
    pub cut_watch: f64,
    /// The most events a cut watch delivers.
    pub max_events_before_cut: u32,
    /// Probability that a cut ends with an injected error (else the stream closes cleanly).
    pub cut_with_error: f64,
    /// Probability that a watch event is delivered twice.
    pub duplicate: f64,
    /// Probability that a list or watch call waits (on the injector's clock) before answering.
    pub delay: f64,
    /// The longest such wait (each is uniform in `[0, max_delay]`).
    pub max_delay: Duration,
    /// The classes of injected errors, drawn uniformly (empty: [`ErrorKind::Retry`]).
    pub error_kinds: Vec<ErrorKind>,
    /// Probability that a list answer gets a made-up continue token; a request with such a
    /// token is answered by the injector itself, with an empty page and another made-up token,
    /// for as long as the injector is not healed (a server whose lists never end); once healed,
    /// such a token is answered as expired.
    pub endless_pages: f64,
    /// Probability that the last page of a list carries `Some("")` as its continue token
    /// instead of `None`.
    pub empty_continue: f64,
    /// Probability that an opened watch closes cleanly after at most one event (a misbehaving
    /// server or proxy).
    pub instant_close: f64,
    /// Probability that a bookmark without a resource version is slipped in before a watch event.
    pub unversioned_bookmark: f64,
    /// Probability that a watch is cut right after an event, whatever its own schedule (with an
    /// error with probability `cut_with_error`, else cleanly).
    pub cut_per_event: f64,
    /// Every watch ends (cleanly, as a server's watch timeout) after a time drawn uniformly in
    /// `[max/2, max]` on the injector's clock, so its successor draws its faults anew;
    /// `Duration::ZERO`: watches live as long as their schedule says.
    pub max_watch_lifetime: Duration,
}

impl Default for FaultPlan {
    fn default() -> Self {
        Self {
            seed: 0,
            list_error: 0.0,
            watch_error: 0.0,
            cut_watch: 0.0,
            max_events_before_cut: 0,
            cut_with_error: 0.0,
            duplicate: 0.0,
            delay: 0.0,
            max_delay: Duration::ZERO,
            error_kinds: Vec::new(),
            endless_pages: 0.0,
            empty_continue: 0.0,
            instant_close: 0.0,
            unversioned_bookmark: 0.0,
            cut_per_event: 0.0,
            max_watch_lifetime: Duration::ZERO,
        }
    }
}

impl FaultPlan {
    /// A busy mix of every fault, seeded with `seed`: a fifth of lists and watches fail, half of
    /// the watches are cut within 8 events (half of those with an error), any watch is cut after
    /// an event with probability 2 % and ends within 2 to 4 s anyway (so faults keep coming for
    /// as long as the run lasts), 5 % of events are duplicated, a tenth of calls wait up to 2 s;
    /// errors are Expired, Retry, TooLarge or Other.
    pub fn chaos(seed: u64) -> Self {
        Self {
            seed,
            list_error: 0.2,
            watch_error: 0.2,
            cut_watch: 0.5,
            max_events_before_cut: 8,
            cut_with_error: 0.5,
            duplicate: 0.05,
            delay: 0.1,
            max_delay: Duration::from_secs(2),
            cut_per_event: 0.02,
            max_watch_lifetime: Duration::from_secs(4),
            error_kinds: vec![
                ErrorKind::Expired,
                ErrorKind::Retry,
                ErrorKind::TooLargeResourceVersion,
                ErrorKind::Other,
            ],
            ..Self::default()
        }
    }

    /// [`chaos`](Self::chaos) plus a misbehaving server: a twentieth of lists never end (made-up
    /// continue tokens), a tenth end with an empty continue token, a tenth of watches close
    /// right after at most one event, and 2 % of events are preceded by a bookmark without a
    /// resource version. A reflector over it needs a small
    /// [`max_list_pages`](crate::ReflectorBuilder::max_list_pages) to stay quick.
    pub fn hostile(seed: u64) -> Self {
        Self {
            endless_pages: 0.05,
            empty_continue: 0.1,
            instant_close: 0.1,
            unversioned_bookmark: 0.02,
            ..Self::chaos(seed)
        }
    }
}

/// The prefix of the continue tokens an injector makes up ([`FaultPlan::endless_pages`]).
const ENDLESS_TOKEN: &str = "kcache-fault-endless:";

/// Where an injected fault struck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultSite {
    /// A list call.
    List,
    /// A watch call, before any event.
    WatchOpen,
    /// An open watch stream.
    WatchStream,
}

/// An error made up by a [`FaultInjector`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("injected {kind:?} fault during {site:?}")]
pub struct InjectedFault {
    /// The class the reflector sees.
    pub kind: ErrorKind,
    /// Where it struck.
    pub site: FaultSite,
}

/// The error of a [`FaultInjector`]: an injected fault or the wrapped backend's own error.
#[derive(Debug, thiserror::Error)]
pub enum FaultError<E> {
    /// A made-up error.
    #[error(transparent)]
    Injected(InjectedFault),
    /// The wrapped backend's error.
    #[error(transparent)]
    Backend(E),
}

impl<E: BackendError> BackendError for FaultError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Injected(f) => f.kind,
            Self::Backend(e) => e.kind(),
        }
    }
}

/// How many faults a [`FaultInjector`] has injected so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Failed list calls.
    pub list_errors: u64,
    /// Failed watch calls.
    pub watch_errors: u64,
    /// Watches cut cleanly.
    pub clean_cuts: u64,
    /// Watches cut with an error.
    pub error_cuts: u64,
    /// Duplicated events.
    pub duplicates: u64,
    /// Delayed calls.
    pub delays: u64,
    /// List pages answered with a made-up continue token.
    pub endless_pages: u64,
    /// Last list pages answered with `Some("")` as their continue token.
    pub empty_continues: u64,
    /// Watches closed cleanly after at most one event.
    pub instant_closes: u64,
    /// Bookmarks without a resource version slipped into watches.
    pub unversioned_bookmarks: u64,
    /// Watches ended by [`FaultPlan::max_watch_lifetime`].
    pub lifetime_cuts: u64,
}

pub(crate) struct FaultShared {
    plan: FaultPlan,
    rng: Mutex<SplitMix64>,
    healed: AtomicBool,
    stats: Mutex<FaultStats>,
}

impl FaultShared {
    pub(crate) fn healed(&self) -> bool {
        self.healed.load(Ordering::SeqCst)
    }

    fn error_kind(&self, rng: &mut SplitMix64) -> ErrorKind {
        let kinds = &self.plan.error_kinds;
        let i = usize::try_from(rng.below(kinds.len() as u64)).unwrap_or(0);
        kinds.get(i).copied().unwrap_or(ErrorKind::Retry)
    }

    /// Draws (delay, error) for one call.
    fn decide(&self, error_p: f64) -> (Option<Duration>, Option<ErrorKind>) {
        if self.healed() {
            return (None, None);
        }
        let mut rng = self.rng.lock();
        let delay = rng.chance(self.plan.delay).then(|| {
            let max = u64::try_from(self.plan.max_delay.as_nanos()).unwrap_or(u64::MAX);
            Duration::from_nanos(rng.below(max.saturating_add(1)))
        });
        let error = rng.chance(error_p).then(|| self.error_kind(&mut rng));
        (delay, error)
    }

    fn decide_cut(&self) -> Option<Cut> {
        if self.healed() {
            return None;
        }
        let mut rng = self.rng.lock();
        if rng.chance(self.plan.instant_close) {
            return Some(Cut {
                after: rng.below(2),
                error: None,
                instant: true,
            });
        }
        if !rng.chance(self.plan.cut_watch) {
            return None;
        }
        let after = rng.below(u64::from(self.plan.max_events_before_cut) + 1);
        let error = rng
            .chance(self.plan.cut_with_error)
            .then(|| self.error_kind(&mut rng));
        Some(Cut {
            after,
            error,
            instant: false,
        })
    }

    /// Draws whether to slip a bookmark without a version in before the next event.
    pub(crate) fn unversioned_bookmark(&self) -> bool {
        !self.healed() && self.rng.lock().chance(self.plan.unversioned_bookmark)
    }

    /// The continue token to put on a list answer whose own token is `token`.
    fn continue_token(&self, token: Option<String>) -> Option<String> {
        if self.healed() {
            return token;
        }
        let mut rng = self.rng.lock();
        if rng.chance(self.plan.endless_pages) {
            self.count(|s| s.endless_pages += 1);
            return Some(format!("{ENDLESS_TOKEN}{}", rng.next_u64()));
        }
        if token.is_none() && rng.chance(self.plan.empty_continue) {
            self.count(|s| s.empty_continues += 1);
            return Some(String::new());
        }
        token
    }

    pub(crate) fn duplicate(&self) -> bool {
        !self.healed() && self.rng.lock().chance(self.plan.duplicate)
    }

    /// Draws whether to cut a watch after the event just delivered, and with which error.
    pub(crate) fn cut_after_event(&self) -> Option<Option<ErrorKind>> {
        if self.healed() || self.plan.cut_per_event <= 0.0 {
            return None;
        }
        let mut rng = self.rng.lock();
        if !rng.chance(self.plan.cut_per_event) {
            return None;
        }
        Some(
            rng.chance(self.plan.cut_with_error)
                .then(|| self.error_kind(&mut rng)),
        )
    }

    /// Draws how long a new watch may live ([`FaultPlan::max_watch_lifetime`]).
    fn watch_lifetime(&self) -> Option<Duration> {
        let max = self.plan.max_watch_lifetime;
        if self.healed() || max.is_zero() {
            return None;
        }
        let half = u64::try_from(max.as_nanos() / 2).unwrap_or(u64::MAX / 2);
        let extra = self.rng.lock().below(half.saturating_add(1));
        Some(Duration::from_nanos(half.saturating_add(extra)))
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut FaultStats)) {
        f(&mut self.stats.lock());
    }
}

/// Wraps any [`ListWatcher`] and injects faults from a seeded [`FaultPlan`]: failed lists and
/// watches (Expired, Retry, TooLargeResourceVersion or Other), watches cut after N events (cleanly
/// or with an error), duplicated events, and delays on the injector's [`Clock`]; and a
/// misbehaving server's answers: lists that never end, empty continue tokens, watches that close
/// right after an event, bookmarks without a resource version. Call
/// [`FaultHandle::heal`] to stop injecting, then check that your controller converged.
///
/// # Examples
/// ```
/// use kcache_reflector::{FaultInjector, FaultPlan};
/// # struct Source;
/// let plan = FaultPlan { list_error: 0.5, ..FaultPlan::chaos(7) };
/// let faulty = FaultInjector::new(Source, plan);
/// let switch = faulty.handle();
/// // … run a reflector over `faulty`, mutate the source …
/// switch.heal();
/// assert!(switch.is_healed());
/// ```
pub struct FaultInjector<L> {
    inner: L,
    clock: Arc<dyn Clock>,
    shared: Arc<FaultShared>,
}

impl<L> FaultInjector<L> {
    /// Wraps `inner`; delays run on the [`SystemClock`].
    pub fn new(inner: L, plan: FaultPlan) -> Self {
        Self::with_clock(inner, plan, Arc::new(SystemClock))
    }

    /// Wraps `inner`; delays run on `clock`.
    pub fn with_clock(inner: L, plan: FaultPlan, clock: Arc<dyn Clock>) -> Self {
        let rng = Mutex::new(SplitMix64::new(plan.seed));
        let shared = FaultShared {
            plan,
            rng,
            healed: AtomicBool::new(false),
            stats: Mutex::new(FaultStats::default()),
        };
        Self {
            inner,
            clock,
            shared: Arc::new(shared),
        }
    }

    /// A handle to heal the injector and read its statistics (keep it: the injector itself
    /// usually moves into a reflector).
    pub fn handle(&self) -> FaultHandle {
        FaultHandle {
            shared: self.shared.clone(),
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<L> fmt::Debug for FaultInjector<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultInjector")
            .field("plan", &self.shared.plan)
            .finish_non_exhaustive()
    }
}

/// Controls a [`FaultInjector`] from outside: stop or resume injecting, read statistics.
#[derive(Clone)]
pub struct FaultHandle {
    shared: Arc<FaultShared>,
}

impl FaultHandle {
    /// Stops injecting: from now on every call and event passes through unchanged (a watch already
    /// scheduled to be cut is not cut).
    pub fn heal(&self) {
        self.shared.healed.store(true, Ordering::SeqCst);
    }

    /// Starts injecting again.
    pub fn resume(&self) {
        self.shared.healed.store(false, Ordering::SeqCst);
    }

    /// Whether the injector is healed.
    pub fn is_healed(&self) -> bool {
        self.shared.healed()
    }

    /// The faults injected so far.
    pub fn stats(&self) -> FaultStats {
        *self.shared.stats.lock()
    }
}

impl fmt::Debug for FaultHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultHandle")
            .field("healed", &self.is_healed())
            .field("stats", &self.stats())
            .finish()
    }
}

impl<T: Send + Sync + 'static, L: ListWatcher<T>> ListWatcher<T> for FaultInjector<L> {
    type Error = FaultError<L::Error>;

    fn list(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListPage<T>, Self::Error>> + Send {
        let (delay, error) = self.shared.decide(self.shared.plan.list_error);
        let made_up = opts
            .continue_token
            .as_deref()
            .is_some_and(|t| t.starts_with(ENDLESS_TOKEN));
        let inner = (error.is_none() && !made_up).then(|| self.inner.list(opts));
        async move {
            self.wait(delay).await;
            if made_up && error.is_none() {
                // The next page of a list that never ends: empty, with another made-up token,
                // until healed; then the token has expired, as a real one would.
                if self.shared.healed() {
                    return Err(FaultError::Injected(InjectedFault {
                        kind: ErrorKind::Expired,
                        site: FaultSite::List,
                    }));
                }
                self.shared.count(|s| s.endless_pages += 1);
                let token = format!("{ENDLESS_TOKEN}{}", self.shared.rng.lock().next_u64());
                return Ok(ListPage {
                    items: Vec::new(),
                    resource_version: ResourceVersion::default(),
                    continue_token: Some(token),
                });
            }
            match inner {
                Some(fut) => {
                    let mut page = fut.await.map_err(FaultError::Backend)?;
                    page.continue_token = self.shared.continue_token(page.continue_token.take());
                    Ok(page)
                }
                None => {
                    let kind = kind_or_retry(error);
                    self.shared.count(|s| s.list_errors += 1);
                    Err(FaultError::Injected(InjectedFault {
                        kind,
                        site: FaultSite::List,
                    }))
                }
            }
        }
    }

    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<T, Self::Error>, Self::Error>> + Send {
        let (delay, error) = self.shared.decide(self.shared.plan.watch_error);
        let cut = if error.is_none() {
            self.shared.decide_cut()
        } else {
            None
        };
        let lifetime = error
            .is_none()
            .then(|| self.shared.watch_lifetime())
            .flatten();
        let inner = error.is_none().then(|| self.inner.watch(opts));
        async move {
            self.wait(delay).await;
            match inner {
                Some(fut) => {
                    let stream = fut.await.map_err(FaultError::Backend)?;
                    let lifetime = lifetime.map(|d| self.clock.sleep_async(d));
                    let faulty = FaultyStream::new(stream, cut, lifetime, self.shared.clone());
                    Ok(Box::pin(faulty) as WatchStream<T, Self::Error>)
                }
                None => {
                    let kind = kind_or_retry(error);
                    self.shared.count(|s| s.watch_errors += 1);
                    Err(FaultError::Injected(InjectedFault {
                        kind,
                        site: FaultSite::WatchOpen,
                    }))
                }
            }
        }
    }

    /// The wrapped source's answer, without faults (a read of one number, not a list).
    fn current_resource_version(
        &self,
    ) -> impl Future<Output = Result<Option<ResourceVersion>, Self::Error>> + Send {
        let inner = self.inner.current_resource_version();
        async move { inner.await.map_err(FaultError::Backend) }
    }

    /// The wrapped source's answer: faults are injected into its streams as into its watches.
    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}

fn kind_or_retry(kind: Option<ErrorKind>) -> ErrorKind {
    kind.unwrap_or(ErrorKind::Retry)
}

impl<L> FaultInjector<L> {
    async fn wait(&self, delay: Option<Duration>) {
        if let Some(d) = delay {
            self.shared.count(|s| s.delays += 1);
            self.clock.sleep_async(d).await;
        }
    }
}
