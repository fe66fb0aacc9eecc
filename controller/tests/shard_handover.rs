//! Fake-clock tests of sharding's membership and handover: joins, leaves, lease expiry, a
//! replica paused past its lease, rebalances in a row, a replica that never lets go. Every step
//! checks the guarantee: a key claimed by a member whose lease is current is claimed by no other.

use futures::executor::block_on;
use kcache_controller::shard::{Shard, ShardClaim, ShardConfig, ShardGate};
use kcache_core::{Clock, FakeClock};
use kcache_leaderelection::InProcessMembers;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(15);
const RETRY: Duration = Duration::from_secs(2);

struct Member {
    shard: Shard<InProcessMembers>,
    store: InProcessMembers,
    gate: ShardGate,
}

/// Replicas over one in-process store, one fake clock, and the claims they hold.
struct Group {
    store: InProcessMembers,
    clock: FakeClock,
    members: HashMap<&'static str, Member>,
    claims: Vec<(&'static str, String, ShardClaim)>,
}

fn keys() -> Vec<String> {
    (0..300).map(|i| format!("demo/set-{i}")).collect()
}

impl Group {
    fn new() -> Self {
        Self {
            store: InProcessMembers::new(),
            clock: FakeClock::new(),
            members: HashMap::new(),
            claims: Vec::new(),
        }
    }

    fn join(&mut self, id: &'static str) {
        let store = self.store.handle();
        let config = ShardConfig::new(id)
            .lease_duration(LEASE)
            .renew_deadline(Duration::from_secs(10))
            .retry_period(RETRY)
            .clock(Arc::new(self.clock.clone()));
        let shard = Shard::new(store.clone(), config).expect("valid config");
        let gate = shard.gate();
        self.members.insert(id, Member { shard, store, gate });
    }

    fn tick(&self, id: &str) {
        block_on(self.members[id].shard.tick());
        self.check();
    }

    /// Ticks every member `rounds` times, the clock advancing a retry period each round.
    fn settle(&self, rounds: usize) {
        for _ in 0..rounds {
            let mut ids: Vec<_> = self.members.keys().copied().collect();
            ids.sort();
            for id in ids {
                self.tick(id);
            }
            self.clock.advance(RETRY);
        }
    }

    fn gate(&self, id: &str) -> &ShardGate {
        &self.members[id].gate
    }

    /// Tries to start `key` on `id`; keeps the claim if it started.
    fn start(&mut self, id: &'static str, key: &str) -> bool {
        let claim = self.gate(id).try_start(key);
        let started = claim.is_some();
        if let Some(c) = claim {
            self.claims.push((id, key.to_owned(), c));
        }
        self.check();
        started
    }

    fn finish(&mut self, id: &str, key: &str) {
        self.claims.retain(|(m, k, _)| !(*m == id && k == key));
    }

    /// The guarantee: no key is claimed by two members while the first one's lease is current.
    fn check(&self) {
        for (i, (m1, k1, _)) in self.claims.iter().enumerate() {
            for (m2, k2, _) in &self.claims[i + 1..] {
                if k1 == k2 && m1 != m2 {
                    let held = |m: &str| self.members.get(m).is_some_and(|mm| mm.gate.lease_held());
                    assert!(
                        !(held(m1) && held(m2)),
                        "{k1} claimed by {m1} and {m2}, both with current leases"
                    );
                }
            }
        }
    }

    /// Which member can start each key now (claims released again at once).
    fn startable(&self) -> HashMap<String, Vec<&'static str>> {
        let mut out: HashMap<String, Vec<&'static str>> = HashMap::new();
        for k in keys() {
            for (id, m) in &self.members {
                if let Some(c) = m.gate.try_start(&k) {
                    out.entry(k.clone()).or_default().push(id);
                    drop(c);
                }
            }
        }
        out
    }

    /// Every key startable by exactly one member, the one among `ids` that owns it.
    fn assert_converged(&self, ids: &[&str]) {
        let startable = self.startable();
        for k in keys() {
            let by = startable.get(&k).cloned().unwrap_or_default();
            assert_eq!(by.len(), 1, "{k} startable by {by:?}");
            assert!(ids.contains(&by[0]));
            assert!(self.gate(by[0]).owns(&k));
        }
    }
}

#[test]
fn a_lone_member_owns_every_key_after_its_first_tick() {
    let mut g = Group::new();
    g.join("a");
    assert!(!g.start("a", "demo/set-0"), "nothing before joining");
    g.settle(1);
    g.assert_converged(&["a"]);
    let stats = g.gate("a").stats();
    assert_eq!(stats.members, ["a"]);
    assert_eq!(stats.owned_ranges.len(), 1, "the whole ring");
}

