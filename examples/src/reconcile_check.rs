//! Reads the demo's reconcile logs (`--reconcile-log`) and checks sharding's guarantee: no two
//! reconciles of one key from different replicas overlap in time. Also counts the reconciles per
//! replica and, for a replica killed or stopped at a known time, how long its keys waited until
//! another replica reconciled them. The `kcache-reconcile-check` binary prints [`Analysis`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// One finished reconcile: a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// The reconciled key.
    pub key: String,
    /// The replica that ran it.
    pub replica: String,
    /// When it started and ended (system clock, nanoseconds since the Unix epoch).
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
}

/// Why a log line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Parses one log line: a JSON object with the string fields `key` and `replica` and the
/// unsigned integer fields `start_ns` and `end_ns` (`start_ns <= end_ns`), nothing else.
///
/// # Errors
/// [`ParseError`] for anything else.
pub fn parse_line(line: &str) -> Result<Interval, ParseError> {
    let mut p = Parser {
        s: line.as_bytes(),
        i: 0,
    };
    let (mut key, mut replica, mut start, mut end) = (None, None, None, None);
    p.ws();
    p.expect(b'{')?;
    loop {
        p.ws();
        let name = p.string()?;
        p.ws();
        p.expect(b':')?;
        p.ws();
        match name.as_str() {
            "key" => key = Some(p.string()?),
            "replica" => replica = Some(p.string()?),
            "start_ns" => start = Some(p.number()?),
            "end_ns" => end = Some(p.number()?),
            other => return Err(ParseError(format!("unexpected field {other:?}"))),
        }
        p.ws();
        match p.next() {
            Some(b',') => continue,
            Some(b'}') => break,
            _ => return Err(p.error("expected , or }")),
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(p.error("trailing characters"));
    }
    let missing = |f: &str| ParseError(format!("missing field {f:?}"));
    let interval = Interval {
        key: key.ok_or_else(|| missing("key"))?,
        replica: replica.ok_or_else(|| missing("replica"))?,
        start_ns: start.ok_or_else(|| missing("start_ns"))?,
        end_ns: end.ok_or_else(|| missing("end_ns"))?,
    };
    if interval.end_ns < interval.start_ns {
        return Err(ParseError("end_ns is before start_ns".into()));
    }
    Ok(interval)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> ParseError {
        ParseError(format!("{what} at column {}", self.i + 1))
    }
    fn next(&mut self) -> Option<u8> {
        let c = self.s.get(self.i).copied();
        self.i += 1;
        c
    }
    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), ParseError> {
        if self.next() == Some(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", c as char)))
        }
    }
    fn number(&mut self) -> Result<u64, ParseError> {
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| self.error("expected an unsigned integer"))
    }
    fn string(&mut self) -> Result<String, ParseError> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.next() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => {
                    let c = match self.next() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hex = self.s.get(self.i..self.i + 4);
                            self.i += 4;
                            hex.and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .ok_or_else(|| self.error("bad \\u escape"))?
                        }
                        _ => return Err(self.error("bad escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                Some(c) if c < 0x20 => return Err(self.error("control character in string")),
                Some(c) => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("string is not UTF-8"))
    }
}

/// Two reconciles of one key, from different replicas, that overlapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The earlier-starting one.
    pub first: Interval,
    /// The one that started before `first` ended.
    pub second: Interval,
}

/// A replica's reconciles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaCount {
    /// Reconciles.
    pub reconciles: u64,
    /// Distinct keys.
    pub keys: u64,
}

/// How long a departed replica's keys waited for another replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The replica that went away.
    pub replica: String,
    /// When (nanoseconds since the Unix epoch).
    pub at_ns: u64,
    /// Its keys: those whose last reconcile started before `at_ns` was its.
    pub keys: u64,
    /// Each of them that another replica reconciled after `at_ns`, sorted by `end_ns`.
    pub waits: Vec<Wait>,
}

/// How long one key of a departed replica waited for another replica's first reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The key.
    pub key: String,
    /// From the departure to that reconcile's start (ns).
    pub start_ns: u64,
    /// From the departure to that reconcile's end (ns): the key is reconciled again.
    pub end_ns: u64,
}

impl Takeover {
    /// The longest wait until a reconcile ended (ns): the last moved key reconciled.
    pub fn max_ns(&self) -> Option<u64> {
        self.waits.last().map(|w| w.end_ns)
    }

    /// The median wait until a reconcile ended (ns).
    pub fn median_ns(&self) -> Option<u64> {
        self.waits.get(self.waits.len() / 2).map(|w| w.end_ns)
    }

    /// The longest wait until a reconcile started (ns).
    pub fn max_start_ns(&self) -> Option<u64> {
        self.waits.iter().map(|w| w.start_ns).max()
    }
}

