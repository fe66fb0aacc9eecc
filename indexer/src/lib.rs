//! kcache-indexer (being written).