#[test]
fn a_join_hands_over_a_moving_key_only_after_its_reconcile_finished() {
    let mut g = Group::new();
    g.join("a");
    g.settle(1);
    // b's share, as it will be.
    let two = kcache_controller::shard::HashRing::new(
        ["a", "b"],
        kcache_controller::shard::DEFAULT_VNODES,
    );
    let moving = keys().into_iter().find(|k| two.owns("b", k)).unwrap();
    let staying = keys().into_iter().find(|k| two.owns("a", k)).unwrap();
    assert!(g.start("a", &moving), "a reconciles the key b will own");

    g.join("b");
    for _ in 0..5 {
        g.settle(1);
        assert!(
            !g.start("b", &moving),
            "b must wait for a's reconcile of {moving}"
        );
        // A key that does not move keeps being processed during the rebalance.
        assert!(g.start("a", &staying));
        g.finish("a", &staying);
    }
    assert!(g.gate("a").stats().lease_held && g.gate("b").stats().lease_held);
    assert_eq!(
        g.gate("a").stats().views_published,
        1,
        "a cannot publish its new view yet"
    );

    g.finish("a", &moving);
    assert!(!g.start("a", &moving), "a stopped taking the moving key");
    g.settle(2);
    assert!(g.start("b", &moving), "b takes it once a let go");
    g.finish("b", &moving);
    g.assert_converged(&["a", "b"]);
    let moved = keys().iter().filter(|k| g.gate("b").owns(k)).count();
    assert!(
        (90..=210).contains(&moved),
        "about half the keys moved: {moved}"
    );
    assert!(g.gate("a").stats().rebalances >= 1);
}

#[test]
fn a_graceful_leave_hands_its_keys_over_at_the_next_tick() {
    let mut g = Group::new();
    g.join("a");
    g.join("b");
    g.settle(3);
    g.assert_converged(&["a", "b"]);
    let key = keys().into_iter().find(|k| g.gate("b").owns(k)).unwrap();
    let claim = g.gate("b").try_start(&key).expect("b reconciles its key");
    // b leaves while reconciling: the leave waits for that reconcile (up to a lease).
    let leaving = std::thread::scope(|s| {
        let b = &g.members["b"].shard;
        let h = s.spawn(|| block_on(b.leave()));
        // Wait until the leave has taken b out of its own target.
        while g.gate("b").owns(&key) {
            std::thread::yield_now();
        }
        assert!(
            g.gate("a").try_start(&key).is_none(),
            "b's reconcile is still in flight"
        );
        assert!(!h.is_finished(), "the leave waits for it");
        drop(claim);
        h.join().is_ok()
    });
    assert!(leaving);
    assert_eq!(g.store.peek().len(), 1, "b deleted its record");
    g.members.remove("b");
    g.settle(1);
    assert!(g.start("a", &key), "no lease wait after a graceful leave");
    g.claims.clear();
    g.assert_converged(&["a"]);
}

#[test]
fn a_dead_members_keys_move_only_after_its_lease_expired() {
    let mut g = Group::new();
    g.join("a");
    g.join("b");
    g.settle(3);
    let key = keys().into_iter().find(|k| g.gate("b").owns(k)).unwrap();
    // b dies (no more ticks, no leave).
    let dead = g.members.remove("b").unwrap();
    let died = g.clock.now();
    while g.clock.now() < died + LEASE - RETRY {
        g.settle(1);
        assert!(!g.start("a", &key), "b's lease has not expired yet");
    }
    g.settle(3);
    assert!(g.clock.now() - died <= LEASE + 2 * RETRY + RETRY);
    assert!(g.start("a", &key), "a takes b's key after b's lease");
    g.claims.clear();
    g.assert_converged(&["a"]);
    drop(dead);
}

#[test]
fn ticks_on_the_run_schedule_move_a_dead_members_keys_at_its_lease_expiry() {
    let mut g = Group::new();
    g.join("a");
    g.join("b");
    g.settle(3);
    let key = keys().into_iter().find(|k| g.gate("b").owns(k)).unwrap();
    let dead = g.members.remove("b").unwrap();
    // a's next tick sees b's last write; a lease after that b is gone. `run` sleeps
    // `next_tick_in` between ticks: the retry period, cut short at b's expiry (15 s is not a
    // multiple of the 2 s retry period, so a plain retry schedule would be a second late).
    g.tick("a");
    let seen = g.clock.now();
    while g.gate("a").stats().members != ["a"] {
        let pause = block_on(g.members["a"].shard.next_tick_in());
        assert!(pause > Duration::ZERO && pause <= RETRY, "{pause:?}");
        g.clock.advance(pause);
        assert!(g.clock.now() <= seen + LEASE, "b still live past its lease");
        g.tick("a");
    }
    assert_eq!(
        g.clock.now() - seen,
        LEASE,
        "b's keys moved at its lease expiry"
    );
    assert!(g.start("a", &key), "a takes b's key in the same tick");
    g.claims.clear();
    g.assert_converged(&["a"]);
    drop(dead);
}

