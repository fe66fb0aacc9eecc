//! Slot ids: the store numbers its objects, and the indexes name objects by that number.

/// A stored object's slot number (also the width of an index's value ids).
pub(crate) type Id = u32;

/// `n` as a slot or value number.
pub(crate) fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("kcache-indexer: more than 4 billion objects or values")
}
