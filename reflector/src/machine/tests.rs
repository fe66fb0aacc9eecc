//! Unit tests of the pure state machine: one test per rule of client-go's reflector protocol.

use super::*;
use kcache_core::{Object, ObjectAccessor};

#[derive(Debug)]
pub(super) struct Obj {
    name: String,
    rv: String,
}

impl Object for Obj {
    fn namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::from(self.rv.as_str())
    }
}

fn obj(name: &str, rv: u64) -> Arc<Obj> {
    Arc::new(Obj {
        name: name.into(),
        rv: rv.to_string(),
    })
}

#[derive(Debug, thiserror::Error)]
#[error("backend {0:?}")]
pub(super) struct Be(ErrorKind);

impl BackendError for Be {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

#[derive(Debug, thiserror::Error)]
#[error("store failed")]
pub(super) struct Se;

type O = Output<Obj, Be, Se>;
type I = Input<Obj, Be, Se>;

struct H {
    m: Machine<Obj, ObjectAccessor>,
    now: Instant,
}

fn config() -> Config {
    Config {
        page_size: None,
        min_watch_timeout: Duration::from_secs(300),
        resync_period: None,
        streaming: false,
        backoff: BackoffConfig::default(),
        seed: Some(1),
        limits: ListLimits::default(),
        paged: false,
        resume_from: None,
    }
}

impl H {
    fn new(cfg: Config) -> Self {
        let now = kcache_core::Clock::now(&kcache_core::FakeClock::new());
        Self {
            m: Machine::new(cfg),
            now,
        }
    }
    fn step(&mut self, input: I) -> O {
        self.m.step(input, self.now)
    }
    fn rv(&self) -> &str {
        self.m.last_sync_resource_version().as_str()
    }
    /// Start, list (one page at `rv`), replace OK: returns the watch command's options.
    fn synced(&mut self, rv: &str) -> WatchOptions {
        list_opts(&self.step(Input::Start));
        let out = self.step(Input::Listed(Ok(page(vec![obj("a", 1)], rv, None))));
        assert!(matches!(
            out.command,
            Command::Store(StoreCall::Replace(..))
        ));
        watch_opts(&self.step(Input::StoreDone(Ok(()))))
    }
    /// Synced and watching.
    fn watching(&mut self, rv: &str) {
        self.synced(rv);
        assert!(is_read(&self.step(Input::WatchOpened(Ok(())))));
    }
}

fn page(items: Vec<Arc<Obj>>, rv: &str, next: Option<&str>) -> ListPage<Obj> {
    ListPage {
        items,
        resource_version: rv.into(),
        continue_token: next.map(str::to_owned),
    }
}

fn list_opts(out: &O) -> ListOptions {
    match &out.command {
        Command::List(o) => o.clone(),
        _ => panic!("expected a list"),
    }
}

fn watch_opts(out: &O) -> WatchOptions {
    match &out.command {
        Command::Watch(o) => o.clone(),
        _ => panic!("expected a watch"),
    }
}

fn sleep_for(h: &H, out: &O) -> Duration {
    match out.command {
        Command::Sleep(t) => t - h.now,
        _ => panic!("expected a sleep"),
    }
}

fn is_read(out: &O) -> bool {
    matches!(out.command, Command::ReadWatch { .. })
}

fn err(kind: ErrorKind) -> Be {
    Be(kind)
}

#[test]
fn the_first_list_asks_for_resource_version_zero_in_pages_of_500() {
    let mut h = H::new(config());
    let opts = list_opts(&h.step(Input::Start));
    assert_eq!(opts.resource_version.as_str(), "0");
    assert_eq!(opts.limit, Some(500));
    assert_eq!(opts.continue_token, None);
}

#[test]
fn a_list_replaces_the_store_then_watches_from_its_version_with_bookmarks() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let out = h.step(Input::Listed(Ok(page(
        vec![obj("a", 3), obj("b", 4)],
        "10",
        None,
    ))));
    match out.command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            assert_eq!(items.len(), 2);
            assert_eq!(rv.as_str(), "10");
        }
        _ => panic!("expected a replace"),
    }
    assert_eq!(
        h.rv(),
        "",
        "the version is recorded only once the store took the list"
    );
    let w = watch_opts(&h.step(Input::StoreDone(Ok(()))));
    assert_eq!(h.rv(), "10");
    assert_eq!(w.resource_version.as_str(), "10");
    assert!(w.allow_bookmarks && !w.send_initial_events);
    let t = w.timeout.unwrap_or_default();
    assert!(
        t >= Duration::from_secs(300) && t <= Duration::from_secs(600),
        "{t:?}"
    );
}

