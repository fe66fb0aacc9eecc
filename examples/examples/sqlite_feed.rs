//! A change feed over a SQLite table, polled by its `updated_at` column, feeding an informer
//! through kcache's own-source API ([`ListWatch`]): adds, updates and deletes reach a handler.
//!
//! ```text
//! cargo run -p kcache-demo --example sqlite_feed -- watch items.db       # prints each change
//! cargo run -p kcache-demo --example sqlite_feed -- put items.db a hello # insert or update
//! cargo run -p kcache-demo --example sqlite_feed -- delete items.db a
//! ```
//! Any other writer works as well (`sqlite3 items.db "update items set value = 'x' where id = 'a'"`):
//! the bookkeeping is done by triggers inside the database.
//!
//! # How the feed works
//! - `items(id, value, created_at, updated_at)`: `updated_at` is a *logical* timestamp, the
//!   value of a change counter (`feed_clock`) that every insert, update and delete advances,
//!   set by triggers. Wall-clock timestamps are not used: two writes in the same millisecond
//!   share one, a clock stepped back reorders them, and a transaction that commits after a
//!   later-stamped one is missed by a poll `updated_at > last` that already passed its stamp.
//!   The counter is advanced inside each writing transaction and SQLite serializes writers, so
//!   a poll's `updated_at > since` sees every change after `since` exactly once. (Your table
//!   has wall-clock stamps? Poll it with a full listing through `PollingListWatcher`, which
//!   diffs whole lists, as the `json_dir` example does.)
//! - Deletes leave a tombstone in `items_deleted(id, value, created_at, deleted_at)` (a trigger
//!   writes it), so a poll reports them with the row's last state. Tombstones are pruned
//!   ([`prune`]) once older than [`KEEP_TOMBSTONES`] changes; a watch from before the pruned
//!   point fails with [`ErrorKind::Expired`] and the reflector relists, as after an etcd
//!   compaction.
//! - The resource version of the list and of each event is the counter's value: decimal and
//!   increasing, as kcache's rules ask. A watch from version `v` reports every row with
//!   `updated_at > v` (`Added` when it was created after `v`, else `Modified`) and every
//!   tombstone with `deleted_at > v` (a row created and deleted after `v` is not reported at
//!   all), in counter order, then a bookmark at the counter's value.
//! - A watch that cannot read the database fails with [`ErrorKind::Retry`] (the reflector backs
//!   off and watches again from where it was, keeping its cache); a version that is not a
//!   number fails with [`ErrorKind::Other`] (the reflector relists).

use futures::stream::{self, StreamExt};
use kcache_core::{Clock, Object, ResourceVersion, SystemClock};
use kcache_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use kcache_reflector::{
    BackendError, Bookmark, ErrorKind, ListOptions, ListPage, ListWatch, WatchEvent, WatchOptions,
    WatchStream,
};
use rusqlite::{params, Connection};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tombstones older than this many changes are pruned.
const KEEP_TOMBSTONES: i64 = 1000;
/// How often the watch polls the table.
const POLL_EVERY: Duration = Duration::from_millis(200);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS feed_clock (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    version INTEGER NOT NULL,
    pruned_through INTEGER NOT NULL
);
INSERT OR IGNORE INTO feed_clock VALUES (0, 0, 0);
CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS items_updated_at ON items (updated_at);
CREATE TABLE IF NOT EXISTS items_deleted (
    deleted_at INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS items_insert AFTER INSERT ON items BEGIN
    UPDATE feed_clock SET version = version + 1;
    UPDATE items SET created_at = (SELECT version FROM feed_clock),
                     updated_at = (SELECT version FROM feed_clock) WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS items_update AFTER UPDATE OF id, value ON items BEGIN
    UPDATE feed_clock SET version = version + 1;
    UPDATE items SET updated_at = (SELECT version FROM feed_clock) WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS items_delete AFTER DELETE ON items BEGIN
    UPDATE feed_clock SET version = version + 1;
    INSERT INTO items_deleted VALUES ((SELECT version FROM feed_clock), OLD.id, OLD.value, OLD.created_at);
END;
";

/// A row of `items`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    id: String,
    value: String,
    /// `updated_at` (for a tombstone: `deleted_at`).
    version: i64,
}

impl Object for Item {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        &self.id
    }
    fn resource_version(&self) -> ResourceVersion {
        ResourceVersion::new(self.version.to_string())
    }
}

/// Why the feed failed, classified for the reflector.
#[derive(Debug, thiserror::Error)]
enum FeedError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the database connection is poisoned by a panic")]
    Poisoned,
    #[error("resource version {0:?} is not a change counter value")]
    BadVersion(ResourceVersion),
    #[error("changes after {since} were pruned (tombstones kept from {pruned_through})")]
    Expired { since: i64, pruned_through: i64 },
}

