//! The list a [`RealFifo`](super::RealFifo) builds before it queues it: the pages of a list in
//! progress, and the rule that one key appears once in a `ReplacedAll` entry.

use kcache_core::KeyText;
use std::collections::HashMap;
use std::sync::Arc;

/// A list being taken page by page, keyed and transformed: objects in arrival order, `None` for
/// a key a streaming list's initial event deleted.
pub(super) struct Staged<T> {
    pub(super) entries: Vec<(KeyText, Option<Arc<T>>)>,
}

impl<T> Staged<T> {
    pub(super) fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// The list as the consumer gets it: see [`last_wins`].
    pub(super) fn into_list(self) -> Vec<(KeyText, Arc<T>)> {
        last_wins(self.entries)
    }
}

/// One entry per key, the last one written for it (an object, or `None`: gone), at the last
/// one's place in the order; the gone keys left out. A list without repeats and holes is
/// returned as it came, in its own allocation (a repeat or a hole costs a pass that also
/// reuses it).
pub(super) fn last_wins<T>(entries: Vec<(KeyText, Option<Arc<T>>)>) -> Vec<(KeyText, Arc<T>)> {
    let mut last: HashMap<&str, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(entries.len(), Default::default());
    let mut holes = false;
    for (i, (key, obj)) in entries.iter().enumerate() {
        holes |= obj.is_none();
        last.insert(key.as_str(), i);
    }
    let keep: Option<Vec<bool>> = (holes || last.len() < entries.len()).then(|| {
        let mut keep = vec![false; entries.len()];
        for &i in last.values() {
            keep[i] = true;
        }
        keep
    });
    drop(last);
    entries
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.as_ref().is_none_or(|k| k[*i]))
        .filter_map(|(_, (key, obj))| obj.map(|o| (key, o)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> KeyText {
        KeyText::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn names(list: &[(KeyText, Arc<u32>)]) -> Vec<(String, u32)> {
        list.iter()
            .map(|(k, o)| (k.as_str().to_owned(), **o))
            .collect()
    }

    #[test]
    fn a_repeated_key_keeps_its_last_object_at_the_last_place_and_a_hole_drops_its_key() {
        let entries = vec![
            (key("a"), Some(Arc::new(1))),
            (key("b"), Some(Arc::new(2))),
            (key("a"), Some(Arc::new(3))),
            (key("c"), Some(Arc::new(4))),
            (key("c"), None),
            (key("d"), None),
            (key("b"), Some(Arc::new(5))),
        ];
        assert_eq!(
            names(&last_wins(entries)),
            vec![("a".to_owned(), 3), ("b".to_owned(), 5)]
        );
    }

    #[test]
    fn a_list_without_repeats_comes_back_as_it_was() {
        let entries: Vec<_> = (0..5u32)
            .map(|i| (key(&format!("k{i}")), Some(Arc::new(i))))
            .collect();
        let list = last_wins(entries);
        assert_eq!(list.len(), 5);
        assert!(list.iter().enumerate().all(|(i, (_, o))| **o as usize == i));
    }
}