#[test]
fn watch_timeouts_are_randomized_between_min_and_twice_min() {
    let mut h = H::new(config());
    h.watching("5");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        h.step(Input::Event(WatchEvent::Added(obj("x", 6))));
        h.step(Input::StoreDone(Ok(())));
        // Each watch lives a while (a run of short ones would back off).
        h.now += Duration::from_secs(2);
        let w = watch_opts(&h.step(Input::WatchClosed));
        let t = w.timeout.unwrap_or_default();
        assert!((Duration::from_secs(300)..=Duration::from_secs(600)).contains(&t));
        seen.insert(t);
        h.step(Input::WatchOpened(Ok(())));
    }
    assert!(seen.len() > 10, "timeouts should vary: {seen:?}");
}

#[test]
fn a_relist_after_a_watch_error_uses_the_last_synced_version() {
    let mut h = H::new(config());
    h.watching("5");
    h.step(Input::Event(WatchEvent::Modified(obj("a", 7))));
    h.step(Input::StoreDone(Ok(())));
    let out = h.step(Input::WatchFailed(err(ErrorKind::Other)));
    assert!(matches!(out.report, Some(ReflectorError::Watch(_))));
    sleep_for(&h, &out);
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "7"
    );
}

#[test]
fn an_expired_list_is_retried_at_once_from_the_empty_version() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let out = h.step(Input::Listed(Err(err(ErrorKind::Expired))));
    assert!(matches!(out.report, Some(ReflectorError::List(_))));
    assert_eq!(list_opts(&out).resource_version.as_str(), "");
}

#[test]
fn a_too_large_version_list_is_retried_at_once_from_the_empty_version() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let out = h.step(Input::Listed(Err(err(ErrorKind::TooLargeResourceVersion))));
    assert_eq!(list_opts(&out).resource_version.as_str(), "");
}

#[test]
fn a_second_expired_list_backs_off_and_the_next_cycle_lists_from_empty_until_a_list_succeeds() {
    let mut h = H::new(config());
    h.watching("5");
    let out = h.step(Input::WatchFailed(err(ErrorKind::Expired)));
    sleep_for(&h, &out);
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "5"
    );
    let out = h.step(Input::Listed(Err(err(ErrorKind::Expired))));
    assert_eq!(list_opts(&out).resource_version.as_str(), "");
    let out = h.step(Input::Listed(Err(err(ErrorKind::Expired))));
    sleep_for(&h, &out);
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        ""
    );
    h.step(Input::Listed(Ok(page(vec![], "20", None))));
    h.step(Input::StoreDone(Ok(())));
    h.step(Input::WatchOpened(Ok(())));
    h.step(Input::Event(WatchEvent::Added(obj("n", 21))));
    h.step(Input::StoreDone(Ok(())));
    let out = h.step(Input::WatchFailed(err(ErrorKind::Other)));
    sleep_for(&h, &out);
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "21"
    );
}

#[test]
fn a_clean_close_rewatches_from_the_last_version_without_relisting() {
    let mut h = H::new(config());
    h.watching("5");
    h.step(Input::Event(WatchEvent::Added(obj("b", 6))));
    h.step(Input::StoreDone(Ok(())));
    let out = h.step(Input::WatchClosed);
    assert!(out.report.is_none());
    assert_eq!(watch_opts(&out).resource_version.as_str(), "6");
}

#[test]
fn a_watch_that_closes_at_once_without_events_is_very_short_and_relists_after_backoff() {
    let mut h = H::new(config());
    h.watching("5");
    let out = h.step(Input::WatchClosed);
    assert!(matches!(
        out.report,
        Some(ReflectorError::VeryShortWatch { .. })
    ));
    sleep_for(&h, &out);
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "5"
    );
}

#[test]
fn an_empty_watch_that_lasted_a_second_rewatches() {
    let mut h = H::new(config());
    h.watching("5");
    h.now += Duration::from_secs(1);
    assert_eq!(
        watch_opts(&h.step(Input::WatchClosed))
            .resource_version
            .as_str(),
        "5"
    );
}

#[test]
fn a_retry_error_opening_the_watch_backs_off_and_rewatches_without_relisting() {
    let mut h = H::new(config());
    h.synced("5");
    let out = h.step(Input::WatchOpened(Err(err(ErrorKind::Retry))));
    assert!(matches!(out.report, Some(ReflectorError::WatchOpen(_))));
    let d = sleep_for(&h, &out);
    assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1600));
    assert_eq!(
        watch_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "5"
    );
}

#[test]
fn a_retry_error_during_the_watch_backs_off_and_rewatches_without_relisting() {
    let mut h = H::new(config());
    h.watching("5");
    let out = h.step(Input::WatchFailed(err(ErrorKind::Retry)));
    sleep_for(&h, &out);
    assert_eq!(
        watch_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "5"
    );
}

#[test]
fn other_errors_opening_the_watch_back_off_and_relist() {
    for kind in [
        ErrorKind::Other,
        ErrorKind::Expired,
        ErrorKind::TooLargeResourceVersion,
    ] {
        let mut h = H::new(config());
        h.synced("5");
        let out = h.step(Input::WatchOpened(Err(err(kind))));
        sleep_for(&h, &out);
        assert_eq!(
            list_opts(&h.step(Input::Slept)).resource_version.as_str(),
            "5",
            "{kind:?}"
        );
    }
}

