//! Helpers shared by the snapshot tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system's temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("kcache-snap-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pod {
    pub name: String,
    pub node: Option<String>,
    pub generation: u64,
}

pub fn pods(n: u64, generation: u64) -> Vec<Pod> {
    (0..n)
        .map(|i| Pod {
            name: format!("pod-{i}"),
            node: (i % 3 != 0).then(|| format!("node-{}", i % 7)),
            generation,
        })
        .collect()
}