impl BackendError for FeedError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Sqlite(_) | Self::Poisoned => ErrorKind::Retry,
            Self::BadVersion(_) => ErrorKind::Other,
            Self::Expired { .. } => ErrorKind::Expired,
        }
    }
}

/// Opens (creating the schema if needed) the database at `path`.
fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

/// Inserts `id` with `value`, or updates its value.
fn put(conn: &Connection, id: &str, value: &str) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO items (id, value) VALUES (?1, ?2)
         ON CONFLICT (id) DO UPDATE SET value = excluded.value",
        params![id, value],
    )?;
    Ok(())
}

/// Deletes `id`; whether it existed.
fn delete(conn: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(conn.execute("DELETE FROM items WHERE id = ?1", params![id])? > 0)
}

/// Drops the tombstones older than `keep` changes and records how far they were pruned.
fn prune(conn: &mut Connection, keep: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let version: i64 = tx.query_row("SELECT version FROM feed_clock", [], |r| r.get(0))?;
    let through = version.saturating_sub(keep);
    tx.execute(
        "DELETE FROM items_deleted WHERE deleted_at <= ?1",
        params![through],
    )?;
    tx.execute(
        "UPDATE feed_clock SET pruned_through = max(pruned_through, ?1)",
        params![through],
    )?;
    tx.commit()
}

/// Every row, and the counter's value they were read at (one read transaction).
fn list(conn: &mut Connection) -> Result<(Vec<Item>, i64), FeedError> {
    let tx = conn.transaction()?;
    let version: i64 = tx.query_row("SELECT version FROM feed_clock", [], |r| r.get(0))?;
    let items = {
        let mut rows = tx.prepare("SELECT id, value, updated_at FROM items ORDER BY id")?;
        let items = rows.query_map([], |r| {
            Ok(Item {
                id: r.get(0)?,
                value: r.get(1)?,
                version: r.get(2)?,
            })
        })?;
        items.collect::<Result<Vec<_>, _>>()?
    };
    tx.commit()?;
    Ok((items, version))
}