#[test]
fn events_go_to_the_store_and_each_records_its_version() {
    let mut h = H::new(config());
    h.watching("5");
    let cases: Vec<(WatchEvent<Obj>, StoreOperation, &str)> = vec![
        (WatchEvent::Added(obj("b", 6)), StoreOperation::Add, "6"),
        (
            WatchEvent::Modified(obj("b", 7)),
            StoreOperation::Update,
            "7",
        ),
        (
            WatchEvent::Deleted(obj("b", 8)),
            StoreOperation::Delete,
            "8",
        ),
    ];
    for (ev, op, rv) in cases {
        match h.step(Input::Event(ev)).command {
            Command::Store(call) => assert_eq!(call.operation(), op),
            _ => panic!("expected a store call"),
        }
        assert!(is_read(&h.step(Input::StoreDone(Ok(())))));
        assert_eq!(h.rv(), rv);
    }
}

#[test]
fn a_bookmark_goes_to_the_store_and_records_its_version() {
    let mut h = H::new(config());
    h.watching("5");
    let b = crate::Bookmark {
        resource_version: "40".into(),
        initial_events_end: false,
    };
    match h.step(Input::Event(WatchEvent::Bookmark(b))).command {
        Command::Store(StoreCall::Bookmark(rv)) => assert_eq!(rv.as_str(), "40"),
        _ => panic!("expected store.bookmark"),
    }
    h.step(Input::StoreDone(Ok(())));
    assert_eq!(h.rv(), "40");
}

#[test]
fn a_store_error_on_an_event_is_reported_and_the_watch_goes_on() {
    let mut h = H::new(config());
    h.watching("5");
    h.step(Input::Event(WatchEvent::Added(obj("b", 6))));
    let out = h.step(Input::StoreDone(Err(Se)));
    assert!(matches!(
        out.report,
        Some(ReflectorError::Store {
            operation: StoreOperation::Add,
            ..
        })
    ));
    assert!(is_read(&out));
    assert_eq!(h.rv(), "6");
}

#[test]
fn a_failed_replace_keeps_the_old_version_backs_off_and_relists() {
    let mut h = H::new(config());
    h.step(Input::Start);
    h.step(Input::Listed(Ok(page(vec![], "9", None))));
    let out = h.step(Input::StoreDone(Err(Se)));
    assert!(matches!(
        out.report,
        Some(ReflectorError::Store {
            operation: StoreOperation::Replace,
            ..
        })
    ));
    sleep_for(&h, &out);
    assert_eq!(h.rv(), "");
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "0"
    );
}

#[test]
fn pages_are_followed_by_continue_token_and_replaced_once_at_the_first_page_version() {
    let mut h = H::new(Config {
        page_size: Some(2),
        ..config()
    });
    let first = list_opts(&h.step(Input::Start));
    assert_eq!(first.limit, Some(2));
    let out = h.step(Input::Listed(Ok(page(
        vec![obj("a", 1), obj("b", 2)],
        "30",
        Some("t1"),
    ))));
    let next = list_opts(&out);
    assert_eq!(next.continue_token.as_deref(), Some("t1"));
    assert_eq!(next.limit, Some(2));
    assert!(
        next.resource_version.is_empty(),
        "a continue request carries no version"
    );
    let out = h.step(Input::Listed(Ok(page(vec![obj("c", 3)], "30", None))));
    match out.command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            let names: Vec<&str> = items.iter().map(|o| o.name.as_str()).collect();
            assert_eq!(names, ["a", "b", "c"]);
            assert_eq!(rv.as_str(), "30");
        }
        _ => panic!("expected one replace"),
    }
}

#[test]
fn an_expired_continue_token_falls_back_to_one_full_unpaged_list() {
    let mut h = H::new(Config {
        page_size: Some(2),
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::Listed(Ok(page(
        vec![obj("a", 1), obj("b", 2)],
        "30",
        Some("t1"),
    ))));
    let full = list_opts(&h.step(Input::Listed(Err(err(ErrorKind::Expired)))));
    assert_eq!(
        full,
        ListOptions {
            resource_version: "0".into(),
            ..ListOptions::default()
        },
        "no limit, no continue, the version the list asked for"
    );
    let out = h.step(Input::Listed(Ok(page(
        vec![obj("a", 1), obj("c", 9)],
        "44",
        None,
    ))));
    match out.command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            assert_eq!(items.len(), 2, "the first page is not kept");
            assert_eq!(rv.as_str(), "44");
        }
        _ => panic!("expected a replace"),
    }
}

#[test]
fn a_zero_page_size_lists_without_a_limit() {
    let mut h = H::new(Config {
        page_size: Some(0),
        ..config()
    });
    assert_eq!(list_opts(&h.step(Input::Start)).limit, None);
}