/// What the logs show.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Every reconcile.
    pub reconciles: u64,
    /// Distinct keys.
    pub keys: u64,
    /// Per replica.
    pub replicas: BTreeMap<String, ReplicaCount>,
    /// From the first start to the last end (ns).
    pub span_ns: u64,
    /// The longest reconcile (ns).
    pub longest_ns: u64,
    /// Overlapping reconciles of one key by two replicas (the guarantee says none).
    pub overlaps: Vec<Overlap>,
    /// Overlapping reconciles of one key by one replica (its queue says none).
    pub self_overlaps: Vec<Overlap>,
}

impl Analysis {
    /// Analyses `intervals`.
    pub fn new(intervals: &[Interval]) -> Self {
        let mut by_key: HashMap<&str, Vec<&Interval>> = HashMap::new();
        for i in intervals {
            by_key.entry(i.key.as_str()).or_default().push(i);
        }
        let mut a = Self {
            reconciles: intervals.len() as u64,
            keys: by_key.len() as u64,
            ..Self::default()
        };
        let first = intervals.iter().map(|i| i.start_ns).min().unwrap_or(0);
        let last = intervals.iter().map(|i| i.end_ns).max().unwrap_or(0);
        a.span_ns = last.saturating_sub(first);
        a.longest_ns = intervals
            .iter()
            .map(|i| i.end_ns - i.start_ns)
            .max()
            .unwrap_or(0);
        for list in by_key.values_mut() {
            list.sort_by_key(|i| (i.start_ns, i.end_ns));
            // Per replica, the interval ending last among those started so far: an interval
            // overlaps an earlier-starting one exactly when it starts before that one's end.
            let mut latest: HashMap<&str, &Interval> = HashMap::new();
            for &i in list.iter() {
                for (&replica, &prev) in &latest {
                    if prev.end_ns > i.start_ns {
                        let o = Overlap {
                            first: prev.clone(),
                            second: i.clone(),
                        };
                        if replica == i.replica {
                            a.self_overlaps.push(o);
                        } else {
                            a.overlaps.push(o);
                        }
                    }
                }
                let slot = latest.entry(i.replica.as_str()).or_insert(i);
                if i.end_ns > slot.end_ns {
                    *slot = i;
                }
            }
            let mut keys_of: HashMap<&str, ()> = HashMap::new();
            for i in list.iter() {
                let c = a.replicas.entry(i.replica.clone()).or_default();
                c.reconciles += 1;
                if keys_of.insert(i.replica.as_str(), ()).is_none() {
                    c.keys += 1;
                }
            }
        }
        a.overlaps
            .sort_by_key(|o| (o.first.start_ns, o.second.start_ns));
        a.self_overlaps
            .sort_by_key(|o| (o.first.start_ns, o.second.start_ns));
        a
    }

    /// Reconciles per second over the span.
    pub fn per_second(&self) -> f64 {
        self.reconciles as f64 / (self.span_ns as f64 / 1e9).max(1e-9)
    }
}

/// Reconciles started in `from_ns..to_ns`, per replica and in all, and per second of the window.
pub fn rate_in(intervals: &[Interval], from_ns: u64, to_ns: u64) -> (BTreeMap<String, u64>, f64) {
    let mut per: BTreeMap<String, u64> = BTreeMap::new();
    for i in intervals
        .iter()
        .filter(|i| (from_ns..to_ns).contains(&i.start_ns))
    {
        *per.entry(i.replica.clone()).or_default() += 1;
    }
    let total: u64 = per.values().sum();
    let secs = to_ns.saturating_sub(from_ns) as f64 / 1e9;
    (per, total as f64 / secs.max(1e-9))
}

/// How long the keys of `replica`, gone at `at_ns`, waited for another replica.
pub fn takeover(intervals: &[Interval], replica: &str, at_ns: u64) -> Takeover {
    let mut last_before: HashMap<&str, &Interval> = HashMap::new();
    let mut first_after: HashMap<&str, &Interval> = HashMap::new();
    for i in intervals {
        if i.start_ns < at_ns {
            let slot = last_before.entry(i.key.as_str()).or_insert(i);
            if i.start_ns > slot.start_ns {
                *slot = i;
            }
        } else if i.replica != replica {
            let slot = first_after.entry(i.key.as_str()).or_insert(i);
            if i.end_ns < slot.end_ns {
                *slot = i;
            }
        }
    }
    let theirs: Vec<&str> = last_before
        .iter()
        .filter(|(_, i)| i.replica == replica)
        .map(|(k, _)| *k)
        .collect();
    let mut waits: Vec<Wait> = theirs
        .iter()
        .filter_map(|k| {
            first_after.get(k).map(|i| Wait {
                key: (*k).to_owned(),
                start_ns: i.start_ns - at_ns,
                end_ns: i.end_ns - at_ns,
            })
        })
        .collect();
    waits.sort_by(|a, b| (a.end_ns, &a.key).cmp(&(b.end_ns, &b.key)));
    Takeover {
        replica: replica.to_owned(),
        at_ns,
        keys: theirs.len() as u64,
        waits,
    }
}

