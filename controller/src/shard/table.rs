//! [`ShardTable`]: one replica's side of the sharding handshake, which keys it may start now.

use super::ring::{HashRing, ShardRange};
use crate::sync::Mutex;
use std::collections::HashMap;
use std::time::Instant;

/// What [`ShardTable::try_start`] decided for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The key is ours and now in flight: reconcile it, then call [`ShardTable::finish`].
    Started,
    /// Another member owns the key under the current membership: skip it (its owner has it).
    NotOwned,
    /// The key is ours, or may be soon, but not yet startable: its previous owner has not
    /// published that it let go, our own claim is not published yet, or our lease is not
    /// current. Try again later.
    Blocked,
}

/// One replica's side of the sharding handshake: which keys it may start now, and when it may
/// publish a new view.
///
/// Every member publishes, in its record, the *view* (a member set) whose share it claims. The
/// rules, applied under one lock:
///
/// - a key starts only if this replica owns it under the current *target* (the live members),
///   under every view others may see as ours (the published one, and one whose write failed
///   with an unknown outcome), under the view we had published when we last listed the others,
///   and if no other live member's published view gives it the key; our lease must be current;
/// - a new view is published (see [`begin_publish`](Self::begin_publish)) only once no key it
///   takes away from us is in flight; from that moment no such key starts.
///
/// Two replicas thus never both start one key: each publishes its claim before it lists the
/// other's record, so with a linearizable store at least one of them sees the other's claim and
/// holds back; and a claim is withdrawn only after the key's reconcile finished. Keys that keep
/// their owner stay startable throughout a rebalance. A replica whose lease ran out (on its own
/// clock, counted from the start of its last successful write) starts nothing; others take its
/// keys once they have seen its record unchanged for a lease duration.
///
/// [`Shard`](super::Shard) drives a table from a [`MemberStore`](kcache_leaderelection::MemberStore);
/// the table is public for callers driving their own schedule and for models.
///
/// # Examples
/// ```
/// use kcache_controller::shard::{Start, ShardTable};
/// use kcache_core::{Clock, FakeClock};
/// use std::time::Duration;
///
/// let now = FakeClock::new().now();
/// let a = ShardTable::new("a", 64);
/// a.set_target(&["a".to_owned(), "b".to_owned()]);
/// let view = a.begin_publish().expect("nothing in flight");
/// a.publish_succeeded(now + Duration::from_secs(15)); // our record now shows `view`
/// a.listed(vec![("b".to_owned(), view.clone())]);    // b claims the same view
/// let key = (0..100).map(|i| format!("ns/k{i}")).find(|k| a.owns_target(k)).unwrap();
/// assert_eq!(a.try_start(&key, now), Start::Started);
/// a.finish(&key);
/// ```
#[derive(Debug)]
pub struct ShardTable {
    identity: String,
    vnodes: usize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Our lease is current until then (None: never written, or lost).
    deadline: Option<Instant>,
    /// The ring of the live members.
    target: HashRing,
    /// Views others may read as ours: the published one, plus any whose write's outcome is
    /// unknown. Never empty.
    claims: Vec<HashRing>,
    /// The view being written now.
    publishing: Option<HashRing>,
    /// Our published view when the others' records were last listed (None: not listed since).
    checked: Option<HashRing>,
    /// The live others and the views they published.
    others: Vec<(String, HashRing)>,
    /// Keys in flight here, with how many workers run each (at most one with a work queue).
    in_flight: HashMap<String, usize>,
    /// Bumped whenever the set of startable keys may have grown.
    epoch: u64,
}

impl ShardTable {
    /// A table for the member `identity`, rings with `vnodes` points per member. It claims
    /// nothing and starts nothing until it has published a view and listed the others.
    pub fn new(identity: impl Into<String>, vnodes: usize) -> Self {
        let empty = HashRing::new(Vec::<String>::new(), vnodes);
        Self {
            identity: identity.into(),
            vnodes,
            state: Mutex::new(State {
                deadline: None,
                target: empty.clone(),
                claims: vec![empty],
                publishing: None,
                checked: None,
                others: Vec::new(),
                in_flight: HashMap::new(),
                epoch: 0,
            }),
        }
    }

