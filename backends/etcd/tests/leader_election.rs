//! Leader election on a real etcd with electors in separate processes.
//!
//! This binary is its own child: run with `--elector-child ENDPOINT KEY IDENTITY`, it is one
//! elector on [`EtcdLock`] that prints one line per term (`START identity term revision wall_ns`
//! and `END identity term revision started_ns ended_ns reason`). Run without it (as `cargo test`
//! does), it starts such processes, kills, pauses and resumes them (and etcd itself), and checks:
//!
//! - a SIGKILLed leader (of two, then of three electors) is replaced within the bound the timings
//!   give;
//! - a SIGSTOPped leader (a partition stand-in) ends its term by its renew deadline, before the
//!   other takes over;
//! - with etcd killed and restarted, nobody leads while it is down and one leads after;
//! - in every scenario, the terms of all electors (killed ones end at their kill) never overlap,
//!   and their acquisition revisions increase with time.
//!
//! Short timings keep it cheap: lease 2 s, renew deadline 1.5 s, retry 0.25 s (jitter 1.2).

mod common;

use etcd_client::{Client, ConnectOptions};
use kcache_core::{Clock, SystemClock};
use kcache_etcd::EtcdLock;
use kcache_leaderelection::{LeaderElectionConfig, LeaderElector};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(1500);
const RETRY: Duration = Duration::from_millis(250);
const JITTER: f64 = 1.2;

fn config() -> LeaderElectionConfig {
    LeaderElectionConfig::new()
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .jitter_factor(JITTER)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--elector-child") {
        child(&args[2..]);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut ran = 0;
    if let Some(endpoint) = common::endpoints("leader_election") {
        for n in [2, 3] {
            println!("leader_election: sigkill_of_the_leader with {n} electors");
            runtime.block_on(sigkill_of_the_leader(&endpoint, n));
        }
        println!("leader_election: sigstop_of_the_leader_with_two_electors");
        runtime.block_on(sigstop_of_the_leader_with_two_electors(&endpoint));
        ran += 3;
        if let Ok(rounds) = std::env::var("KCACHE_TAKEOVER_ROUNDS") {
            let rounds = rounds.parse().unwrap_or(10);
            runtime.block_on(measure_takeover(&endpoint, rounds));
        }
    }
    if let Some(bin) = common::etcd_bin("leader_election") {
        println!("leader_election: etcd_killed_and_restarted_with_two_electors");
        runtime.block_on(etcd_killed_and_restarted_with_two_electors(bin));
        ran += 1;
    }
    println!("leader_election: {ran} scenarios passed");
}

// ---------------------------------------------------------------------------------------------
// The child: one elector.

fn wall_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn child(args: &[String]) {
    let [endpoint, key, identity] = args else {
        eprintln!("usage: --elector-child ENDPOINT KEY IDENTITY");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_millis(500))
            .with_timeout(Duration::from_millis(1000));
        let client = loop {
            match Client::connect([endpoint.as_str()], Some(options.clone())).await {
                Ok(c) => break c,
                Err(e) => {
                    eprintln!("{identity}: cannot connect yet: {e}");
                    SystemClock.sleep_async(RETRY).await;
                }
            }
        };
        // Instants become wall-clock times through one reading of both clocks.
        let (base, base_wall) = (SystemClock.now(), SystemClock.system_time());
        let wall = move |t: Instant| {
            wall_ns(base_wall) + t.saturating_duration_since(base).as_nanos()
                - base.saturating_duration_since(t).as_nanos()
        };
        let lock = EtcdLock::new(client, key.clone(), identity.clone());
        let (id1, id2) = (identity.clone(), identity.clone());
        let elector = LeaderElector::new(lock, config())
            .expect("valid config")
            .on_started_leading(move |term| {
                println!(
                    "START {id1} {} {} {}",
                    term.term(),
                    term.version(),
                    wall(SystemClock.now())
                );
            })
            .on_stopped_leading(move |end| {
                println!(
                    "END {id2} {} {} {} {} {:?}",
                    end.term,
                    end.version,
                    wall(end.started),
                    wall(end.ended),
                    end.reason
                );
            });
        // Stops when the parent closes stdin.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            let _ = tx.send(());
        });
        elector
            .run(async move {
                let _ = rx.await;
            })
            .await
            .expect("the elector runs once");
        println!("EXIT {identity}");
    });
}