#[test]
fn resync_ticks_call_store_resync_when_should_resync_allows() {
    let period = Duration::from_secs(30);
    let mut h = H::new(Config {
        resync_period: Some(period),
        ..config()
    });
    h.synced("5");
    let out = h.step(Input::WatchOpened(Ok(())));
    let first = match out.command {
        Command::ReadWatch { resync_at } => resync_at,
        _ => panic!("expected to read the watch"),
    };
    assert_eq!(first, Some(h.now + period));
    h.now += period;
    assert!(matches!(
        h.step(Input::ResyncDue { allowed: true }).command,
        Command::Store(StoreCall::Resync)
    ));
    match h.step(Input::StoreDone(Ok(()))).command {
        Command::ReadWatch { resync_at } => assert_eq!(resync_at, Some(h.now + period)),
        _ => panic!("expected to read the watch"),
    }
    h.now += period;
    match h.step(Input::ResyncDue { allowed: false }).command {
        Command::ReadWatch { resync_at } => assert_eq!(resync_at, Some(h.now + period)),
        _ => panic!("a refused resync calls no store"),
    }
}

#[test]
fn a_failed_resync_ends_the_watch_and_relists() {
    let mut h = H::new(Config {
        resync_period: Some(Duration::from_secs(1)),
        ..config()
    });
    h.watching("5");
    h.step(Input::ResyncDue { allowed: true });
    let out = h.step(Input::StoreDone(Err(Se)));
    assert!(matches!(
        out.report,
        Some(ReflectorError::Store {
            operation: StoreOperation::Resync,
            ..
        })
    ));
    sleep_for(&h, &out);
    assert_eq!(
        list_opts(&h.step(Input::Slept)).resource_version.as_str(),
        "5"
    );
}

#[test]
fn no_resync_deadline_without_a_period() {
    let mut h = H::new(config());
    h.synced("5");
    match h.step(Input::WatchOpened(Ok(()))).command {
        Command::ReadWatch { resync_at } => assert_eq!(resync_at, None),
        _ => panic!("expected to read the watch"),
    }
}

#[test]
fn consecutive_failures_back_off_800ms_doubling_to_the_30s_cap_with_jitter() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let mut bases = vec![800u64, 1600, 3200, 6400, 12800, 25600];
    bases.extend([30_000; 4]);
    for base in bases {
        let out = h.step(Input::Listed(Err(err(ErrorKind::Other))));
        let d = sleep_for(&h, &out);
        let lo = Duration::from_millis(base);
        assert!(d >= lo && d < 2 * lo, "{d:?} not in [{lo:?}, 2x)");
        h.now += d;
        list_opts(&h.step(Input::Slept));
    }
}

#[test]
fn two_healthy_minutes_reset_the_backoff_to_800ms() {
    let mut h = H::new(config());
    h.step(Input::Start);
    for _ in 0..4 {
        let out = h.step(Input::Listed(Err(err(ErrorKind::Other))));
        h.now += sleep_for(&h, &out);
        h.step(Input::Slept);
    }
    h.step(Input::Listed(Ok(page(vec![], "5", None))));
    h.step(Input::StoreDone(Ok(())));
    h.step(Input::WatchOpened(Ok(())));
    h.now += Duration::from_secs(120);
    let out = h.step(Input::WatchFailed(err(ErrorKind::Other)));
    let d = sleep_for(&h, &out);
    assert!(d < Duration::from_millis(1600), "{d:?}");
}

#[test]
fn a_streaming_list_collects_added_events_and_replaces_the_store_once() {
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    let w = watch_opts(&h.step(Input::Start));
    assert!(w.send_initial_events && w.allow_bookmarks);
    assert_eq!(
        w.resource_version.as_str(),
        "",
        "a fresh reflector streams a consistent snapshot"
    );
    assert!(is_read(&h.step(Input::WatchOpened(Ok(())))));
    for (n, rv) in [("a", 3), ("b", 4)] {
        assert!(is_read(
            &h.step(Input::Event(WatchEvent::Added(obj(n, rv))))
        ));
    }
    let progress = crate::Bookmark {
        resource_version: "4".into(),
        initial_events_end: false,
    };
    assert!(is_read(
        &h.step(Input::Event(WatchEvent::Bookmark(progress)))
    ));
    assert_eq!(h.rv(), "", "nothing is recorded before the end bookmark");
    let end = crate::Bookmark {
        resource_version: "9".into(),
        initial_events_end: true,
    };
    match h.step(Input::Event(WatchEvent::Bookmark(end))).command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            assert_eq!(items.len(), 2);
            assert_eq!(rv.as_str(), "9");
        }
        _ => panic!("expected one replace"),
    }
    assert!(
        is_read(&h.step(Input::StoreDone(Ok(())))),
        "the same stream goes on as the watch"
    );
    assert_eq!(h.rv(), "9");
    assert!(matches!(
        h.step(Input::Event(WatchEvent::Modified(obj("a", 10))))
            .command,
        Command::Store(StoreCall::Update(_))
    ));
    h.step(Input::StoreDone(Ok(())));
    let w = watch_opts(&h.step(Input::WatchClosed));
    assert!(
        !w.send_initial_events,
        "after the initial list, a close re-watches plainly"
    );
    assert_eq!(w.resource_version.as_str(), "10");
}

