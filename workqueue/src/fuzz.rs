//! Model-checking support for proptest and cargo-fuzz (being written).