// ---------------------------------------------------------------------------------------------
// The parent: electors as processes, and their terms.

/// One term as the electors reported it (times in ns since the epoch).
#[derive(Debug, Clone)]
struct Term {
    identity: String,
    term: u64,
    revision: i64,
    start: u128,
    end: Option<u128>,
    reason: Option<String>,
}

#[derive(Default)]
struct Log {
    terms: Vec<Term>,
}

struct Elector {
    identity: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn now_ns() -> u128 {
    wall_ns(SystemClock.system_time())
}

impl Elector {
    fn spawn(endpoint: &str, key: &str, identity: &str, log: &Arc<Mutex<Log>>) -> Self {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args(["--elector-child", endpoint, key, identity])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("an elector process starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let log = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let f: Vec<&str> = line.split_whitespace().collect();
                let mut log = log.lock().expect("log lock");
                match f.as_slice() {
                    ["START", id, term, rev, at] => log.terms.push(Term {
                        identity: (*id).to_owned(),
                        term: term.parse().expect("term"),
                        revision: rev.parse().expect("revision"),
                        start: at.parse().expect("time"),
                        end: None,
                        reason: None,
                    }),
                    ["END", id, term, _rev, started, ended, reason] => {
                        let term: u64 = term.parse().expect("term");
                        let t = log
                            .terms
                            .iter_mut()
                            .find(|t| t.identity == *id && t.term == term)
                            .expect("an END follows its START");
                        t.start = started.parse().expect("time");
                        t.end = Some(ended.parse().expect("time"));
                        t.reason = Some((*reason).to_owned());
                    }
                    _ => {}
                }
            }
        });
        Self {
            identity: identity.to_owned(),
            child: Some(child),
            stdin,
            reader: Some(reader),
        }
    }

    fn pid(&self) -> String {
        self.child
            .as_ref()
            .map(|c| c.id().to_string())
            .unwrap_or_default()
    }

    /// Sends `sig` through the shell's `kill` builtin (a minimal system may lack `/bin/kill`).
    fn signal(&self, sig: &str) {
        let ok = Command::new("sh")
            .args(["-c", &format!("kill {sig} {}", self.pid())])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} {}", self.pid());
    }

    /// SIGKILL; its open term (if any) ends now.
    fn kill(&mut self, log: &Arc<Mutex<Log>>) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let at = now_ns();
        let mut log = log.lock().expect("log lock");
        for t in log.terms.iter_mut().filter(|t| t.identity == self.identity) {
            if t.end.is_none() {
                t.end = Some(at);
                t.reason = Some("Killed".into());
            }
        }
    }

    /// Closes stdin (the elector stops and reports its open term) and waits for it.
    fn stop(&mut self) {
        self.stdin.take();
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("sh")
                .args(["-c", &format!("kill -CONT {}", c.id())])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The open term, if exactly one; panics if two terms are open at once.
fn current_leader(log: &Arc<Mutex<Log>>) -> Option<Term> {
    let log = log.lock().expect("log lock");
    let open: Vec<&Term> = log.terms.iter().filter(|t| t.end.is_none()).collect();
    assert!(open.len() <= 1, "two open terms: {open:?}");
    open.first().map(|t| (*t).clone())
}

async fn wait_for_leader(
    log: &Arc<Mutex<Log>>,
    limit: Duration,
    what: &str,
    pred: impl Fn(&Term) -> bool,
) -> Term {
    let deadline = SystemClock.now() + limit;
    loop {
        if let Some(t) = current_leader(log).filter(|t| pred(t)) {
            return t;
        }
        assert!(
            SystemClock.now() < deadline,
            "timed out after {limit:?}: {what}"
        );
        SystemClock.sleep_async(Duration::from_millis(10)).await;
    }
}

/// Every term closed; no two overlap; later terms were acquired at later revisions.
fn check_no_overlap(log: &Arc<Mutex<Log>>) -> usize {
    let mut terms = log.lock().expect("log lock").terms.clone();
    terms.sort_by_key(|t| t.start);
    for t in &terms {
        assert!(t.end.is_some(), "term never ended: {t:?}");
    }
    for w in terms.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.end.unwrap_or(u128::MAX) <= b.start,
            "overlapping terms (by {} ms): {a:?} and {b:?}",
            (a.end.unwrap_or(0) as i128 - b.start as i128) / 1_000_000
        );
        assert!(
            a.revision < b.revision,
            "revisions out of order: {a:?} {b:?}"
        );
    }
    terms.len()
}

