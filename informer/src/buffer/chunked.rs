//! `ChunkedQueue`: an ordered handler buffer that grows by whole chunks.
//!
//! A `VecDeque` doubles when full, copying every pending notification; with a slow handler and a
//! fast source that copy (hundreds of megabytes at a million pending notifications) ran on the
//! informer's thread, inside the push. Chunks of `CHUNK` never move once filled: a push costs at
//! most a chunk allocation, and a drained chunk is freed (one is kept for reuse), so a buffer that
//! emptied does not hold the memory of its peak.

use std::collections::VecDeque;

/// Notifications per chunk.
const CHUNK: usize = 256;

/// A FIFO queue stored as a queue of fixed-capacity chunks.
#[derive(Debug)]
pub(crate) struct ChunkedQueue<T> {
    chunks: VecDeque<VecDeque<T>>,
    len: usize,
    spare: Option<VecDeque<T>>,
}

impl<T> Default for ChunkedQueue<T> {
    fn default() -> Self {
        Self {
            chunks: VecDeque::new(),
            len: 0,
            spare: None,
        }
    }
}

impl<T> ChunkedQueue<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push_back(&mut self, item: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => last.push_back(item),
            _ => {
                let mut chunk = self
                    .spare
                    .take()
                    .unwrap_or_else(|| VecDeque::with_capacity(CHUNK));
                chunk.push_back(item);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let first = self.chunks.front_mut()?;
        let item = first.pop_front();
        if first.is_empty() {
            if let Some(chunk) = self.chunks.pop_front() {
                if self.spare.is_none() {
                    self.spare = Some(chunk);
                }
            }
        }
        if item.is_some() {
            self.len -= 1;
        }
        item
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::{ChunkedQueue, CHUNK};
    use std::collections::VecDeque;

    #[test]
    fn behaves_like_a_vecdeque_across_chunk_boundaries() {
        let mut q = ChunkedQueue::default();
        let mut model = VecDeque::new();
        let mut next = 0u32;
        // Bursts that cross chunk boundaries, interleaved with partial drains to empty and back.
        for (push, pop) in [
            (CHUNK + 3, 2),
            (1, CHUNK),
            (3 * CHUNK, 5),
            (0, 4 * CHUNK),
            (7, 7),
        ] {
            for _ in 0..push {
                q.push_back(next);
                model.push_back(next);
                next += 1;
            }
            for _ in 0..pop {
                assert_eq!(q.pop_front(), model.pop_front());
            }
            assert_eq!(q.len(), model.len());
            assert!(q.iter().eq(model.iter()));
        }
        assert_eq!(q.pop_front(), None);
        assert_eq!(q.len(), 0);
        q.push_back(1);
        q.push_back(2);
        q.clear();
        assert_eq!((q.len(), q.pop_front()), (0, None));
    }

    #[test]
    fn drained_chunks_are_freed_but_one_is_kept() {
        let mut q = ChunkedQueue::default();
        for i in 0..10 * CHUNK {
            q.push_back(i);
        }
        assert_eq!(q.chunks.len(), 10);
        while q.pop_front().is_some() {}
        assert!(q.chunks.is_empty());
        assert!(q.spare.is_some());
    }
}
