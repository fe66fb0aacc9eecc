//! The dispatcher and handler buffers, exposed for the loom model (`tests/loom_dispatch.rs`).
//! Only built with `--cfg kcache_loom`; not part of the API.

use crate::buffer::{Buffer, BufferMode};
use crate::event::{Event, Notification};
use crate::listener::Listener;
use crate::processor::Processor;
use kcache_core::ObjectKey;
use std::sync::Arc;

/// A processor with `n` listeners and no delivery threads: the model plays the consumers.
pub struct Dispatcher<T> {
    processor: Processor<T>,
    listeners: Vec<Arc<Listener<T>>>,
}

impl<T> Dispatcher<T> {
    /// `n` listeners with buffers in `mode`.
    pub fn new(n: usize, mode: BufferMode) -> Self {
        let processor = Processor::new(std::time::Duration::ZERO);
        let mut listeners = Vec::new();
        {
            let mut d = processor.lock();
            for _ in 0..n {
                let id = d.next_id();
                let l = Arc::new(Listener::new(
                    id,
                    Arc::from("model"),
                    Buffer::new(mode),
                    None,
                ));
                d.add(
                    l.clone(),
                    std::time::Duration::ZERO,
                    kcache_core::far_future(),
                );
                listeners.push(l);
            }
        }
        Self {
            processor,
            listeners,
        }
    }

    /// Distributes an add of `obj` under `key` to every listener, under the dispatch lock.
    pub fn dispatch_add(&self, key: &ObjectKey, obj: Arc<T>, is_in_initial_list: bool) {
        let n = Notification::new(
            key.clone().into(),
            Event::Added {
                obj,
                is_in_initial_list,
            },
        );
        let mut d = self.processor.lock();
        d.distribute(n, false);
        d.flush();
    }

    /// Distributes an update to every listener.
    pub fn dispatch_update(&self, key: &ObjectKey, old: Arc<T>, new: Arc<T>) {
        let n = Notification::new(key.clone().into(), Event::Updated { old, new });
        let mut d = self.processor.lock();
        d.distribute(n, false);
        d.flush();
    }

    /// Marks the informer synced.
    pub fn set_synced(&self) {
        self.processor.lock().set_synced();
    }

    /// Stops: closes every buffer.
    pub fn stop(&self) {
        self.processor.lock().stop();
    }

    /// Listener `i`'s consumer: blocks for the next notification, delivers it (returns it) and
    /// marks it complete.
    pub fn consume(&self, i: usize) -> Option<(ObjectKey, Event<T>)> {
        let l = &self.listeners[i];
        let n = l.buffer.pop_blocking()?;
        l.buffer.complete(n.initial);
        Some((n.key.into_key(), n.event))
    }

    /// Marks listener `i`'s consumer finished.
    pub fn finish(&self, i: usize) {
        self.listeners[i].buffer.finish_consumer();
    }

    /// Whether listener `i` has synced.
    pub fn has_synced(&self, i: usize) -> bool {
        self.listeners[i].buffer.has_synced()
    }

    /// Listener `i`'s pending count.
    pub fn pending(&self, i: usize) -> usize {
        self.listeners[i].buffer.pending()
    }
}