/// The latest a candidate may take over after the holder died: it may have seen the holder's
/// last renewal up to one jittered retry late, waits the lease, then up to one jittered retry
/// for its next attempt (plus a second of slack for process and etcd latency).
fn takeover_bound() -> Duration {
    let jittered = RETRY.mul_f64(1.0 + JITTER);
    LEASE + jittered * 2 + Duration::from_secs(1)
}

async fn sigkill_of_the_leader(endpoint: &str, n: usize) {
    let key = format!("{}lock", common::unique_prefix("leader-election-kill"));
    let log = Arc::new(Mutex::new(Log::default()));
    let mut electors: Vec<Elector> = ["a", "b", "c"][..n]
        .iter()
        .map(|id| Elector::spawn(endpoint, &key, id, &log))
        .collect();
    let first = wait_for_leader(&log, Duration::from_secs(20), "a first leader", |_| true).await;
    // Let the others see a few renewals.
    SystemClock.sleep_async(Duration::from_secs(1)).await;
    let killed_at = SystemClock.now();
    let i = electors
        .iter()
        .position(|e| e.identity == first.identity)
        .expect("the leader is one of ours");
    electors[i].kill(&log);
    let second = wait_for_leader(&log, Duration::from_secs(20), "a second leader", |t| {
        t.identity != first.identity
    })
    .await;
    let took = SystemClock.now() - killed_at;
    println!(
        "    {} killed; {} took over after {took:?} (bound {:?})",
        first.identity,
        second.identity,
        takeover_bound()
    );
    assert!(took <= takeover_bound(), "takeover took {took:?}");
    for e in &mut electors {
        e.stop();
    }
    let n = check_no_overlap(&log);
    println!("    {n} terms, none overlapping");
}

async fn sigstop_of_the_leader_with_two_electors(endpoint: &str) {
    let key = format!("{}lock", common::unique_prefix("leader-election-stop"));
    let log = Arc::new(Mutex::new(Log::default()));
    let mut electors: Vec<Elector> = ["a", "b"]
        .iter()
        .map(|id| Elector::spawn(endpoint, &key, id, &log))
        .collect();
    let first = wait_for_leader(&log, Duration::from_secs(20), "a first leader", |_| true).await;
    SystemClock.sleep_async(Duration::from_secs(1)).await;
    let i = electors
        .iter()
        .position(|e| e.identity == first.identity)
        .expect("the leader is one of ours");
    let stopped_at = now_ns();
    electors[i].signal("-STOP");
    // The other takes over (its term opens while the paused one's is still open in the log:
    // the paused process cannot report yet).
    let deadline = SystemClock.now() + Duration::from_secs(20);
    let second = loop {
        let terms = log.lock().expect("log lock").terms.clone();
        if let Some(t) = terms
            .iter()
            .find(|t| t.identity != first.identity && t.end.is_none())
        {
            break t.clone();
        }
        assert!(
            SystemClock.now() < deadline,
            "nobody took over from a paused leader"
        );
        SystemClock.sleep_async(Duration::from_millis(10)).await;
    };
    electors[i].signal("-CONT");
    // Resumed, the old leader reports its term ended at its renew deadline.
    let deadline = SystemClock.now() + Duration::from_secs(20);
    let ended = loop {
        let terms = log.lock().expect("log lock").terms.clone();
        let t = terms
            .iter()
            .find(|t| t.identity == first.identity && t.term == first.term)
            .cloned()
            .expect("the first term");
        if let Some(end) = t.end {
            assert_eq!(t.reason.as_deref(), Some("RenewDeadlineExceeded"));
            break end;
        }
        assert!(
            SystemClock.now() < deadline,
            "the resumed leader never ended its term"
        );
        SystemClock.sleep_async(Duration::from_millis(10)).await;
    };
    println!(
        "    {} paused; its term ended {} ms after the pause (renew deadline {:?}), {} ms before {} took over",
        first.identity,
        (ended as i128 - stopped_at as i128) / 1_000_000,
        RENEW,
        (second.start as i128 - ended as i128) / 1_000_000,
        second.identity
    );
    assert!(
        ended <= stopped_at + RENEW.as_nanos(),
        "the paused leader's term outlived its renew deadline"
    );
    assert!(
        ended <= second.start,
        "the paused leader's term overlaps the next"
    );
    for e in &mut electors {
        e.stop();
    }
    let n = check_no_overlap(&log);
    println!("    {n} terms, none overlapping");
}

