//! [`HashRing`]: a consistent hash ring with virtual nodes over the live members, and the
//! 64-bit hash ranges each member owns.

use std::fmt;

/// FNV-1a, 64-bit (the hash KEP-5866's `shardRange` uses).
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// A bijective 64-bit mix (splitmix64's finalizer). FNV-1a alone places strings that differ in
/// their last character next to each other (`set-1`, `set-2`, … land within 2^48 of each other),
/// so keys and virtual nodes go through it before they are placed on the ring.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A half-open range `[start, end)` of ring positions; `end == None` stands for 2^64 (the top of
/// the ring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShardRange {
    /// The first hash in the range.
    pub start: u64,
    /// One past the last hash, or `None` for a range reaching the top (2^64).
    pub end: Option<u64>,
}

impl ShardRange {
    /// Whether `hash` is in the range.
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.start && self.end.is_none_or(|e| hash < e)
    }

    /// The number of hashes in the range (2^64 for the whole ring).
    pub fn len(&self) -> u128 {
        u128::from(self.end.map_or(u64::MAX, |e| e.wrapping_sub(1))) + 1 - u128::from(self.start)
    }

    /// Whether the range holds no hash (never, for ranges a ring gives).
    pub fn is_empty(&self) -> bool {
        self.end.is_some_and(|e| e <= self.start)
    }
}

impl fmt::Display for ShardRange {
    /// `[0x…, 0x…)` with 16 hex digits (`0x10000000000000000` for the top).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            Some(e) => write!(f, "[{:#018x}, {e:#018x})", self.start),
            None => write!(f, "[{:#018x}, 0x10000000000000000)", self.start),
        }
    }
}

/// The position of `key` on the ring: its [`fnv1a_64`] hash, mixed.
pub fn key_position(key: &str) -> u64 {
    mix(fnv1a_64(key.as_bytes()))
}

/// A consistent hash ring: each member placed at `vnodes` pseudo-random points, a key owned by
/// the member of the first point at or after the key's [`key_position`] (wrapping around).
///
/// Adding or removing one of N members moves only the keys of the arcs it gains or loses, about
/// 1/N of them; every other key keeps its owner. Every replica builds the same ring from the same
/// member set (the member order does not matter).
#[derive(Clone, PartialEq, Eq)]
pub struct HashRing {
    members: Vec<String>,
    /// (point, index into `members`), sorted by point.
    points: Vec<(u64, usize)>,
}

/// Virtual nodes per member unless configured: enough for each of a handful of members to own
/// within about ±20 % of its fair share.
pub const DEFAULT_VNODES: usize = 128;

impl HashRing {
    /// The ring of `members` (deduplicated; any order) with `vnodes` points each (at least 1).
    pub fn new<I, S>(members: I, vnodes: usize) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort();
        members.dedup();
        let vnodes = vnodes.max(1);
        let mut points = Vec::with_capacity(members.len() * vnodes);
        for (i, m) in members.iter().enumerate() {
            let base = fnv1a_64(m.as_bytes());
            for v in 0..vnodes as u64 {
                points.push((mix(base ^ mix(v.wrapping_add(1))), i));
            }
        }
        // Ties (astronomically rare) are broken by member name, so every replica agrees.
        points.sort_unstable();
        Self { members, points }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// Whether the ring has no member (then nobody owns anything).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The owner of a ring position, `None` on an empty ring.
    pub fn owner_of_hash(&self, hash: u64) -> Option<&str> {
        let i = self.points.partition_point(|(p, _)| *p < hash);
        let (_, m) = self.points.get(i).or_else(|| self.points.first())?;
        self.members.get(*m).map(String::as_str)
    }

