//! The crate's error types: one per kind of operation.

use kcache_core::{KeyError, ObjectKey};

/// The error an index function returns: any error, boxed.
///
/// Index functions should be total; when one fails anyway, the store reports it as an
/// [`IndexFuncError`] and leaves itself unchanged (client-go panics instead).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A query named an index the store does not have (client-go's "Index with name X does not
/// exist").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("index with name {name:?} does not exist")]
pub struct UnknownIndexError {
    /// The name that was asked for.
    pub name: String,
}

/// An index function failed on an object. The write that called it changed nothing.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(.index, .key.as_ref()))]
pub struct IndexFuncError {
    /// The index whose function failed.
    pub index: String,
    /// The key of the object it failed on (`None` for the probe object of a query).
    pub key: Option<ObjectKey>,
    /// What the index function returned.
    #[source]
    pub source: BoxError,
}

fn describe(index: &str, key: Option<&ObjectKey>) -> String {
    match key {
        Some(key) => format!("index function {index:?} failed on the object with key {key:?}"),
        None => format!("index function {index:?} failed on the probe object"),
    }
}

/// Why [`ThreadSafeStore::index`](crate::ThreadSafeStore::index) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// No index with that name.
    #[error(transparent)]
    UnknownIndex(#[from] UnknownIndexError),
    /// The index function failed on the probe object.
    #[error(transparent)]
    IndexFunc(#[from] IndexFuncError),
}

/// Why [`add_indexers`](crate::ThreadSafeStore::add_indexers) installed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddIndexersError {
    /// Some of the new names are already installed (client-go's "indexer conflict").
    #[error("indexer conflict: {names:?} already exist")]
    Conflict {
        /// The names that already exist, sorted.
        names: Vec<String>,
    },
    /// A new index function failed on an object already in the store.
    #[error(transparent)]
    IndexFunc(#[from] IndexFuncError),
}

/// Why a write to an [`Indexer`](crate::Indexer) changed nothing (or, for
/// [`Refused`](Self::Refused), left some listed objects out).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The key accessor could not compute the object's key (client-go's `KeyError`).
    #[error("cannot compute the object's key")]
    Key(#[from] KeyError),
    /// An index function failed on the object.
    #[error(transparent)]
    IndexFunc(#[from] IndexFuncError),
    /// [`replace_skipping_refused`](crate::Indexer::replace_skipping_refused) stored every
    /// listed object but these (their key or an index function failed): unlike the other
    /// variants, the store *did* change.
    #[error("the replace left out {} listed object(s) it could not store", .refused.len())]
    Refused {
        /// Why each left-out object was refused.
        refused: Vec<StoreError>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn every_public_error_is_send_sync_static() {
        assert_error::<UnknownIndexError>();
        assert_error::<IndexFuncError>();
        assert_error::<IndexError>();
        assert_error::<AddIndexersError>();
        assert_error::<StoreError>();
    }

    #[test]
    fn index_func_error_names_the_index_and_the_key() {
        let e = IndexFuncError {
            index: "by-owner".into(),
            key: Some(ObjectKey::new("ns/a").unwrap()),
            source: "no owner".into(),
        };
        let text = e.to_string();
        assert!(text.contains("by-owner") && text.contains("ns/a"), "{text}");
        assert_eq!(
            std::error::Error::source(&e).unwrap().to_string(),
            "no owner"
        );
    }

    #[test]
    fn store_error_keeps_the_key_error_as_its_source() {
        let e = StoreError::from(KeyError::MissingName);
        assert_eq!(
            std::error::Error::source(&e).unwrap().to_string(),
            KeyError::MissingName.to_string()
        );
    }
}
