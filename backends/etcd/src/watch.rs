//! The watch stream: etcd watch responses turned into [`WatchEvent`]s.

use crate::decoder::Decoder;
use crate::error::classify;
use crate::keys::{parse_revision, revision_rv};
use crate::{Codec, EtcdError, EtcdListWatcher, MalformedValue};
use etcd_client::{
    GetOptions, KvClient, WatchOptions as EtcdWatchOptions, WatchResponse,
    WatchStream as EtcdStream,
};
use futures::future::Either;
use kcache_core::{Meta, Sleep};
use kcache_reflector::{Bookmark, WatchEvent, WatchOptions, WatchStream};
use std::collections::VecDeque;
use std::pin::pin;

type Item<T> = Result<WatchEvent<T>, EtcdError>;

/// How many previous values (of deleted keys) are read at once.
const PREVIOUS_READS_IN_FLIGHT: usize = 64;

/// Opens a watch (see the crate documentation, "Watching").
pub(crate) async fn open<T, C, M>(
    lw: &EtcdListWatcher<T, C, M>,
    opts: &WatchOptions,
) -> Result<WatchStream<T, EtcdError>, EtcdError>
where
    T: Send + Sync + 'static,
    C: Codec<T>,
    M: Meta<T>,
{
    let skipped = lw.take_skipped();
    if !skipped.is_empty() {
        return Err(EtcdError::Malformed(skipped));
    }
    // The timeout counts from the request, as an API server's does.
    let deadline = opts.timeout.map(|t| lw.clock.sleep_async(t));
    let asked = parse_revision(&opts.resource_version)?;
    let mut queue: VecDeque<Item<T>> = VecDeque::new();
    let initial = opts.send_initial_events || asked.is_none();
    let from = if initial {
        // A consistent snapshot of now (never older than `asked`), as `Added` events.
        let mut bad = Vec::new();
        let (items, rev) = lw
            .read_all(lw.decoder.prefix.start().to_vec(), None, asked, &mut bad)
            .await?;
        queue.extend(items.into_iter().map(|o| Ok(WatchEvent::Added(o))));
        if opts.send_initial_events || opts.allow_bookmarks || !bad.is_empty() {
            queue.push_back(Ok(WatchEvent::Bookmark(Bookmark {
                resource_version: revision_rv(rev),
                initial_events_end: opts.send_initial_events,
            })));
        }
        if !bad.is_empty() {
            queue.push_back(Err(EtcdError::Malformed(bad)));
        }
        rev
    } else {
        asked.unwrap_or(0)
    };
    let mut client = lw
        .client
        .watch_client()
        .max_decoding_message_size(lw.max_message_size);
    let watch_opts = EtcdWatchOptions::new()
        .with_range(lw.decoder.prefix.end())
        .with_start_revision(from + 1)
        .with_progress_notify();
    let mut stream = client
        .watch(lw.decoder.prefix.start(), Some(watch_opts))
        .await
        .map_err(|e| classify(e, from))?;
    let mut state = State {
        decoder: lw.decoder.clone(),
        kv: lw
            .client
            .kv_client()
            .max_decoding_message_size(lw.max_message_size),
        stream: None,
        queue: VecDeque::new(),
        deadline,
        allow_bookmarks: opts.allow_bookmarks,
        last_rev: from,
        done: false,
    };
    // Wait for etcd to confirm the watch, so that changes made after `watch` returns are seen and
    // errors at creation come from `watch` itself.
    loop {
        let resp = match stream.message().await {
            Ok(Some(resp)) => resp,
            Ok(None) => return Err(EtcdError::WatchEnded),
            Err(e) => return Err(classify(e, from)),
        };
        if let Some(err) = cancellation(&resp, from) {
            return Err(err);
        }
        if resp.created() {
            if let (false, Some(h)) = (initial, resp.header()) {
                if from > h.revision() {
                    return Err(EtcdError::FutureRevision {
                        requested: from,
                        current: Some(h.revision()),
                    });
                }
            }
            break;
        }
        state.handle(&resp).await;
    }
    queue.append(&mut state.queue);
    state.queue = queue;
    state.stream = Some(stream);
    Ok(Box::pin(futures::stream::unfold(
        state,
        |mut st| async move {
            let item = st.next().await?;
            Some((item, st))
        },
    )))
}

