//! [`InProcessMembers`]: member records in memory, for tests and replicas in one process.

use super::{MemberRecord, MemberStore, VersionedMember};
use crate::in_process::Unavailable;
use crate::lock::LockError;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::Mutex;
use kcache_core::ResourceVersion;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A [`MemberStore`] in memory, shared by every handle cloned from it or made with
/// [`handle`](Self::handle).
///
/// Versions come from one counter bumped by every write, so writes are real compare-and-swaps.
/// [`set_available(false)`](Self::set_available) cuts one handle off (its operations fail, as if
/// its replica lost its connection), which is how tests pause a replica past its lease.
///
/// # Examples
/// ```
/// use kcache_leaderelection::{InProcessMembers, MemberRecord, MemberStore};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// # futures::executor::block_on(async {
/// let store = InProcessMembers::new();
/// let record = MemberRecord {
///     holder_identity: "a".into(),
///     lease_duration: Duration::from_secs(15),
///     renew_time: UNIX_EPOCH,
///     view: vec![],
///     view_generation: 0,
/// };
/// store.create(&record).await?;
/// let other = store.handle(); // another replica's connection to the same records
/// assert_eq!(other.list().await?.len(), 1);
/// # Ok::<(), kcache_leaderelection::LockError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct InProcessMembers {
    state: Arc<Mutex<State>>,
    available: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    records: BTreeMap<String, (MemberRecord, u64)>,
    next_version: u64,
}

impl InProcessMembers {
    /// An empty group.
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                records: BTreeMap::new(),
                next_version: 1,
            })),
            available: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Another connection to the same records, with its own availability switch.
    pub fn handle(&self) -> Self {
        Self {
            state: self.state.clone(),
            available: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Makes this connection's operations (this handle and its clones) fail with
    /// [`Unavailable`], or work again.
    pub fn set_available(&self, available: bool) {
        self.available.store(available, Ordering::SeqCst);
    }

    /// The records as stored now, by identity.
    pub fn peek(&self) -> Vec<MemberRecord> {
        self.state
            .lock()
            .records
            .values()
            .map(|(r, _)| r.clone())
            .collect()
    }

    fn check(&self) -> Result<(), LockError> {
        if self.available.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(LockError::backend(Unavailable))
        }
    }

    fn write(
        &self,
        expect: Option<&ResourceVersion>,
        record: &MemberRecord,
    ) -> Result<ResourceVersion, LockError> {
        self.check()?;
        let mut st = self.state.lock();
        match (expect, st.records.get(&record.holder_identity)) {
            (None, Some(_)) => return Err(LockError::AlreadyExists),
            (Some(_), None) => return Err(LockError::NotFound),
            (Some(want), Some((_, have))) if want.as_str() != have.to_string() => {
                return Err(LockError::Conflict)
            }
            _ => {}
        }
        let version = st.next_version;
        st.next_version += 1;
        st.records
            .insert(record.holder_identity.clone(), (record.clone(), version));
        Ok(ResourceVersion::from(version.to_string()))
    }
}

impl Default for InProcessMembers {
    fn default() -> Self {
        Self::new()
    }
}

impl MemberStore for InProcessMembers {
    async fn list(&self) -> Result<Vec<VersionedMember>, LockError> {
        self.check()?;
        Ok(self
            .state
            .lock()
            .records
            .values()
            .map(|(record, v)| VersionedMember {
                record: record.clone(),
                version: ResourceVersion::from(v.to_string()),
            })
            .collect())
    }

    async fn create(&self, record: &MemberRecord) -> Result<ResourceVersion, LockError> {
        self.write(None, record)
    }

    async fn update(
        &self,
        version: &ResourceVersion,
        record: &MemberRecord,
    ) -> Result<ResourceVersion, LockError> {
        self.write(Some(version), record)
    }

    async fn delete(&self, identity: &str, version: &ResourceVersion) -> Result<(), LockError> {
        self.check()?;
        let mut st = self.state.lock();
        match st.records.get(identity) {
            None => Ok(()),
            Some((_, have)) if version.as_str() != have.to_string() => Err(LockError::Conflict),
            Some(_) => {
                st.records.remove(identity);
                Ok(())
            }
        }
    }

    fn describe(&self) -> String {
        "in-process member records".to_owned()
    }
}

impl fmt::Debug for InProcessMembers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessMembers")
            .field("records", &self.peek())
            .finish()
    }
}