/// The changes after `since`, in counter order, and the counter's value they were read at.
fn changes_since(
    conn: &mut Connection,
    since: i64,
) -> Result<(Vec<WatchEvent<Item>>, i64), FeedError> {
    let tx = conn.transaction()?;
    let (version, pruned_through): (i64, i64) =
        tx.query_row("SELECT version, pruned_through FROM feed_clock", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    if since < pruned_through {
        return Err(FeedError::Expired {
            since,
            pruned_through,
        });
    }
    let mut changes: Vec<(i64, WatchEvent<Item>)> = Vec::new();
    {
        let mut rows = tx
            .prepare("SELECT id, value, created_at, updated_at FROM items WHERE updated_at > ?1")?;
        let mut rows = rows.query(params![since])?;
        while let Some(r) = rows.next()? {
            let created_at: i64 = r.get(2)?;
            let item = Arc::new(Item {
                id: r.get(0)?,
                value: r.get(1)?,
                version: r.get(3)?,
            });
            let event = if created_at > since {
                WatchEvent::Added(item.clone())
            } else {
                WatchEvent::Modified(item.clone())
            };
            changes.push((item.version, event));
        }
        let mut rows = tx.prepare(
            "SELECT id, value, deleted_at FROM items_deleted
             WHERE deleted_at > ?1 AND created_at <= ?1",
        )?;
        let mut rows = rows.query(params![since])?;
        while let Some(r) = rows.next()? {
            let item = Arc::new(Item {
                id: r.get(0)?,
                value: r.get(1)?,
                version: r.get(2)?,
            });
            changes.push((item.version, WatchEvent::Deleted(item)));
        }
    }
    tx.commit()?;
    changes.sort_by_key(|(v, _)| *v);
    Ok((changes.into_iter().map(|(_, e)| e).collect(), version))
}

type Db = Arc<Mutex<Connection>>;

fn with_db<R>(
    db: &Db,
    f: impl FnOnce(&mut Connection) -> Result<R, FeedError>,
) -> Result<R, FeedError> {
    let mut conn = db.lock().map_err(|_| FeedError::Poisoned)?;
    f(&mut conn)
}

/// The feed as a [`ListWatch`]: a list reads every row; a watch polls `changes_since` every
/// `period` on `clock` and ends cleanly after the reflector's timeout.
fn feed(db: Db, clock: Arc<dyn Clock>, period: Duration) -> ListWatch<Item, FeedError> {
    let list_db = db.clone();
    ListWatch::new(
        move |_: ListOptions| {
            std::future::ready(with_db(&list_db, list).map(|(items, version)| ListPage {
                items: items.into_iter().map(Arc::new).collect(),
                resource_version: ResourceVersion::new(version.to_string()),
                continue_token: None,
            }))
        },
        move |opts: WatchOptions| {
            // SQLite's integers are i64; a version is one of the counter's values, never negative.
            let since = opts.resource_version.as_str().parse::<u64>();
            let Some(since) = since.ok().and_then(|v| i64::try_from(v).ok()) else {
                return std::future::ready(Err(FeedError::BadVersion(opts.resource_version)));
            };
            let deadline = opts.timeout.and_then(|t| clock.now().checked_add(t));
            let (db, clock) = (db.clone(), clock.clone());
            // One poll per step: its events, then a bookmark when the counter moved.
            let polls = stream::unfold(Some(since), move |since| {
                let (db, clock) = (db.clone(), clock.clone());
                async move {
                    let since = since?;
                    if deadline.is_some_and(|d| clock.now() >= d) {
                        return None;
                    }
                    clock.sleep_async(period).await;
                    let events = match with_db(&db, |conn| changes_since(conn, since)) {
                        Ok((mut events, version)) => {
                            if version > since {
                                events.push(WatchEvent::Bookmark(Bookmark {
                                    resource_version: ResourceVersion::new(version.to_string()),
                                    initial_events_end: false,
                                }));
                            }
                            let next = Some(version.max(since));
                            return Some((events.into_iter().map(Ok).collect::<Vec<_>>(), next));
                        }
                        Err(e) => vec![Err(e)],
                    };
                    // The error ends the stream after it is sent.
                    Some((events, None))
                }
            });
            let stream: WatchStream<Item, FeedError> = polls.flat_map(stream::iter).boxed();
            std::future::ready(Ok(stream))
        },
    )
}

/// `watch DB`: prints every change the informer's handler receives, until interrupted.
async fn watch(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let db = Arc::new(Mutex::new(open(path)?));
    let informer = Arc::new(SharedIndexInformer::with_options(
        feed(db, Arc::new(SystemClock), POLL_EVERY),
        InformerOptions::new().name("items"),
    ));
    informer.add_event_handler(
        HandlerFuncs::new()
            .add_func(|item: &Arc<Item>, _| {
                println!(
                    "added {} = {:?} (version {})",
                    item.id, item.value, item.version
                )
            })
            .update_func(|old: &Arc<Item>, new: &Arc<Item>| {
                println!(
                    "updated {}: {:?} -> {:?} (version {})",
                    new.id, old.value, new.value, new.version
                )
            })
            .delete_func(|deleted| match deleted.object() {
                Some(item) => println!("deleted {} (was {:?})", item.id, item.value),
                None => println!("deleted {}", deleted.key()),
            }),
    )?;
    let running = informer.clone();
    let run = tokio::spawn(async move {
        running
            .run(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
    });
    if informer.wait_for_cache_sync().await {
        println!("synced: {} rows", informer.indexer().len());
    }
    Ok(run.await??)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["watch", db] => watch(Path::new(db)).await,
        ["put", db, id, value] => {
            let mut conn = open(Path::new(db))?;
            put(&conn, id, value)?;
            prune(&mut conn, KEEP_TOMBSTONES)?;
            Ok(())
        }
        ["delete", db, id] => {
            let mut conn = open(Path::new(db))?;
            if !delete(&conn, id)? {
                eprintln!("no row {id}");
            }
            prune(&mut conn, KEEP_TOMBSTONES)?;
            Ok(())
        }
        _ => Err("usage: sqlite_feed watch DB | put DB ID VALUE | delete DB ID".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::FakeClock;
    use tokio::sync::mpsc::UnboundedReceiver;

    fn memory() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn
    }

    fn describe(events: &[WatchEvent<Item>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                WatchEvent::Added(i) => format!("added {}={} @{}", i.id, i.value, i.version),
                WatchEvent::Modified(i) => format!("modified {}={} @{}", i.id, i.value, i.version),
                WatchEvent::Deleted(i) => format!("deleted {}={} @{}", i.id, i.value, i.version),
                WatchEvent::Bookmark(b) => format!("bookmark @{}", b.resource_version),
            })
            .collect()
    }

    #[test]
    fn triggers_stamp_every_change_with_the_counter() {
        let mut conn = memory();
        put(&conn, "a", "1").unwrap(); // 1
        put(&conn, "b", "1").unwrap(); // 2
        put(&conn, "a", "2").unwrap(); // 3
        assert!(delete(&conn, "b").unwrap()); // 4
        assert!(!delete(&conn, "b").unwrap(), "nothing to delete: no change");
        let (items, version) = list(&mut conn).unwrap();
        assert_eq!(version, 4);
        assert_eq!(
            items,
            [Item {
                id: "a".into(),
                value: "2".into(),
                version: 3
            }]
        );
    }

    #[test]
    fn changes_since_a_version_are_adds_updates_and_deletes_in_order() {
        let mut conn = memory();
        put(&conn, "a", "1").unwrap(); // 1
        put(&conn, "b", "1").unwrap(); // 2
        let (_, since) = list(&mut conn).unwrap();
        put(&conn, "a", "2").unwrap(); // 3: a modified
        delete(&conn, "b").unwrap(); // 4: b deleted
        put(&conn, "c", "1").unwrap(); // 5: c added...
        put(&conn, "c", "2").unwrap(); // 6: ...and changed: one add, in its last state
        put(&conn, "d", "1").unwrap(); // 7: d added and deleted: not reported
        delete(&conn, "d").unwrap(); // 8
        put(&conn, "b", "again").unwrap(); // 9: b re-created after its delete
        let (events, version) = changes_since(&mut conn, since).unwrap();
        assert_eq!(version, 9);
        assert_eq!(
            describe(&events),
            [
                "modified a=2 @3",
                "deleted b=1 @4",
                "added c=2 @6",
                "added b=again @9"
            ]
        );
        let (events, version) = changes_since(&mut conn, version).unwrap();
        assert!(events.is_empty());
        assert_eq!(version, 9);
    }

    #[test]
    fn a_watch_from_before_the_pruned_tombstones_is_expired() {
        let mut conn = memory();
        put(&conn, "a", "1").unwrap(); // 1
        delete(&conn, "a").unwrap(); // 2
        put(&conn, "b", "1").unwrap(); // 3
        prune(&mut conn, 1).unwrap(); // tombstones through 2 gone
        let expired = changes_since(&mut conn, 1);
        assert!(matches!(
            &expired,
            Err(e @ FeedError::Expired { since: 1, pruned_through: 2 }) if e.kind() == ErrorKind::Expired
        ));
        let (events, _) = changes_since(&mut conn, 2).unwrap();
        assert_eq!(describe(&events), ["added b=1 @3"]);
    }

    /// The next line the handler sent. Each poll waits one period on the fake clock: advance it
    /// until a line comes (bounded).
    async fn next(clock: &FakeClock, seen: &mut UnboundedReceiver<String>) -> String {
        let line = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Ok(line) = seen.try_recv() {
                    return line;
                }
                clock.advance(POLL_EVERY);
                tokio::task::yield_now().await;
                let pause = std::future::pending::<()>();
                let _ = tokio::time::timeout(Duration::from_millis(2), pause).await;
            }
        });
        line.await.expect("no event within the bound")
    }

    /// The informer over the feed, on a fake clock: an insert, an update and a delete made
    /// after the first list reach the handler as an add, an update and a delete.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_informer_over_the_feed_sees_adds_updates_and_deletes() {
        let clock = FakeClock::new();
        let db: Db = Arc::new(Mutex::new(memory()));
        with_db(&db, |c| Ok(put(c, "a", "1")?)).unwrap();
        let informer = Arc::new(SharedIndexInformer::with_options(
            feed(db.clone(), Arc::new(clock.clone()), POLL_EVERY),
            InformerOptions::new()
                .name("items")
                .clock(Arc::new(clock.clone())),
        ));
        let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
        let (a, u, d) = (tx.clone(), tx.clone(), tx);
        informer
            .add_event_handler(
                HandlerFuncs::new()
                    .add_func(move |i: &Arc<Item>, _| {
                        let _ = a.send(format!("added {}={}", i.id, i.value));
                    })
                    .update_func(move |o: &Arc<Item>, n: &Arc<Item>| {
                        let _ = u.send(format!("updated {}: {} -> {}", n.id, o.value, n.value));
                    })
                    .delete_func(move |del| {
                        let _ = d.send(format!("deleted {}", del.key()));
                    }),
            )
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = informer.clone();
        let run = tokio::spawn(async move {
            running
                .run(async {
                    let _ = stopped.await;
                })
                .await
        });
        assert_eq!(next(&clock, &mut seen).await, "added a=1");
        with_db(&db, |c| {
            put(c, "b", "1")?;
            put(c, "a", "2")?;
            delete(c, "b")?;
            put(c, "c", "1")?;
            Ok(())
        })
        .unwrap();
        assert_eq!(next(&clock, &mut seen).await, "updated a: 1 -> 2");
        assert_eq!(next(&clock, &mut seen).await, "added c=1");
        with_db(&db, |c| Ok(delete(c, "a").map(|_| ())?)).unwrap();
        assert_eq!(next(&clock, &mut seen).await, "deleted a");
        let cached: Vec<String> = informer
            .indexer()
            .list()
            .iter()
            .map(|i| i.id.clone())
            .collect();
        assert_eq!(cached, ["c"]);
        let _ = stop.send(());
        run.await.unwrap().unwrap();
    }
}