/// Nanoseconds as seconds, for printing.
pub struct Secs(pub u64);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} s", self.0 as f64 / 1e9)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} by {} [{}, {}]",
            self.key, self.replica, self.start_ns, self.end_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(key: &str, replica: &str, start_ns: u64, end_ns: u64) -> Interval {
        Interval {
            key: key.into(),
            replica: replica.into(),
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn a_line_parses_with_escapes_and_anything_else_is_refused() {
        let line = r#"{"key":"demo/rs-1","replica":"r\"1\u0001\\","start_ns":10,"end_ns":12}"#;
        assert_eq!(parse_line(line), Ok(iv("demo/rs-1", "r\"1\u{1}\\", 10, 12)));
        assert_eq!(
            parse_line(r#" { "end_ns" : 3 , "start_ns":2,"replica":"a","key":"k" } "#),
            Ok(iv("k", "a", 2, 3))
        );
        for bad in [
            "",
            "{}",
            r#"{"key":"k","replica":"a","start_ns":2}"#,
            r#"{"key":"k","replica":"a","start_ns":3,"end_ns":2}"#,
            r#"{"key":"k","replica":"a","start_ns":-1,"end_ns":2}"#,
            r#"{"key":"k","replica":"a","start_ns":1,"end_ns":2,"x":1}"#,
            r#"{"key":"k","replica":"a","start_ns":1,"end_ns":2} x"#,
            r#"{"key":k,"replica":"a","start_ns":1,"end_ns":2}"#,
            r#"{"key":"k","replica":"a","start_ns":1,"end_ns":2"#,
        ] {
            assert!(parse_line(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn overlapping_reconciles_of_one_key_by_two_replicas_are_found_and_nothing_else() {
        let log = vec![
            iv("k1", "a", 0, 10),
            iv("k1", "b", 10, 20), // touches, does not overlap
            iv("k1", "a", 25, 30),
            iv("k2", "a", 0, 100),
            iv("k2", "b", 50, 60), // inside a's
            iv("k3", "a", 0, 10),
            iv("k3", "b", 5, 15), // overlaps a's end
            iv("k4", "a", 0, 100),
            iv("k4", "a", 1, 2), // one replica twice (its queue would not)
            iv("k5", "b", 0, 10),
            iv("k5", "a", 50, 60),
            iv("k6", "c", 0, 100),
            iv("k6", "b", 1, 2),
            iv("k6", "a", 200, 300),
        ];
        let a = Analysis::new(&log);
        let keys: Vec<&str> = a.overlaps.iter().map(|o| o.first.key.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["k2", "k3", "k6"]);
        assert_eq!(a.self_overlaps.len(), 1);
        assert_eq!(a.self_overlaps[0].first.key, "k4");
        assert_eq!(a.reconciles, 14);
        assert_eq!(a.keys, 6);
        assert_eq!(
            a.replicas.get("a"),
            Some(&ReplicaCount {
                reconciles: 8,
                keys: 6
            })
        );
        assert_eq!(a.span_ns, 300);
        assert_eq!(a.longest_ns, 100);
    }

    #[test]
    fn the_rate_in_a_window_counts_the_reconciles_started_in_it() {
        let log = vec![
            iv("k1", "a", 0, 10),
            iv("k2", "a", 1_000_000_000, 1_100_000_000),
            iv("k3", "b", 1_500_000_000, 3_000_000_000),
            iv("k4", "b", 2_999_999_999, 3_100_000_000),
            iv("k5", "b", 3_000_000_000, 3_100_000_000),
        ];
        let (per, rate) = rate_in(&log, 1_000_000_000, 3_000_000_000);
        assert_eq!(per.get("a"), Some(&1));
        assert_eq!(per.get("b"), Some(&2));
        assert!((rate - 1.5).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn a_gone_replicas_keys_wait_until_another_replica_first_ends_one_of_them() {
        let log = vec![
            iv("k1", "dead", 0, 10),
            iv("k1", "b", 1_000, 1_500),
            iv("k1", "c", 2_000, 2_100),
            iv("k2", "dead", 0, 10),
            iv("k2", "b", 20, 30), // k2 was b's when the replica died
            iv("k2", "b", 3_000, 3_200),
            iv("k3", "dead", 400, 450),
            iv("k3", "c", 600, 900),
            iv("k4", "dead", 0, 10), // never taken over
            iv("k5", "b", 0, 10),
        ];
        let t = takeover(&log, "dead", 500);
        assert_eq!(t.keys, 3);
        let waits: Vec<(&str, u64, u64)> = t
            .waits
            .iter()
            .map(|w| (w.key.as_str(), w.start_ns, w.end_ns))
            .collect();
        assert_eq!(waits, [("k3", 100, 400), ("k1", 500, 1_000)]);
        assert_eq!(t.max_ns(), Some(1_000));
        assert_eq!(t.max_start_ns(), Some(500));
        assert_eq!(t.median_ns(), Some(1_000));
    }
}