    /// This member's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn ring(&self, members: &[String]) -> HashRing {
        HashRing::new(members.iter().cloned(), self.vnodes)
    }

    /// Decides whether `key` may be reconciled here now (`now` on the clock the lease deadline
    /// was set with), and if so marks it in flight.
    pub fn try_start(&self, key: &str, now: Instant) -> Start {
        let me = self.identity.as_str();
        let mut st = self.state.lock();
        if !st.target.owns(me, key) {
            return Start::NotOwned;
        }
        let startable = st.deadline.is_some_and(|d| now < d)
            && st.claims.iter().all(|v| v.owns(me, key))
            && st.publishing.as_ref().is_none_or(|v| v.owns(me, key))
            && st.checked.as_ref().is_some_and(|v| v.owns(me, key))
            && !st.others.iter().any(|(id, v)| v.owns(id, key));
        if !startable {
            return Start::Blocked;
        }
        *st.in_flight.entry(key.to_owned()).or_insert(0) += 1;
        Start::Started
    }

    /// Marks one reconcile of `key` finished. Returns whether a new view waits to be published
    /// (the caller wakes the driver: this may have been the last key holding it back).
    pub fn finish(&self, key: &str) -> bool {
        let mut st = self.state.lock();
        if let Some(n) = st.in_flight.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                st.in_flight.remove(key);
            }
        }
        st.claims.last() != Some(&st.target)
    }

    /// Whether `key` is ours under the current target (it may still be [`Start::Blocked`]).
    pub fn owns_target(&self, key: &str) -> bool {
        self.state.lock().target.owns(&self.identity, key)
    }

    /// Sets the live members (this member included if it is to claim anything). From now on,
    /// keys it does not give us are refused. Returns whether the target changed.
    pub fn set_target(&self, members: &[String]) -> bool {
        let mut sorted = members.to_vec();
        sorted.sort();
        sorted.dedup();
        if self.state.lock().target.members() == sorted {
            return false;
        }
        let ring = self.ring(&sorted);
        let mut st = self.state.lock();
        if st.target == ring {
            return false;
        }
        st.target = ring;
        st.epoch += 1;
        true
    }

    /// Our lease is lost (its deadline passed without a renewal): nothing starts, and the
    /// target becomes empty, so the next view we publish claims nothing.
    pub fn lease_lost(&self) {
        let mut st = self.state.lock();
        st.deadline = None;
        st.target = HashRing::new(Vec::<String>::new(), self.vnodes);
    }

    /// The view to write in our next record: the target if it differs from what we claim and
    /// no key it takes from us is in flight (from now on no such key starts), else the claimed
    /// view again (a plain renewal). Returns `None` if nothing changes.
    pub fn begin_publish(&self) -> Option<Vec<String>> {
        let me = self.identity.as_str();
        let mut st = self.state.lock();
        if st.claims.len() == 1 && st.claims.first() == Some(&st.target) {
            return None;
        }
        if st.in_flight.keys().any(|k| !st.target.owns(me, k)) {
            return None;
        }
        let view = st.target.clone();
        let members = view.members().to_vec();
        st.publishing = Some(view);
        Some(members)
    }

    /// Whether [`begin_publish`](Self::begin_publish) would now return a new view.
    pub fn publish_ready(&self) -> bool {
        let me = self.identity.as_str();
        let st = self.state.lock();
        let settled = st.claims.len() == 1 && st.claims.first() == Some(&st.target);
        let draining = st.in_flight.keys().any(|k| !st.target.owns(me, k));
        !settled && !draining
    }

    /// Until when our lease is current (None: never renewed, or lost).
    pub fn lease_deadline(&self) -> Option<Instant> {
        self.state.lock().deadline
    }

    /// The view a plain renewal writes (the one we claim; if a write's outcome is unknown, the
    /// latest).
    pub fn claimed_view(&self) -> Vec<String> {
        let st = self.state.lock();
        st.publishing
            .as_ref()
            .or(st.claims.last())
            .map(|v| v.members().to_vec())
            .unwrap_or_default()
    }

    /// Our record was written: the view being published (if any) is now the only one we
    /// claim, and our lease is current until `deadline` (the write's start plus the lease
    /// duration).
    pub fn publish_succeeded(&self, deadline: Instant) {
        let mut st = self.state.lock();
        if let Some(v) = st.publishing.take() {
            st.claims = vec![v];
            st.checked = None;
            st.epoch += 1;
        } else if st.claims.len() > 1 {
            // A renewal rewrote the latest claim: only that one is visible now.
            let last = st.claims.pop();
            st.claims = last.into_iter().collect();
        }
        if st.deadline.is_none() {
            st.epoch += 1;
        }
        st.deadline = Some(deadline);
    }

    /// The write failed. `maybe_applied`: its outcome is unknown (a timeout, a lost
    /// connection), so others may see either view until a later write succeeds.
    pub fn publish_failed(&self, maybe_applied: bool) {
        let mut st = self.state.lock();
        if let Some(v) = st.publishing.take() {
            if maybe_applied && !st.claims.contains(&v) {
                st.claims.push(v);
            }
        }
    }

    /// The others' records were listed (after our last successful write): the live ones and
    /// the views they published.
    pub fn listed(&self, others: Vec<(String, Vec<String>)>) {
        let known: Vec<(String, HashRing)> = self.state.lock().others.clone();
        let others: Vec<(String, HashRing)> = others
            .into_iter()
            .filter(|(id, _)| *id != self.identity)
            .map(|(id, mut view)| {
                view.sort();
                view.dedup();
                // Rings are rebuilt only for views that changed.
                let ring = match known.iter().find(|(k, r)| *k == id && r.members() == view) {
                    Some((_, r)) => r.clone(),
                    None => self.ring(&view),
                };
                (id, ring)
            })
            .collect();
        let mut st = self.state.lock();
        let checked = if st.claims.len() == 1 {
            st.claims.first().cloned()
        } else {
            None
        };
        if st.checked != checked || st.others != others {
            st.epoch += 1;
        }
        st.checked = checked;
        st.others = others;
    }

    /// A counter bumped whenever the set of keys we may start may have grown (the controller
    /// then enqueues its keys again).
    pub fn epoch(&self) -> u64 {
        self.state.lock().epoch
    }

    /// The hash ranges we own under the current target.
    pub fn owned_ranges(&self) -> Vec<ShardRange> {
        self.state.lock().target.ranges(&self.identity)
    }

    /// The members of the current target.
    pub fn target_members(&self) -> Vec<String> {
        self.state.lock().target.members().to_vec()
    }

    /// How many keys are in flight here.
    pub fn in_flight(&self) -> usize {
        self.state.lock().in_flight.values().sum()
    }
}
