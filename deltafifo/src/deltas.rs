//! `Deltas`: one key's pending changes, stored inline while there is only one.
//!
//! Most keys hold a single delta when popped (a relist's `Replaced`, a watch event the consumer
//! keeps up with), so the one-delta case costs no allocation; a second delta moves the list to a
//! vector.

use crate::Delta;
use kcache_core::ObjectKey;
use std::ops::Deref;

/// The pending changes of one key, oldest first.
///
/// Never empty when handed out by [`DeltaFifo::pop`](crate::DeltaFifo::pop).
///
/// # Examples
/// ```
/// use kcache_deltafifo::{Delta, DeltaType, Deltas};
/// use std::sync::Arc;
///
/// let deltas = Deltas::from(vec![
///     Delta::new(DeltaType::Added, Arc::new(1)),
///     Delta::new(DeltaType::Updated, Arc::new(2)),
/// ]);
/// assert_eq!(deltas.oldest().map(|d| d.delta_type), Some(DeltaType::Added));
/// assert_eq!(deltas.newest().map(|d| d.delta_type), Some(DeltaType::Updated));
/// assert_eq!(deltas.len(), 2);
/// let types: Vec<DeltaType> = deltas.into_iter().map(|d| d.delta_type).collect();
/// assert_eq!(types, [DeltaType::Added, DeltaType::Updated]);
/// ```
#[derive(Debug)]
pub struct Deltas<T> {
    repr: DeltaList<T>,
    key: Option<ObjectKey>,
}

/// The deltas of a queued key, without the key (the FIFO's map holds it): what a queued entry
/// stores, one inline delta or a vector.
#[derive(Debug)]
pub(crate) struct DeltaList<T>(Repr<T>);

/// Two lists are equal when their deltas are (however each is stored); the
/// [`key`](Deltas::key) is not compared.
impl<T: PartialEq> PartialEq for Deltas<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for Deltas<T> {}

#[derive(Debug)]
enum Repr<T> {
    One(Delta<T>),
    Many(Vec<Delta<T>>),
}

impl<T> Clone for Deltas<T> {
    fn clone(&self) -> Self {
        let repr = match &self.repr.0 {
            Repr::One(d) => Repr::One(d.clone()),
            Repr::Many(v) => Repr::Many(v.clone()),
        };
        Self {
            repr: DeltaList(repr),
            key: self.key.clone(),
        }
    }
}

impl<T> Default for Deltas<T> {
    fn default() -> Self {
        Self::from(Vec::new())
    }
}

impl<T> DeltaList<T> {
    /// A list of one delta (no allocation).
    pub(crate) fn one(delta: Delta<T>) -> Self {
        Self(Repr::One(delta))
    }

    /// Appends `delta` as the newest.
    pub(crate) fn push(&mut self, delta: Delta<T>) {
        match &mut self.0 {
            Repr::Many(v) => v.push(delta),
            Repr::One(_) => {
                let mut v = Vec::with_capacity(4);
                if let Repr::One(first) = std::mem::replace(&mut self.0, Repr::Many(Vec::new())) {
                    v.push(first);
                }
                v.push(delta);
                self.0 = Repr::Many(v);
            }
        }
    }

    /// Removes and returns the newest delta.
    pub(crate) fn pop(&mut self) -> Option<Delta<T>> {
        match &mut self.0 {
            Repr::Many(v) => v.pop(),
            Repr::One(_) => match std::mem::replace(&mut self.0, Repr::Many(Vec::new())) {
                Repr::One(d) => Some(d),
                Repr::Many(_) => None,
            },
        }
    }

    /// The deltas as a mutable slice, oldest first.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [Delta<T>] {
        match &mut self.0 {
            Repr::One(d) => std::slice::from_mut(d),
            Repr::Many(v) => v,
        }
    }

    /// The list handed out for `key`.
    pub(crate) fn handed_out(self, key: ObjectKey) -> Deltas<T> {
        Deltas {
            repr: self,
            key: Some(key),
        }
    }
}

impl<T> IntoIterator for DeltaList<T> {
    type Item = Delta<T>;
    type IntoIter = DeltasIntoIter<T>;
    fn into_iter(self) -> DeltasIntoIter<T> {
        DeltasIntoIter(match self.0 {
            Repr::One(d) => IterRepr::One(Some(d)),
            Repr::Many(v) => IterRepr::Many(v.into_iter()),
        })
    }
}

impl<T> Deref for DeltaList<T> {
    type Target = [Delta<T>];
    fn deref(&self) -> &[Delta<T>] {
        match &self.0 {
            Repr::One(d) => std::slice::from_ref(d),
            Repr::Many(v) => v,
        }
    }
}

impl<T> Deltas<T> {
    /// The list without its key (to queue it again).
    pub(crate) fn into_list(self) -> DeltaList<T> {
        self.repr
    }

