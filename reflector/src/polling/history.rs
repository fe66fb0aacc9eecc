//! The recent polls a watch may resume from, each under the resource version it was published as.

use super::snapshot::Snapshot;
use kcache_core::ResourceVersion;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// How many published polls are kept. A reflector resumes from the newest one; a few more let
/// several reflectors share one poller without forcing each other to relist.
pub(crate) const KEPT_POLLS: usize = 8;

/// One published poll.
pub(crate) struct Published<T> {
    pub(crate) rv: ResourceVersion,
    pub(crate) polled_at: Instant,
    pub(crate) snapshot: Arc<Snapshot<T>>,
}

impl<T> Clone for Published<T> {
    fn clone(&self) -> Self {
        Self {
            rv: self.rv.clone(),
            polled_at: self.polled_at,
            snapshot: self.snapshot.clone(),
        }
    }
}

/// The last [`KEPT_POLLS`] published polls, oldest first.
pub(crate) struct History<T> {
    next: u64,
    polls: VecDeque<Published<T>>,
}

impl<T> History<T> {
    pub(crate) fn new() -> Self {
        Self {
            next: 1,
            polls: VecDeque::with_capacity(KEPT_POLLS),
        }
    }

    /// The newest poll, if any.
    pub(crate) fn latest(&self) -> Option<Published<T>> {
        self.polls.back().cloned()
    }

    /// Publishes `snapshot` under a new resource version (`poll-N`) and returns that version.
    pub(crate) fn publish(
        &mut self,
        snapshot: Arc<Snapshot<T>>,
        polled_at: Instant,
    ) -> ResourceVersion {
        let rv = ResourceVersion::new(format!("poll-{}", self.next));
        self.next += 1;
        if self.polls.len() == KEPT_POLLS {
            self.polls.pop_front();
        }
        self.polls.push_back(Published {
            rv: rv.clone(),
            polled_at,
            snapshot,
        });
        rv
    }

    /// The poll published as `rv`, if it is still kept.
    pub(crate) fn find(&self, rv: &ResourceVersion) -> Option<Published<T>> {
        self.polls.iter().find(|p| p.rv == *rv).cloned()
    }

    /// Records that the poll published as `rv` was confirmed unchanged at `now` (a watch resuming
    /// from it waits a full period from then).
    pub(crate) fn touch(&mut self, rv: &ResourceVersion, now: Instant) {
        if let Some(p) = self.polls.iter_mut().find(|p| p.rv == *rv) {
            p.polled_at = p.polled_at.max(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcache_core::{Clock, FakeClock};

    #[test]
    fn only_the_last_kept_polls_can_be_found() {
        let now = FakeClock::new().now();
        let mut h: History<u32> = History::new();
        let rvs: Vec<_> = (0..KEPT_POLLS + 2)
            .map(|_| h.publish(Arc::new(Snapshot::empty()), now))
            .collect();
        assert_eq!(rvs[0].as_str(), "poll-1");
        assert!(h.find(&rvs[0]).is_none());
        assert!(h.find(&rvs[1]).is_none());
        assert!(h.find(&rvs[2]).is_some());
        assert_eq!(h.latest().map(|p| p.rv), rvs.last().cloned());
        assert!(h.find(&ResourceVersion::from("7")).is_none());
    }
}
