//! kcache-memory (being written).