    /// The key these deltas belong to: set on every list the FIFO hands out (`pop`,
    /// `pop_async`, `pop_batch`), so a process function need not compute it again; `None` on
    /// lists built by hand.
    pub fn key(&self) -> Option<&ObjectKey> {
        self.key.as_ref()
    }

    /// The oldest delta.
    pub fn oldest(&self) -> Option<&Delta<T>> {
        self.first()
    }

    /// The newest delta.
    pub fn newest(&self) -> Option<&Delta<T>> {
        self.last()
    }

    /// The deltas as a vector, oldest first.
    pub fn into_vec(self) -> Vec<Delta<T>> {
        match self.repr.0 {
            Repr::One(d) => vec![d],
            Repr::Many(v) => v,
        }
    }
}

impl<T> Deref for Deltas<T> {
    type Target = [Delta<T>];
    fn deref(&self) -> &[Delta<T>] {
        &self.repr
    }
}

impl<T> From<Vec<Delta<T>>> for Deltas<T> {
    fn from(v: Vec<Delta<T>>) -> Self {
        Self {
            repr: DeltaList(Repr::Many(v)),
            key: None,
        }
    }
}

impl<T> IntoIterator for Deltas<T> {
    type Item = Delta<T>;
    type IntoIter = DeltasIntoIter<T>;
    fn into_iter(self) -> DeltasIntoIter<T> {
        self.repr.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Deltas<T> {
    type Item = &'a Delta<T>;
    type IntoIter = std::slice::Iter<'a, Delta<T>>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The owning iterator of [`Deltas`], oldest first.
#[derive(Debug)]
pub struct DeltasIntoIter<T>(IterRepr<T>);

#[derive(Debug)]
enum IterRepr<T> {
    One(Option<Delta<T>>),
    Many(std::vec::IntoIter<Delta<T>>),
}

impl<T> Iterator for DeltasIntoIter<T> {
    type Item = Delta<T>;
    fn next(&mut self) -> Option<Delta<T>> {
        match &mut self.0 {
            IterRepr::One(d) => d.take(),
            IterRepr::Many(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            IterRepr::One(d) => usize::from(d.is_some()),
            IterRepr::Many(it) => it.len(),
        };
        (n, Some(n))
    }
}

impl<T> ExactSizeIterator for DeltasIntoIter<T> {}

impl<T> DoubleEndedIterator for DeltasIntoIter<T> {
    fn next_back(&mut self) -> Option<Delta<T>> {
        match &mut self.0 {
            IterRepr::One(d) => d.take(),
            IterRepr::Many(it) => it.next_back(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeltaType;
    use std::sync::Arc;

    fn types(d: &[Delta<u32>]) -> Vec<(DeltaType, u32)> {
        d.iter()
            .map(|d| (d.delta_type, d.object.object().map_or(0, |o| **o)))
            .collect()
    }

    fn key() -> ObjectKey {
        ObjectKey::new("k").unwrap()
    }

    #[test]
    fn one_grows_into_many_and_shrinks_back_keeping_order() {
        let mut d = DeltaList::one(Delta::new(DeltaType::Added, Arc::new(1)));
        assert_eq!(types(&d), [(DeltaType::Added, 1)]);
        d.push(Delta::new(DeltaType::Updated, Arc::new(2)));
        d.push(Delta::new(DeltaType::Deleted, Arc::new(3)));
        assert_eq!(
            types(&d),
            [
                (DeltaType::Added, 1),
                (DeltaType::Updated, 2),
                (DeltaType::Deleted, 3)
            ]
        );
        assert_eq!(d.pop().map(|x| x.delta_type), Some(DeltaType::Deleted));
        assert_eq!(d.len(), 2);
        let d = d.handed_out(key());
        let v: Vec<_> = d.clone().into_iter().map(|x| x.delta_type).collect();
        assert_eq!(v, [DeltaType::Added, DeltaType::Updated]);
        assert_eq!(
            d.into_iter().next_back().map(|x| x.delta_type),
            Some(DeltaType::Updated)
        );
    }

    #[test]
    fn a_single_delta_iterates_pops_and_converts() {
        let mut list = DeltaList::one(Delta::new(DeltaType::Sync, Arc::new(7)));
        list.as_mut_slice()[0].delta_type = DeltaType::Replaced;
        let d = list.handed_out(key());
        assert_eq!(d.key(), Some(&key()));
        assert_eq!(d.oldest(), d.newest());
        let it = d.clone().into_iter();
        assert_eq!(it.len(), 1);
        assert_eq!(d.clone().into_vec().len(), 1);
        assert_eq!(d, Deltas::from(d.to_vec()), "storage and key do not matter");
        let mut list = d.into_list();
        assert_eq!(list.pop().map(|x| x.delta_type), Some(DeltaType::Replaced));
        assert!(list.is_empty());
        assert_eq!(list.pop(), None);
    }
}
