//! One poll's state and the diff between two polls: pure data, no I/O, no clock.

use super::PollError;
use crate::WatchEvent;
use kcache_core::{Meta, ObjectKey, ResourceVersion};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::sync::Arc;

/// Reads (and in content-hash mode, first stamps) an object's version.
pub(crate) type Versioner<T> = Arc<dyn Fn(&mut T) -> ResourceVersion + Send + Sync>;

/// What one poll listed: every object by key, with the version it was compared by.
pub(crate) struct Snapshot<T> {
    objects: BTreeMap<ObjectKey, (Arc<T>, ResourceVersion)>,
}

impl<T> Snapshot<T> {
    /// The empty snapshot (the baseline of a streaming list: everything is new).
    pub(crate) fn empty() -> Self {
        Self {
            objects: BTreeMap::new(),
        }
    }

    /// The listed objects, in key order.
    pub(crate) fn objects(&self) -> Vec<Arc<T>> {
        self.objects.values().map(|(o, _)| o.clone()).collect()
    }

    /// Builds a snapshot from one poll's objects. An object whose version equals the one in
    /// `previous` under the same key is replaced by `previous`'s shared copy, so unchanged
    /// objects are never held twice.
    ///
    /// # Errors
    /// A key the accessor cannot read, a key listed twice, or (with versions from the source) an
    /// object without a version: the poll is refused as a whole, nothing is half-applied.
    pub(crate) fn build<M: Meta<T>, E>(
        items: Vec<T>,
        version: &Versioner<T>,
        previous: Option<&Snapshot<T>>,
    ) -> Result<Self, PollError<E>> {
        let mut objects = BTreeMap::new();
        for mut obj in items {
            let rv = version(&mut obj);
            let key = M::key(&obj).map_err(PollError::Key)?;
            if rv.is_empty() {
                return Err(PollError::MissingResourceVersion(key));
            }
            let shared = match previous.and_then(|p| p.objects.get(&key)) {
                Some((old, old_rv)) if *old_rv == rv => old.clone(),
                _ => Arc::new(obj),
            };
            if objects.insert(key.clone(), (shared, rv)).is_some() {
                return Err(PollError::DuplicateKey(key));
            }
        }
        Ok(Self { objects })
    }

    /// The watch events that take a reader from `self` to `next`, in key order: `Added` for a new
    /// key, `Modified` for a key whose version changed, `Deleted` (with the last state seen) for a
    /// key that is gone.
    pub(crate) fn diff(&self, next: &Snapshot<T>) -> Vec<WatchEvent<T>> {
        let mut events = Vec::new();
        let mut old = self.objects.iter().peekable();
        let mut new = next.objects.iter().peekable();
        loop {
            match order(&mut old, &mut new) {
                None => return events,
                Some(Ordering::Less) => {
                    if let Some((_, (o, _))) = old.next() {
                        events.push(WatchEvent::Deleted(o.clone()));
                    }
                }
                Some(Ordering::Greater) => {
                    if let Some((_, (o, _))) = new.next() {
                        events.push(WatchEvent::Added(o.clone()));
                    }
                }
                Some(Ordering::Equal) => {
                    if let (Some((_, (_, was))), Some((_, (o, rv)))) = (old.next(), new.next()) {
                        if was != rv {
                            events.push(WatchEvent::Modified(o.clone()));
                        }
                    }
                }
            }
        }
    }
}

type Entries<'a, T> =
    Peekable<std::collections::btree_map::Iter<'a, ObjectKey, (Arc<T>, ResourceVersion)>>;

/// Which side of a merge walk comes next: `Less` (only or first in the old one), `Greater` (only
/// or first in the new one), `Equal` (the same key in both), `None` when both are exhausted.
fn order<T>(old: &mut Entries<'_, T>, new: &mut Entries<'_, T>) -> Option<Ordering> {
    match (old.peek(), new.peek()) {
        (None, None) => None,
        (Some(_), None) => Some(Ordering::Less),
        (None, Some(_)) => Some(Ordering::Greater),
        (Some((a, _)), Some((b, _))) => Some(a.cmp(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::{Object, ObjectAccessor};

    #[derive(Debug, Clone, PartialEq)]
    struct Row {
        name: &'static str,
        rv: &'static str,
    }
    impl Object for Row {
        fn namespace(&self) -> Option<&str> {
            None
        }
        fn name(&self) -> &str {
            self.name
        }
        fn resource_version(&self) -> ResourceVersion {
            ResourceVersion::from(self.rv)
        }
    }

    fn from_source() -> Versioner<Row> {
        Arc::new(|r: &mut Row| ObjectAccessor::resource_version(r))
    }

    fn snap(rows: &[(&'static str, &'static str)], prev: Option<&Snapshot<Row>>) -> Snapshot<Row> {
        let items = rows.iter().map(|&(name, rv)| Row { name, rv }).collect();
        Snapshot::build::<ObjectAccessor, ()>(items, &from_source(), prev).unwrap()
    }

    fn describe(events: &[WatchEvent<Row>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                WatchEvent::Added(o) => format!("+{}@{}", o.name, o.rv),
                WatchEvent::Modified(o) => format!("~{}@{}", o.name, o.rv),
                WatchEvent::Deleted(o) => format!("-{}@{}", o.name, o.rv),
                WatchEvent::Bookmark(b) => format!("#{}", b.resource_version),
            })
            .collect()
    }

    #[test]
    fn the_diff_names_each_added_changed_and_gone_key_once_in_key_order() {
        let a = snap(&[("a", "1"), ("b", "1"), ("c", "1"), ("e", "1")], None);
        let b = snap(&[("b", "2"), ("c", "1"), ("d", "1"), ("f", "1")], Some(&a));
        assert_eq!(
            describe(&a.diff(&b)),
            ["-a@1", "~b@2", "+d@1", "-e@1", "+f@1"]
        );
        assert!(b.diff(&b).is_empty());
        assert_eq!(describe(&Snapshot::empty().diff(&a)).len(), 4);
        assert_eq!(
            describe(&a.diff(&Snapshot::empty())),
            ["-a@1", "-b@1", "-c@1", "-e@1"]
        );
    }

    #[test]
    fn an_unchanged_object_keeps_the_previous_polls_allocation() {
        let a = snap(&[("a", "1"), ("b", "1")], None);
        let b = snap(&[("a", "1"), ("b", "2")], Some(&a));
        let (a0, b0) = (a.objects(), b.objects());
        assert!(Arc::ptr_eq(&a0[0], &b0[0]));
        assert!(!Arc::ptr_eq(&a0[1], &b0[1]));
    }

    #[test]
    fn a_bad_poll_is_refused_whole_with_a_typed_error() {
        let v = from_source();
        let dup = vec![Row { name: "a", rv: "1" }, Row { name: "a", rv: "2" }];
        let e = Snapshot::build::<ObjectAccessor, ()>(dup, &v, None).err();
        assert!(matches!(e, Some(PollError::DuplicateKey(k)) if k.as_str() == "a"));
        let nameless = vec![Row { name: "", rv: "1" }];
        let e = Snapshot::build::<ObjectAccessor, ()>(nameless, &v, None).err();
        assert!(matches!(e, Some(PollError::Key(_))));
        let unversioned = vec![Row { name: "a", rv: "" }];
        let e = Snapshot::build::<ObjectAccessor, ()>(unversioned, &v, None).err();
        assert!(matches!(e, Some(PollError::MissingResourceVersion(k)) if k.as_str() == "a"));
    }
}