#[test]
fn a_member_paused_past_its_lease_starts_nothing_when_it_resumes_until_it_rejoined() {
    let mut g = Group::new();
    g.join("a");
    g.join("b");
    g.settle(3);
    let key = keys().into_iter().find(|k| g.gate("b").owns(k)).unwrap();
    // b is paused: its store is unreachable and it does not tick.
    g.members["b"].store.set_available(false);
    let paused = g.clock.now();
    while g.clock.now() < paused + LEASE + 2 * RETRY {
        let ids = ["a"];
        for id in ids {
            g.tick(id);
        }
        g.clock.advance(RETRY);
    }
    assert!(g.start("a", &key), "a took b's key after the lease");
    // b resumes: it must not start the key, its lease is over on its own clock.
    assert!(!g.gate("b").stats().lease_held);
    assert!(!g.start("b", &key));
    g.members["b"].store.set_available(true);
    g.tick("b");
    assert!(!g.start("b", &key), "a still reconciles it");
    g.settle(3);
    assert!(!g.start("b", &key), "a's reconcile still holds it back");
    g.finish("a", &key);
    g.settle(3);
    g.assert_converged(&["a", "b"]);
}

#[test]
fn two_rebalances_in_a_row_keep_every_key_to_one_member_and_converge() {
    let mut g = Group::new();
    g.join("a");
    g.settle(1);
    // a keeps a reconcile of every 10th key in flight across both joins.
    let busy: Vec<String> = keys().into_iter().step_by(10).collect();
    for k in &busy {
        assert!(g.start("a", k));
    }
    g.join("b");
    g.tick("b");
    g.tick("a");
    g.join("c");
    for _ in 0..4 {
        g.settle(1);
        for k in keys() {
            for id in ["b", "c"] {
                if g.start(id, &k) {
                    g.finish(id, &k);
                }
            }
        }
    }
    for k in &busy {
        g.finish("a", k);
    }
    g.settle(4);
    g.assert_converged(&["a", "b", "c"]);
    assert!(g.gate("a").stats().rebalances >= 2);
}

#[test]
fn keys_of_a_member_that_never_lets_go_move_only_once_it_stops_renewing() {
    let mut g = Group::new();
    g.join("a");
    g.settle(1);
    let two = kcache_controller::shard::HashRing::new(
        ["a", "b"],
        kcache_controller::shard::DEFAULT_VNODES,
    );
    let moving = keys().into_iter().find(|k| two.owns("b", k)).unwrap();
    assert!(g.start("a", &moving), "a's reconcile of it never finishes");
    g.join("b");
    for _ in 0..20 {
        g.settle(1);
        assert!(!g.start("b", &moving), "a renews and never acknowledged");
    }
    // a's connection goes: it stops renewing, b takes over after a's lease.
    g.members["a"].store.set_available(false);
    g.settle((LEASE.as_secs() / RETRY.as_secs()) as usize + 2);
    assert!(g.start("b", &moving));
}

#[test]
fn a_randomized_schedule_never_lets_two_current_members_claim_one_key() {
    for seed in 1..=40 {
        random_schedule(seed);
    }
}

/// A small deterministic generator (xorshift) drives ticks, starts, finishes, clock steps,
/// crashes and lost connections of three members.
fn random_schedule(seed: u64) {
    let mut seed: u64 = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let ids = ["a", "b", "c"];
    let mut g = Group::new();
    for id in ids {
        g.join(id);
    }
    let ks: Vec<String> = keys().into_iter().take(8).collect();
    let mut started = 0;
    for _ in 0..1500 {
        let id = ids[next(3) as usize];
        match next(12) {
            0..=2 => g.tick(id),
            3..=5 => {
                let k = &ks[next(ks.len() as u64) as usize];
                started += usize::from(g.start(id, k));
            }
            6 | 7 => {
                if !g.claims.is_empty() {
                    let i = next(g.claims.len() as u64) as usize;
                    drop(g.claims.remove(i));
                }
            }
            8 => g.clock.advance(Duration::from_millis(500 * (1 + next(6)))),
            9 => {
                // A crash and a restart under the same identity: its reconciles end with it.
                g.claims.retain(|(m, _, _)| *m != id);
                g.members.remove(id);
                g.join(id);
            }
            _ => {
                let s = &g.members[id].store;
                s.set_available(next(4) != 0);
            }
        }
    }
    assert!(started > 50, "the schedule reconciled keys: {started}");
}