/// client-go's watch-list applies every initial event to a temporary store (Modified and Deleted
/// too), replaces the store once at the end bookmark, and records only that bookmark's version.
#[test]
fn watch_list_applies_modified_and_deleted_initial_events_to_the_temporary_store() {
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    let events = [
        WatchEvent::Added(obj("a", 3)),
        WatchEvent::Added(obj("b", 4)),
        WatchEvent::Added(obj("c", 5)),
        WatchEvent::Modified(obj("a", 6)),
        WatchEvent::Deleted(obj("b", 7)),
        WatchEvent::Added(obj("d", 8)),
        WatchEvent::Modified(obj("e", 9)),
        WatchEvent::Bookmark(crate::Bookmark {
            resource_version: "9".into(),
            initial_events_end: false,
        }),
    ];
    for ev in events {
        let out = h.step(Input::Event(ev));
        assert!(out.report.is_none());
        assert!(is_read(&out));
        assert_eq!(h.rv(), "", "nothing recorded before the end bookmark");
    }
    let end = crate::Bookmark {
        resource_version: "10".into(),
        initial_events_end: true,
    };
    match h.step(Input::Event(WatchEvent::Bookmark(end))).command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            let mut got: Vec<(String, String)> = items
                .iter()
                .map(|o| (o.name.clone(), o.rv.clone()))
                .collect();
            got.sort();
            let want = [("a", "6"), ("c", "5"), ("d", "8"), ("e", "9")]
                .map(|(n, v)| (n.to_owned(), v.to_owned()));
            assert_eq!(got, want);
            assert_eq!(rv.as_str(), "10");
        }
        _ => panic!("expected the replace"),
    }
    assert!(is_read(&h.step(Input::StoreDone(Ok(())))));
    assert_eq!(h.rv(), "10");
}

#[test]
fn a_key_repeated_by_the_initial_events_is_replaced_once_with_its_last_object() {
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    for ev in [
        WatchEvent::Added(obj("a", 3)),
        WatchEvent::Added(obj("b", 4)),
        WatchEvent::Added(obj("a", 5)),
    ] {
        assert!(is_read(&h.step(Input::Event(ev))));
    }
    let end = crate::Bookmark {
        resource_version: "5".into(),
        initial_events_end: true,
    };
    match h.step(Input::Event(WatchEvent::Bookmark(end))).command {
        Command::Store(StoreCall::Replace(items, _)) => {
            let got: Vec<(&str, &str)> = items
                .iter()
                .map(|o| (o.name.as_str(), o.rv.as_str()))
                .collect();
            assert_eq!(got, [("a", "5"), ("b", "4")]);
        }
        _ => panic!("expected the replace"),
    }
}

/// What a paged store is asked for: `page <first> <names>`, `delete <name>`, `finish <rv>`.
fn paged_call(out: &O) -> String {
    match &out.command {
        Command::Store(StoreCall::ListPage { items, first }) => {
            let names: Vec<&str> = items.iter().map(|o| o.name.as_str()).collect();
            format!("page {first} {}", names.len())
        }
        Command::Store(StoreCall::ListDelete(o)) => format!("delete {}", o.name),
        Command::Store(StoreCall::FinishList(rv)) => format!("finish {rv}"),
        Command::ReadWatch { .. } => "read".into(),
        _ => "other".into(),
    }
}