    /// The owner of `key` (placed at [`key_position`]), `None` on an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.owner_of_hash(key_position(key))
    }

    /// Whether `member` owns `key`.
    pub fn owns(&self, member: &str, key: &str) -> bool {
        self.owner(key) == Some(member)
    }

    /// The ring positions `member` owns, sorted and merged (adjacent arcs joined): the whole ring
    /// when it is the only member, nothing when it is not a member.
    pub fn ranges(&self, member: &str) -> Vec<ShardRange> {
        let Some(idx) = self.members.iter().position(|m| m == member) else {
            return Vec::new();
        };
        let mut out: Vec<ShardRange> = Vec::new();
        // Point i owns (previous point, point i]; as half-open: [prev + 1, point + 1).
        let n = self.points.len();
        for (i, &(p, m)) in self.points.iter().enumerate() {
            if m != idx {
                continue;
            }
            let end = p.checked_add(1);
            if i == 0 {
                // The first point also owns the wrap-around arc above the last point.
                out.push(ShardRange { start: 0, end });
                if let Some(s) = self.points[n - 1].0.checked_add(1) {
                    out.push(ShardRange {
                        start: s,
                        end: None,
                    });
                }
            } else {
                out.push(ShardRange {
                    start: self.points[i - 1].0.wrapping_add(1),
                    end,
                });
            }
        }
        out.retain(|r| !r.is_empty());
        out.sort();
        // Merge again after sorting (the wrap-around arc may touch its neighbour).
        let mut merged: Vec<ShardRange> = Vec::with_capacity(out.len());
        for r in out {
            match merged.last_mut() {
                Some(last) if last.end == Some(r.start) => last.end = r.end,
                _ => merged.push(r),
            }
        }
        merged
    }
}

impl fmt::Debug for HashRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashRing")
            .field("members", &self.members)
            .field("points", &self.points.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("demo/set-{i}")).collect()
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn every_replica_builds_the_same_ring_whatever_the_member_order() {
        let a = HashRing::new(["r1", "r2", "r3"], 64);
        let b = HashRing::new(["r3", "r1", "r2", "r1"], 64);
        assert_eq!(a, b);
        for k in keys(200) {
            assert_eq!(a.owner(&k), b.owner(&k));
        }
    }

    #[test]
    fn members_own_about_a_fair_share() {
        let ring = HashRing::new(["r1", "r2", "r3"], DEFAULT_VNODES);
        let ks = keys(3000);
        for m in ring.members() {
            let owned = ks.iter().filter(|k| ring.owns(m, k)).count();
            assert!((700..=1300).contains(&owned), "{m} owns {owned} of 3000");
        }
    }

    #[test]
    fn a_join_or_a_leave_moves_about_one_in_n_keys_and_only_to_or_from_that_member() {
        let ks = keys(4000);
        let three = HashRing::new(["r1", "r2", "r3"], DEFAULT_VNODES);
        let four = HashRing::new(["r1", "r2", "r3", "r4"], DEFAULT_VNODES);
        let moved: Vec<&String> = ks
            .iter()
            .filter(|k| three.owner(k) != four.owner(k))
            .collect();
        // Ideal: 1/4 of the keys move, all of them to r4.
        assert!((600..=1400).contains(&moved.len()), "{} moved", moved.len());
        assert!(moved.iter().all(|k| four.owner(k) == Some("r4")));
        // A leave: r2's keys, and only those, move.
        let without_r2 = HashRing::new(["r1", "r3"], DEFAULT_VNODES);
        for k in &ks {
            if three.owner(k) != Some("r2") {
                assert_eq!(three.owner(k), without_r2.owner(k), "{k} moved");
            }
        }
    }

    #[test]
    fn the_ranges_of_the_members_partition_the_ring_and_agree_with_owner() {
        let ring = HashRing::new(["r1", "r2", "r3"], 16);
        let mut all: Vec<(ShardRange, &str)> = Vec::new();
        for m in ring.members() {
            for r in ring.ranges(m) {
                all.push((r, m));
            }
        }
        all.sort();
        assert_eq!(all[0].0.start, 0);
        assert_eq!(all.last().map(|(r, _)| r.end), Some(None));
        let total: u128 = all.iter().map(|(r, _)| r.len()).sum();
        assert_eq!(total, 1u128 << 64);
        for w in all.windows(2) {
            assert_eq!(w[0].0.end, Some(w[1].0.start), "no gap, no overlap");
        }
        for k in keys(500) {
            let h = key_position(&k);
            let (_, m) = all.iter().find(|(r, _)| r.contains(h)).expect("covered");
            assert_eq!(ring.owner(&k), Some(*m));
            // The boundaries themselves.
        }
        for (r, m) in &all {
            assert_eq!(ring.owner_of_hash(r.start), Some(*m));
            if let Some(e) = r.end {
                assert_eq!(ring.owner_of_hash(e - 1), Some(*m));
            }
        }
        assert_eq!(
            HashRing::new(["solo"], 8).ranges("solo"),
            [ShardRange {
                start: 0,
                end: None
            }]
        );
        assert!(ring.ranges("stranger").is_empty());
        assert_eq!(HashRing::new(Vec::<String>::new(), 8).owner("k"), None);
    }
}
