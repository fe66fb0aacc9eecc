//! What a [`RealFifo`](crate::RealFifo) queues and hands out: one [`Entry`] per event, in the
//! order the events were written.

use crate::DeltaType;
use kcache_core::{KeyText, ResourceVersion};
use std::fmt;
use std::sync::Arc;

/// One queued event of a [`RealFifo`](crate::RealFifo).
#[derive(Clone)]
pub enum Entry<T> {
    /// A watch event: `delta_type` is [`DeltaType::Added`], [`DeltaType::Updated`] or
    /// [`DeltaType::Deleted`]; `object` is the (transformed) object.
    Delta {
        /// The object's key.
        key: KeyText,
        /// What happened to the object.
        delta_type: DeltaType,
        /// The object as the source sent it (transformed).
        object: Arc<T>,
    },
    /// A whole list: the consumer's cache must become exactly these objects (client-go's
    /// `ReplacedAll` delta).
    #[doc(alias = "ReplacedAllInfo")]
    ReplacedAll(ReplacedAll<T>),
    /// A resync: the consumer tells its handlers about every cached object again (client-go's
    /// `SyncAll` delta).
    #[doc(alias = "SyncAllInfo")]
    SyncAll,
}

impl<T> Entry<T> {
    /// The entry's key, for a [`Delta`](Entry::Delta).
    pub fn key(&self) -> Option<&KeyText> {
        match self {
            Entry::Delta { key, .. } => Some(key),
            Entry::ReplacedAll(_) | Entry::SyncAll => None,
        }
    }

    /// Whether a batch may hold this entry beside others: [`ReplacedAll`](Entry::ReplacedAll)
    /// and [`SyncAll`](Entry::SyncAll) are handed out alone.
    pub(crate) fn batchable(&self) -> bool {
        matches!(self, Entry::Delta { .. })
    }
}

impl<T> fmt::Debug for Entry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Delta {
                key, delta_type, ..
            } => write!(f, "{delta_type}({key})"),
            Entry::ReplacedAll(r) => write!(
                f,
                "ReplacedAll({} objects at {:?})",
                r.objects.len(),
                r.resource_version.as_str()
            ),
            Entry::SyncAll => f.write_str("SyncAll"),
        }
    }
}

/// The objects of a complete list, with their keys, in list order, and the list's version.
#[derive(Clone)]
pub struct ReplacedAll<T> {
    /// The list's resource version.
    pub resource_version: ResourceVersion,
    /// The listed objects with their keys, in list order (transformed).
    pub objects: Vec<(KeyText, Arc<T>)>,
}

/// What one pop of a [`RealFifo`](crate::RealFifo) hands out: consecutive entries in queue
/// order. A [`ReplacedAll`](Entry::ReplacedAll) or [`SyncAll`](Entry::SyncAll) comes alone.
pub struct Batch<T> {
    pub(crate) entries: Vec<Entry<T>>,
    /// How many of the first entries belong to the initial population.
    pub(crate) initial: usize,
}

impl<T> Batch<T> {
    /// How many entries the batch holds (at least one).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch is empty (never, for a popped batch).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, oldest first, each with whether it belongs to the initial list (the
    /// queue had not synced when it was queued and taken).
    pub fn iter(&self) -> impl Iterator<Item = (&Entry<T>, bool)> + '_ {
        let initial = self.initial;
        self.entries
            .iter()
            .enumerate()
            .map(move |(i, e)| (e, i < initial))
    }
}

impl<T> IntoIterator for Batch<T> {
    type Item = (Entry<T>, bool);
    type IntoIter = BatchIntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        BatchIntoIter {
            inner: self.entries.into_iter(),
            initial: self.initial,
        }
    }
}

/// The owning iterator of a [`Batch`]: each entry with whether it belongs to the initial list.
pub struct BatchIntoIter<T> {
    inner: std::vec::IntoIter<Entry<T>>,
    initial: usize,
}

impl<T> Iterator for BatchIntoIter<T> {
    type Item = (Entry<T>, bool);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.inner.next()?;
        let initial = self.initial > 0;
        self.initial = self.initial.saturating_sub(1);
        Some((entry, initial))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> fmt::Debug for Batch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("entries", &self.entries)
            .field("initial", &self.initial)
            .finish()
    }
}