#[test]
fn a_paged_store_gets_the_initial_events_in_pages_as_they_arrive_then_the_finish() {
    let mut h = H::new(Config {
        streaming: true,
        paged: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    let page = crate::DEFAULT_PAGE_SIZE as usize;
    let mut calls = Vec::new();
    for i in 0..page + 2 {
        let out = h.step(Input::Event(WatchEvent::Added(obj(&format!("o{i}"), 1))));
        let call = paged_call(&out);
        if call != "read" {
            calls.push(call);
            assert_eq!(paged_call(&h.step(Input::StoreDone(Ok(())))), "read");
        }
    }
    assert_eq!(
        calls,
        [format!("page true {page}")],
        "a full page goes at once"
    );
    // A delete goes after the page it follows, then the stream is read on.
    let out = h.step(Input::Event(WatchEvent::Deleted(obj("o0", 2))));
    assert_eq!(paged_call(&out), "page false 2");
    assert_eq!(paged_call(&h.step(Input::StoreDone(Ok(())))), "delete o0");
    assert_eq!(paged_call(&h.step(Input::StoreDone(Ok(())))), "read");
    assert!(is_read(
        &h.step(Input::Event(WatchEvent::Added(obj("o1", 3))))
    ));
    let end = crate::Bookmark {
        resource_version: "9".into(),
        initial_events_end: true,
    };
    let out = h.step(Input::Event(WatchEvent::Bookmark(end)));
    assert_eq!(paged_call(&out), "page false 1");
    assert_eq!(paged_call(&h.step(Input::StoreDone(Ok(())))), "finish 9");
    assert_eq!(h.rv(), "", "recorded once the store finished the list");
    assert!(is_read(&h.step(Input::StoreDone(Ok(())))));
    assert_eq!(h.rv(), "9");
}

#[test]
fn an_empty_paged_stream_still_starts_its_list_before_the_finish() {
    let mut h = H::new(Config {
        streaming: true,
        paged: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    let end = crate::Bookmark {
        resource_version: "4".into(),
        initial_events_end: true,
    };
    let out = h.step(Input::Event(WatchEvent::Bookmark(end)));
    assert_eq!(
        paged_call(&out),
        "page true 0",
        "an earlier attempt's pages must not be finished by this one"
    );
    assert_eq!(paged_call(&h.step(Input::StoreDone(Ok(())))), "finish 4");
}

#[test]
fn streaming_errors_retry_reset_or_fall_back_by_class() {
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    h.step(Input::Start);
    let out = h.step(Input::WatchOpened(Err(err(ErrorKind::Retry))));
    sleep_for(&h, &out);
    assert!(watch_opts(&h.step(Input::Slept)).send_initial_events);
    let out = h.step(Input::WatchOpened(Err(err(ErrorKind::Other))));
    assert!(matches!(out.report, Some(ReflectorError::WatchOpen(_))));
    list_opts(&out);

    // With a last synced version: Expired streams again from "" at once.
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    let _ = watch_opts(&h.step(Input::Start));
    h.step(Input::WatchOpened(Ok(())));
    let end = crate::Bookmark {
        resource_version: "9".into(),
        initial_events_end: true,
    };
    h.step(Input::Event(WatchEvent::Bookmark(end)));
    h.step(Input::StoreDone(Ok(())));
    let out = h.step(Input::WatchFailed(err(ErrorKind::Other)));
    h.now += sleep_for(&h, &out);
    let w = watch_opts(&h.step(Input::Slept));
    assert!(w.send_initial_events);
    assert_eq!(w.resource_version.as_str(), "9");
    let w = watch_opts(&h.step(Input::WatchOpened(Err(err(ErrorKind::Expired)))));
    assert!(w.send_initial_events);
    assert_eq!(w.resource_version.as_str(), "");
    let out = h.step(Input::WatchOpened(Err(err(ErrorKind::Expired))));
    assert_eq!(
        list_opts(&out).resource_version.as_str(),
        "",
        "expired again: list from \"\""
    );
}

/// client-go's watch-list loops: a stream that closes before its end bookmark starts a new
/// watch-list from the same version ("" at first); only a very short one (no event within a
/// second) falls back to a list.
#[test]
fn watch_list_closed_before_the_end_bookmark_starts_a_new_watch_list() {
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    h.step(Input::Event(WatchEvent::Added(obj("a", 3))));
    let out = h.step(Input::WatchClosed);
    assert!(matches!(
        out.report,
        Some(ReflectorError::InitialEventsIncomplete)
    ));
    let w = watch_opts(&out);
    assert!(w.send_initial_events);
    assert_eq!(w.resource_version.as_str(), "");
    // The new stream starts empty: its own initial events make the store.
    h.step(Input::WatchOpened(Ok(())));
    h.step(Input::Event(WatchEvent::Added(obj("b", 4))));
    let end = crate::Bookmark {
        resource_version: "5".into(),
        initial_events_end: true,
    };
    match h.step(Input::Event(WatchEvent::Bookmark(end))).command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            assert_eq!(items.len(), 1);
            assert_eq!(items[0].name, "b");
            assert_eq!(rv.as_str(), "5");
        }
        _ => panic!("expected the replace"),
    }

    // No event within a second: a very short watch, and a list follows.
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    let out = h.step(Input::WatchClosed);
    assert!(matches!(
        out.report,
        Some(ReflectorError::VeryShortWatch { .. })
    ));
    assert_eq!(list_opts(&out).resource_version.as_str(), "0");
}

/// client-go accepts a list without a resource version: the store is replaced, and the watch
/// starts from "" (a source without versions, such as a plain REST or SQL source, works).
#[test]
fn list_without_resource_version_is_accepted_and_watched_from_empty() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let out = h.step(Input::Listed(Ok(page(vec![obj("a", 1)], "", None))));
    assert!(out.report.is_none());
    match out.command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            assert_eq!(items.len(), 1);
            assert!(rv.is_empty());
        }
        _ => panic!("expected a replace"),
    }
    let w = watch_opts(&h.step(Input::StoreDone(Ok(()))));
    assert_eq!(w.resource_version.as_str(), "");
    assert!(is_read(&h.step(Input::WatchOpened(Ok(())))));
    // Its events carry no version either: applied, nothing recorded, the watch goes on.
    let versionless = Arc::new(Obj {
        name: "b".into(),
        rv: String::new(),
    });
    let out = h.step(Input::Event(WatchEvent::Modified(versionless)));
    assert!(matches!(out.command, Command::Store(StoreCall::Update(_))));
    let out = h.step(Input::StoreDone(Ok(())));
    assert!(out.report.is_none() && is_read(&out));
    assert_eq!(h.rv(), "");
}

