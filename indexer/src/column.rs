//! `Column`: a growable array indexed by object id that wastes little memory when large.
//!
//! A `Vec` grown one element at a time keeps up to a growth step of spare capacity (a fifth of it
//! just after growing by a quarter) and copies every element at each growth. A column stores its
//! elements in chunks of [`CHUNK`]: the first chunk grows like such a `Vec` (so a small store stays
//! small), every later chunk is allocated at its full size once and never moves. A large column wastes less than one chunk and never copies its
//! elements; a lookup costs one more indirection (into a short list of chunks).

/// Elements per chunk (a power of two).
const CHUNK_BITS: u32 = 11;
pub(crate) const CHUNK: usize = 1 << CHUNK_BITS;

/// A growable array in chunks (see the module doc).
#[derive(Debug)]
pub(crate) struct Column<X> {
    chunks: Vec<Vec<X>>,
    len: usize,
}

impl<X> Default for Column<X> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<X> Column<X> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `x` at index `len()`.
    pub(crate) fn push(&mut self, x: X) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => {
                if chunk.len() == chunk.capacity() {
                    // Only the first chunk grows (by a quarter), up to CHUNK.
                    let step = (chunk.capacity() / 4).max(16);
                    chunk.reserve_exact(step.min(CHUNK - chunk.len()));
                }
                chunk.push(x);
            }
            _ => {
                let cap = if self.chunks.is_empty() { 16 } else { CHUNK };
                let mut chunk = Vec::with_capacity(cap);
                chunk.push(x);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Appends `fill()` until the column holds at least `len` elements.
    pub(crate) fn extend_to(&mut self, len: usize, mut fill: impl FnMut() -> X) {
        while self.len < len {
            self.push(fill());
        }
    }

    pub(crate) fn get(&self, i: usize) -> Option<&X> {
        self.chunks.get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut X> {
        self.chunks
            .get_mut(i >> CHUNK_BITS)?
            .get_mut(i & (CHUNK - 1))
    }

    /// Every element, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &X> + '_ {
        self.chunks.iter().flatten()
    }

    /// The elements' bytes plus the spare capacity's (for tests of the memory bound).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_keeps_its_elements_in_order_across_chunks() {
        let mut col = Column::default();
        let n = 3 * CHUNK + 5;
        for i in 0..n {
            col.push(i);
        }
        assert_eq!(col.len(), n);
        assert!(col.iter().copied().eq(0..n));
        assert!((0..n).all(|i| col.get(i) == Some(&i)));
        assert_eq!(col.get(n), None);
        *col.get_mut(CHUNK).unwrap() = 7;
        assert_eq!(col.get(CHUNK), Some(&7));
        assert_eq!(col.get_mut(n), None);
    }

    #[test]
    fn a_large_column_wastes_less_than_a_chunk_and_a_small_one_stays_small() {
        let mut col = Column::default();
        col.push(1u32);
        assert!(col.capacity() <= 16);
        for n in [CHUNK - 1, CHUNK, CHUNK + 1, 48_828, 100_000] {
            let mut col = Column::default();
            col.extend_to(n, || 0u32);
            assert_eq!(col.len(), n);
            assert!(col.capacity() - n < CHUNK, "{n}: {}", col.capacity());
            assert!(col.chunks.iter().all(|c| c.capacity() <= CHUNK));
        }
    }
}