/// The error of a cancelled watch: `Compacted` when etcd set `compact_revision` (etcd 3.4 cancels
/// a watch from a compacted revision this way, without an error), else `WatchCanceled`.
fn cancellation(resp: &WatchResponse, from: i64) -> Option<EtcdError> {
    if resp.compact_revision() != 0 {
        Some(EtcdError::Compacted {
            requested: from,
            compact_revision: Some(resp.compact_revision()),
        })
    } else if resp.canceled() {
        Some(EtcdError::WatchCanceled {
            reason: resp.cancel_reason().to_owned(),
        })
    } else {
        None
    }
}

struct State<T, C, M> {
    decoder: Decoder<T, C, M>,
    /// Reads the previous values of deleted keys (see `previous`).
    kv: KvClient,
    stream: Option<EtcdStream>,
    queue: VecDeque<Item<T>>,
    deadline: Option<Sleep>,
    allow_bookmarks: bool,
    /// The highest revision delivered (or asked for).
    last_rev: i64,
    done: bool,
}

impl<T, C: Codec<T>, M: Meta<T>> State<T, C, M> {
    /// The next item; `None` once the timeout passed or after an error item.
    async fn next(&mut self) -> Option<Item<T>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if item.is_err() {
                    // An error ends the stream; drop the server-side watch now.
                    self.finish();
                }
                return Some(item);
            }
            if self.done {
                return None;
            }
            let next = {
                let stream = self.stream.as_mut()?;
                let message = pin!(stream.message());
                match self.deadline.as_mut() {
                    Some(deadline) => match futures::future::select(message, deadline).await {
                        Either::Left((m, _)) => Some(m),
                        Either::Right(((), _)) => None,
                    },
                    None => Some(message.await),
                }
            };
            let Some(next) = next else {
                // The timeout: a clean end.
                self.finish();
                return None;
            };
            match next {
                Ok(Some(resp)) => self.handle(&resp).await,
                Ok(None) => self.queue.push_back(Err(EtcdError::WatchEnded)),
                Err(e) => self.queue.push_back(Err(classify(e, self.last_rev))),
            }
        }
    }

    fn finish(&mut self) {
        self.done = true;
        self.queue.clear();
        self.stream = None;
    }

    /// Queues the events of one watch response.
    async fn handle(&mut self, resp: &WatchResponse) {
        if let Some(err) = cancellation(resp, self.last_rev) {
            self.queue.push_back(Err(err));
            return;
        }
        let events = resp.events();
        if events.is_empty() {
            // A progress notification (etcd sends them only to watchers that are in sync).
            if let (false, true, Some(h)) = (resp.created(), self.allow_bookmarks, resp.header()) {
                if h.revision() >= self.last_rev {
                    self.last_rev = h.revision();
                    self.queue.push_back(Ok(WatchEvent::Bookmark(Bookmark {
                        resource_version: revision_rv(h.revision()),
                        initial_events_end: false,
                    })));
                }
            }
            return;
        }
        // Decode the new values; deletions and undecodable puts need the previous value.
        let mut decoded: Vec<Option<Result<T, MalformedValue>>> = Vec::with_capacity(events.len());
        let mut wanted: Vec<(usize, Vec<u8>, i64)> = Vec::new();
        for (i, ev) in events.iter().enumerate() {
            let Some(kv) = ev.kv() else {
                self.queue.push_back(Err(EtcdError::Protocol(
                    "a watch event without a key-value".into(),
                )));
                return;
            };
            // A deletion resets a key's version to 0 (etcd's API contract); reading the version
            // avoids `Event::event_type`, which panics on an unknown type.
            if kv.version() == 0 {
                decoded.push(None);
                wanted.push((i, kv.key().to_vec(), kv.mod_revision()));
            } else {
                let d = self.decoder.decode(kv.key(), kv.value(), kv.mod_revision());
                if d.is_err() {
                    wanted.push((i, kv.key().to_vec(), kv.mod_revision()));
                }
                decoded.push(Some(d));
            }
        }
        let mut previous: Vec<Option<Result<T, MalformedValue>>> =
            (0..events.len()).map(|_| None).collect();
        for chunk in wanted.chunks(PREVIOUS_READS_IN_FLIGHT) {
            let reads = chunk.iter().map(|(_, key, rev)| {
                read_previous(self.kv.clone(), &self.decoder, key.clone(), *rev)
            });
            for ((i, _, _), res) in chunk.iter().zip(futures::future::join_all(reads).await) {
                match res {
                    Ok(p) => previous[*i] = p,
                    Err(e) => {
                        self.queue.push_back(Err(e));
                        return;
                    }
                }
            }
        }
        let mut bad: Vec<MalformedValue> = Vec::new();
        for ((ev, new), prev) in events.iter().zip(decoded).zip(previous) {
            let Some(kv) = ev.kv() else { continue };
            let rev = kv.mod_revision();
            self.last_rev = self.last_rev.max(rev);
            match new {
                // A deletion: its last state, stamped with the deletion's revision.
                None => match prev {
                    Some(Ok(obj)) => self.queue.push_back(Ok(WatchEvent::Deleted(obj.into()))),
                    Some(Err(m)) => bad.push(m),
                    None => {
                        self.queue
                            .push_back(Err(EtcdError::DeletedWithoutPreviousValue {
                                key: self.decoder.prefix.relative(kv.key()).into_owned(),
                                resource_version: revision_rv(rev),
                            }));
                        return;
                    }
                },
                Some(Ok(obj)) if kv.create_revision() == rev => {
                    self.queue.push_back(Ok(WatchEvent::Added(obj.into())))
                }
                Some(Ok(obj)) => self.queue.push_back(Ok(WatchEvent::Modified(obj.into()))),
                Some(Err(m)) => {
                    bad.push(m);
                    // The new state cannot be cached: drop the last good one.
                    if let Some(Ok(old)) = prev {
                        self.queue.push_back(Ok(WatchEvent::Deleted(old.into())));
                    }
                }
            }
        }
        if !bad.is_empty() {
            // Move the watcher's position past the bad values (etcd sends every event of a
            // revision in one response), then report them; the reflector re-watches from here.
            self.queue.push_back(Ok(WatchEvent::Bookmark(Bookmark {
                resource_version: revision_rv(self.last_rev),
                initial_events_end: false,
            })));
            self.queue.push_back(Err(EtcdError::Malformed(bad)));
        }
    }
}

/// The value `key` had just before revision `rev`, decoded and stamped with `rev` (the
/// revision of the deletion or of the undecodable write); `None` if the key did not exist.
///
/// etcd can attach previous values to watch events (`prev_kv`), but etcd 3.4 then reads one
/// for *every* event, creations and updates included, which caps a watch at a few thousand
/// events per second; reading them here only for deletions and bad writes does not.
async fn read_previous<T, C: Codec<T>, M: Meta<T>>(
    mut kv: KvClient,
    decoder: &Decoder<T, C, M>,
    key: Vec<u8>,
    rev: i64,
) -> Result<Option<Result<T, MalformedValue>>, EtcdError> {
    let resp = kv
        .get(key, Some(GetOptions::new().with_revision(rev - 1)))
        .await
        .map_err(|e| classify(e, rev - 1))?;
    Ok(resp
        .kvs()
        .first()
        .map(|p| decoder.decode(p.key(), p.value(), rev)))
}