async fn etcd_killed_and_restarted_with_two_electors(bin: std::path::PathBuf) {
    let mut etcd = common::OwnEtcd::start(bin, &[]).await;
    let endpoint = etcd.endpoint();
    let key = "/kcache-test/leader-election-restart/lock";
    let log = Arc::new(Mutex::new(Log::default()));
    let mut electors: Vec<Elector> = ["a", "b"]
        .iter()
        .map(|id| Elector::spawn(&endpoint, key, id, &log))
        .collect();
    let first = wait_for_leader(&log, Duration::from_secs(20), "a first leader", |_| true).await;
    SystemClock.sleep_async(Duration::from_secs(1)).await;
    etcd.kill();
    let killed_at = now_ns();
    // The leader cannot renew: its term ends by its renew deadline, and nobody else leads.
    let deadline = SystemClock.now() + Duration::from_secs(10);
    while current_leader(&log).is_some() {
        assert!(
            SystemClock.now() < deadline,
            "the leader kept leading without etcd"
        );
        SystemClock.sleep_async(Duration::from_millis(10)).await;
    }
    let ended = log
        .lock()
        .expect("log lock")
        .terms
        .iter()
        .find(|t| t.identity == first.identity && t.term == first.term)
        .and_then(|t| t.end)
        .expect("the first term ended");
    assert!(
        ended <= killed_at + RENEW.as_nanos(),
        "the term outlived the renew deadline"
    );
    SystemClock.sleep_async(LEASE).await;
    assert!(
        current_leader(&log).is_none(),
        "somebody led while etcd was down"
    );
    etcd.restart().await;
    let second = wait_for_leader(
        &log,
        Duration::from_secs(30),
        "a leader after the restart",
        |_| true,
    )
    .await;
    println!(
        "    etcd down for {} ms; {} led before, {} after",
        (now_ns() as i128 - killed_at as i128) / 1_000_000,
        first.identity,
        second.identity
    );
    SystemClock.sleep_async(Duration::from_secs(1)).await;
    for e in &mut electors {
        e.stop();
    }
    let n = check_no_overlap(&log);
    println!("    {n} terms, none overlapping");
}

/// `KCACHE_TAKEOVER_ROUNDS=N`: N times, two electors, SIGKILL the leader, time the takeover.
async fn measure_takeover(endpoint: &str, rounds: usize) {
    let mut times = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let key = format!("{}lock", common::unique_prefix("leader-election-measure"));
        let log = Arc::new(Mutex::new(Log::default()));
        let mut electors: Vec<Elector> = ["a", "b"]
            .iter()
            .map(|id| Elector::spawn(endpoint, &key, id, &log))
            .collect();
        let first = wait_for_leader(&log, Duration::from_secs(20), "a leader", |_| true).await;
        SystemClock.sleep_async(Duration::from_millis(1000)).await;
        let killed_at = SystemClock.now();
        for e in electors.iter_mut().filter(|e| e.identity == first.identity) {
            e.kill(&log);
        }
        wait_for_leader(&log, Duration::from_secs(20), "a new leader", |t| {
            t.identity != first.identity
        })
        .await;
        let took = SystemClock.now() - killed_at;
        println!("    round {round}: takeover after {took:?}");
        times.push(took);
        for e in &mut electors {
            e.stop();
        }
        check_no_overlap(&log);
    }
    times.sort();
    println!(
        "    takeover after SIGKILL over {rounds} rounds: median {:?}, min {:?}, max {:?}",
        times[rounds / 2],
        times[0],
        times[rounds - 1]
    );
}
