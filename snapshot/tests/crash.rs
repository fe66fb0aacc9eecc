//! A process killed with SIGKILL at random moments while it writes snapshots in a loop never
//! leaves a snapshot that loads wrong: after each kill the file is the last complete snapshot
//! (objects all of the generation its header names, as many as that generation wrote), or,
//! before the first write completed, absent.
//!
//! The writer is this test binary itself, re-run with `--ignored --exact crash_writer_child`
//! and the target path in `KCACHE_SNAPSHOT_CRASH_PATH`.

mod common;

use common::{Pod, TempDir};
use kcache_core::{Clock, ResourceVersion, SystemClock};
use kcache_snapshot::{LoadError, PostcardCodec, SnapshotFile};
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const PATH_VAR: &str = "KCACHE_SNAPSHOT_CRASH_PATH";
const ROUNDS: u32 = 60;

fn codec() -> PostcardCodec<Pod> {
    PostcardCodec::named("CrashPod/v1")
}

/// How many objects generation `g` writes: it varies, so a file mixing two generations would
/// also disagree with its header's count.
fn count_for(generation: u64) -> u64 {
    1500 + (generation * 7919) % 1000
}

fn generation_objects(generation: u64) -> Vec<Pod> {
    (0..count_for(generation))
        .map(|i| Pod {
            name: format!("pod-{i:05}"),
            node: Some(format!("node-{}-{}", generation, i % 13)),
            generation,
        })
        .collect()
}

#[test]
#[ignore = "the writer process of a_writer_killed_at_random_moments_never_leaves_a_bad_snapshot"]
fn crash_writer_child() {
    let Some(path) = std::env::var_os(PATH_VAR) else {
        return;
    };
    let file = SnapshotFile::new(path, codec());
    // Continue after the last complete generation, so generations only grow across kills.
    let mut generation = match file.load() {
        Ok(s) => s.header.resource_version.as_str().parse::<u64>().unwrap() + 1,
        Err(_) => 1,
    };
    loop {
        let objects = generation_objects(generation);
        file.write(
            &ResourceVersion::new(generation.to_string()),
            objects.iter(),
        )
        .unwrap();
        generation += 1;
    }
}

/// A small xorshift generator, seeded randomly per run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn check(path: &Path) -> Result<Option<u64>, String> {
    match SnapshotFile::new(path, codec()).load() {
        Err(LoadError::Missing) => Ok(None),
        Err(e) => Err(format!("snapshot refused after a kill: {e}")),
        Ok(s) => {
            let g: u64 = s
                .header
                .resource_version
                .as_str()
                .parse()
                .map_err(|e| format!("{e}"))?;
            if s.objects != generation_objects(g) {
                return Err(format!("generation {g}: objects are not that generation's"));
            }
            Ok(Some(g))
        }
    }
}

#[test]
fn a_writer_killed_at_random_moments_never_leaves_a_bad_snapshot() {
    let dir = TempDir::new("crash");
    let path = dir.0.join("pods.snap");
    let temp = dir.0.join(".pods.snap.tmp");
    let exe = std::env::current_exe().unwrap();
    let clock = SystemClock;
    let mut rng = Rng(RandomState::new().hash_one(0u8) | 1);

    let (mut killed_mid_write, mut accepted, mut last) = (0, 0, None);
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "crash_writer_child",
                "--test-threads=1",
            ])
            .env(PATH_VAR, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        clock.sleep(Duration::from_micros(2_000 + rng.below(60_000)));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(
            status.code().is_none(),
            "round {round}: the writer exited by itself: {status}"
        );
        if temp.exists() {
            killed_mid_write += 1;
        }
        match check(&path) {
            Ok(Some(g)) => {
                accepted += 1;
                assert!(
                    last <= Some(g),
                    "round {round}: generation went back from {last:?} to {g}"
                );
                last = Some(g);
            }
            Ok(None) => assert!(last.is_none(), "round {round}: the snapshot disappeared"),
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    eprintln!(
        "{ROUNDS} writers killed ({killed_mid_write} with a write in progress), \
         {accepted} snapshots accepted after a kill, all valid; last generation {last:?}"
    );
    assert!(
        accepted > ROUNDS / 2,
        "too few rounds completed a write to prove anything"
    );
    assert!(killed_mid_write > 0, "no kill landed inside a write");
}