#[test]
fn objects_without_a_readable_key_are_bad_input_in_lists() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let out = h.step(Input::Listed(Ok(page(vec![obj("", 1)], "3", None))));
    assert!(matches!(
        out.report,
        Some(ReflectorError::BadInput(BadInput::ObjectKey(_)))
    ));
}

/// client-go's watch handler skips an event whose object it cannot read (`continue`) and keeps
/// watching; the version is not recorded.
#[test]
fn unreadable_watch_object_is_skipped_and_the_watch_goes_on() {
    let mut h = H::new(config());
    h.watching("5");
    let out = h.step(Input::Event(WatchEvent::Deleted(obj("", 6))));
    assert!(matches!(
        out.report,
        Some(ReflectorError::BadInput(BadInput::ObjectKey(_)))
    ));
    assert!(is_read(&out), "the watch goes on");
    assert_eq!(h.rv(), "5");
    let out = h.step(Input::Event(WatchEvent::Modified(obj("b", 7))));
    assert!(matches!(out.command, Command::Store(StoreCall::Update(_))));
    h.step(Input::StoreDone(Ok(())));
    assert_eq!(h.rv(), "7");

    // The same during a streaming list's initial events.
    let mut h = H::new(Config {
        streaming: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::WatchOpened(Ok(())));
    let out = h.step(Input::Event(WatchEvent::Added(obj("", 3))));
    assert!(matches!(
        out.report,
        Some(ReflectorError::BadInput(BadInput::ObjectKey(_)))
    ));
    assert!(is_read(&out));
    h.step(Input::Event(WatchEvent::Added(obj("a", 4))));
    let end = crate::Bookmark {
        resource_version: "9".into(),
        initial_events_end: true,
    };
    match h.step(Input::Event(WatchEvent::Bookmark(end))).command {
        Command::Store(StoreCall::Replace(items, rv)) => {
            assert_eq!(items.len(), 1);
            assert_eq!(rv.as_str(), "9");
        }
        _ => panic!("expected the replace"),
    }
}

#[test]
fn events_and_bookmarks_without_a_version_are_bad_input() {
    let mut h = H::new(config());
    h.watching("5");
    let out = h.step(Input::Event(WatchEvent::Added(Arc::new(Obj {
        name: "a".into(),
        rv: String::new(),
    }))));
    assert!(matches!(
        out.report,
        Some(ReflectorError::BadInput(
            BadInput::EventWithoutResourceVersion
        ))
    ));
    let mut h = H::new(config());
    h.watching("5");
    let b = crate::Bookmark {
        resource_version: ResourceVersion::default(),
        initial_events_end: false,
    };
    let out = h.step(Input::Event(WatchEvent::Bookmark(b)));
    assert!(matches!(
        out.report,
        Some(ReflectorError::BadInput(
            BadInput::BookmarkWithoutResourceVersion
        ))
    ));
}

#[test]
fn an_input_out_of_turn_recovers_by_relisting_after_backoff() {
    let mut h = H::new(config());
    h.step(Input::Start);
    let out = h.step(Input::WatchClosed);
    assert!(out.report.is_none());
    sleep_for(&h, &out);
    list_opts(&h.step(Input::Slept));
}

/// client-go (kubernetes PR #136583): a watch started at "" or "0" begins with synthetic
/// `Added` events in no version order; their versions are not recorded until the first other
/// event of that watch. A watch from a known version records every event's version.
#[test]
fn watch_from_zero_propagates_versions_only_after_the_first_non_added_event() {
    let mut h = H::new(config());
    h.watching("0");
    for (name, rv) in [("a", 7), ("b", 3)] {
        h.step(Input::Event(WatchEvent::Added(obj(name, rv))));
        h.step(Input::StoreDone(Ok(())));
        assert_eq!(h.rv(), "0", "a synthetic add's version is not recorded");
    }
    h.step(Input::Event(WatchEvent::Modified(obj("a", 8))));
    h.step(Input::StoreDone(Ok(())));
    assert_eq!(h.rv(), "8");
    h.step(Input::Event(WatchEvent::Added(obj("c", 9))));
    h.step(Input::StoreDone(Ok(())));
    assert_eq!(h.rv(), "9", "past the synthetic events, adds count");

    let mut h = H::new(config());
    h.watching("10");
    h.step(Input::Event(WatchEvent::Added(obj("x", 11))));
    h.step(Input::StoreDone(Ok(())));
    assert_eq!(h.rv(), "11");
}

/// The names of a `ListPage` command's objects and its `first` flag.
fn list_page(out: &O) -> (Vec<String>, bool) {
    match &out.command {
        Command::Store(StoreCall::ListPage { items, first }) => {
            (items.iter().map(|o| o.name.clone()).collect(), *first)
        }
        _ => panic!("expected a list page for the store"),
    }
}

#[test]
fn a_paged_store_gets_each_page_before_the_next_is_asked_for_then_the_finish() {
    let mut h = H::new(Config {
        page_size: Some(2),
        paged: true,
        ..config()
    });
    h.step(Input::Start);
    let out = h.step(Input::Listed(Ok(page(
        vec![obj("a", 1), obj("b", 2)],
        "30",
        Some("t1"),
    ))));
    assert_eq!(list_page(&out), (vec!["a".into(), "b".into()], true));
    let next = list_opts(&h.step(Input::StoreDone(Ok(()))));
    assert_eq!(next.continue_token.as_deref(), Some("t1"));
    let out = h.step(Input::Listed(Ok(page(vec![obj("c", 3)], "31", None))));
    assert_eq!(list_page(&out), (vec!["c".into()], false));
    let out = h.step(Input::StoreDone(Ok(())));
    match out.command {
        Command::Store(StoreCall::FinishList(rv)) => {
            assert_eq!(rv.as_str(), "30", "the first page's version")
        }
        _ => panic!("expected the finish"),
    }
    assert_eq!(h.rv(), "", "not synced before the finish was taken");
    let w = watch_opts(&h.step(Input::StoreDone(Ok(()))));
    assert_eq!(w.resource_version.as_str(), "30");
    assert_eq!(h.rv(), "30");
}

#[test]
fn a_paged_list_restarts_as_a_new_attempt_after_an_expired_continue_token() {
    let mut h = H::new(Config {
        page_size: Some(2),
        paged: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::Listed(Ok(page(
        vec![obj("a", 1), obj("b", 2)],
        "30",
        Some("t1"),
    ))));
    list_opts(&h.step(Input::StoreDone(Ok(()))));
    let full = list_opts(&h.step(Input::Listed(Err(err(ErrorKind::Expired)))));
    assert_eq!(full.limit, None);
    assert_eq!(full.resource_version.as_str(), "0");
    let out = h.step(Input::Listed(Ok(page(vec![obj("a", 1)], "44", None))));
    assert_eq!(
        list_page(&out),
        (vec!["a".into()], true),
        "the full list is a new attempt: what the first one listed no longer counts"
    );
    let out = h.step(Input::StoreDone(Ok(())));
    assert!(
        matches!(out.command, Command::Store(StoreCall::FinishList(ref rv)) if rv.as_str() == "44")
    );
}

#[test]
fn a_paged_list_that_fails_or_is_refused_mid_list_backs_off_and_relists() {
    let mut h = H::new(Config {
        page_size: Some(1),
        paged: true,
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::Listed(Ok(page(vec![obj("a", 1)], "30", Some("t1")))));
    list_opts(&h.step(Input::StoreDone(Ok(()))));
    let out = h.step(Input::Listed(Err(err(ErrorKind::Other))));
    assert!(matches!(out.command, Command::Sleep(_)));
    assert!(matches!(out.report, Some(ReflectorError::List(_))));
    let again = list_opts(&h.step(Input::Slept));
    assert!(again.continue_token.is_none(), "a new list from the start");
    let out = h.step(Input::Listed(Ok(page(vec![obj("a", 1)], "31", Some("t2")))));
    assert!(list_page(&out).1);
    let out = h.step(Input::StoreDone(Err(Se)));
    assert!(matches!(out.command, Command::Sleep(_)));
    assert!(matches!(
        out.report,
        Some(ReflectorError::Store {
            operation: StoreOperation::Replace,
            ..
        })
    ));
    assert_eq!(h.rv(), "");
}

#[test]
fn a_paged_list_counts_objects_across_pages_against_the_limit() {
    let mut h = H::new(Config {
        page_size: Some(2),
        paged: true,
        limits: ListLimits {
            max_pages: 100,
            max_objects: 3,
        },
        ..config()
    });
    h.step(Input::Start);
    h.step(Input::Listed(Ok(page(
        vec![obj("a", 1), obj("b", 1)],
        "30",
        Some("t1"),
    ))));
    h.step(Input::StoreDone(Ok(())));
    let out = h.step(Input::Listed(Ok(page(
        vec![obj("c", 1), obj("d", 1)],
        "30",
        Some("t2"),
    ))));
    assert!(matches!(
        out.report,
        Some(ReflectorError::BadInput(BadInput::ListTooLong {
            objects: 4,
            ..
        }))
    ));
}
