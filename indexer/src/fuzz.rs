//! Placeholder during bring-up.
