//! [`PrometheusShardMetrics`]: sharding's [`ShardStats`] on `prometheus-client`, read at each
//! scrape (feature `prometheus`).

use super::gate::{ShardGate, ShardStats};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::{Arc, Mutex};

type Labels = [(&'static str, String); 1];

/// Exports the [`ShardStats`] of shard members to a `prometheus-client` [`Registry`], read from
/// their gates at each scrape, each series labelled `member` (the identity):
///
/// | metric | type |
/// |---|---|
/// | `shard_owned_ranges` | gauge: hash ranges this member owns under the live members |
/// | `shard_owned_ratio` | gauge: the share of the hash ring they cover (0 to 1) |
/// | `shard_members` | gauge: live members, this one included while its lease is current |
/// | `shard_lease_held` | gauge: 1 while this member's lease is current, else 0 |
/// | `shard_in_flight` | gauge: reconciles in flight here |
/// | `shard_keys_skipped_not_owned_total` | counter: keys a worker skipped, owned by another member |
/// | `shard_keys_deferred_total` | counter: keys put back while a handover was in progress |
/// | `shard_rebalances_total` | counter: changes of the live members |
/// | `shard_views_published_total` | counter: new views this member published |
///
/// Create one per registry (a cheap [`Clone`]) and [`add`](Self::add) each member's gate.
///
/// # Examples
/// ```
/// use kcache_controller::shard::{PrometheusShardMetrics, Shard, ShardConfig};
/// use kcache_leaderelection::InProcessMembers;
/// use prometheus_client::{encoding::text::encode, registry::Registry};
///
/// # futures::executor::block_on(async {
/// let mut registry = Registry::default();
/// let metrics = PrometheusShardMetrics::new(&mut registry);
/// let shard = Shard::new(InProcessMembers::new(), ShardConfig::new("replica-a"))?;
/// metrics.add(&shard.gate());
/// shard.tick().await;
///
/// let mut text = String::new();
/// encode(&mut text, &registry)?;
/// assert!(text.contains(r#"shard_members{member="replica-a"} 1"#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct PrometheusShardMetrics {
    gates: Arc<Mutex<Vec<ShardGate>>>,
}

impl PrometheusShardMetrics {
    /// Registers the shard metric families in `registry` and returns the handle to add
    /// members with.
    pub fn new(registry: &mut Registry) -> Self {
        let this = Self::default();
        registry.register_collector(Box::new(this.clone()));
        this
    }

    /// Exports `gate`'s member from now on.
    pub fn add(&self, gate: &ShardGate) {
        if let Ok(mut gates) = self.gates.lock() {
            gates.push(gate.clone());
        }
    }
}

impl fmt::Debug for PrometheusShardMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusShardMetrics")
            .finish_non_exhaustive()
    }
}

/// The share of the 2^64 hash positions that `stats`' ranges cover.
fn owned_ratio(stats: &ShardStats) -> f64 {
    let owned: u128 = stats.owned_ranges.iter().map(|r| r.len()).sum();
    owned as f64 / 2f64.powi(64)
}

fn family<M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    stats: &[ShardStats],
    value: impl Fn(&ShardStats) -> M,
) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, M::TYPE)?;
    for s in stats {
        let labels: Labels = [("member", s.identity.clone())];
        value(s).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for PrometheusShardMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let stats: Vec<ShardStats> = match self.gates.lock() {
            Ok(gates) => gates.iter().map(ShardGate::stats).collect(),
            Err(_) => return Ok(()),
        };
        if stats.is_empty() {
            return Ok(());
        }
        let e = &mut encoder;
        let n = |v: u64| ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
        family(
            e,
            "shard_owned_ranges",
            "Hash ranges this shard member owns",
            &stats,
            |s| n(s.owned_ranges.len() as u64),
        )?;
        family(
            e,
            "shard_owned_ratio",
            "Share of the hash ring this shard member owns",
            &stats,
            |s| ConstGauge::new(owned_ratio(s)),
        )?;
        family(e, "shard_members", "Live shard members", &stats, |s| {
            n(s.members.len() as u64)
        })?;
        family(
            e,
            "shard_lease_held",
            "Whether this shard member's lease is current",
            &stats,
            |s| n(u64::from(s.lease_held)),
        )?;
        family(
            e,
            "shard_in_flight",
            "Reconciles in flight on this shard member",
            &stats,
            |s| n(s.in_flight),
        )?;
        family(
            e,
            "shard_keys_skipped_not_owned",
            "Keys a worker skipped because another shard member owns them",
            &stats,
            |s| ConstCounter::new(s.skipped_not_owned),
        )?;
        family(
            e,
            "shard_keys_deferred",
            "Keys put back for later because a handover was in progress",
            &stats,
            |s| ConstCounter::new(s.deferred),
        )?;
        family(
            e,
            "shard_rebalances",
            "Changes of the live shard members",
            &stats,
            |s| ConstCounter::new(s.rebalances),
        )?;
        family(
            e,
            "shard_views_published",
            "New views this shard member published",
            &stats,
            |s| ConstCounter::new(s.views_published),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{Shard, ShardConfig};
    use futures::executor::block_on;
    use kcache_core::FakeClock;
    use kcache_leaderelection::InProcessMembers;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn every_members_stats_are_exported_under_its_label() {
        let store = InProcessMembers::new();
        let clock = FakeClock::new();
        let config = |id: &str| ShardConfig::new(id).clock(Arc::new(clock.clone()));
        let a = Shard::new(store.handle(), config("a")).expect("config");
        let b = Shard::new(store.handle(), config("b")).expect("config");
        let mut registry = Registry::default();
        let metrics = PrometheusShardMetrics::new(&mut registry);
        metrics.add(&a.gate());
        metrics.add(&b.gate());
        for _ in 0..3 {
            block_on(a.tick());
            block_on(b.tick());
        }
        let key = (0..100)
            .map(|i| format!("ns/k{i}"))
            .find(|k| b.gate().owns(k))
            .expect("b owns a key");
        assert!(a.gate().try_start(&key).is_none());
        let claim = b.gate().try_start(&key).expect("b starts its key");

        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for gate in [a.gate(), b.gate()] {
            let s = gate.stats();
            let m = &s.identity;
            for line in [
                format!(
                    "shard_owned_ranges{{member=\"{m}\"}} {}",
                    s.owned_ranges.len()
                ),
                format!("shard_members{{member=\"{m}\"}} 2"),
                format!("shard_lease_held{{member=\"{m}\"}} 1"),
                format!("shard_in_flight{{member=\"{m}\"}} {}", s.in_flight),
                format!(
                    "shard_keys_skipped_not_owned_total{{member=\"{m}\"}} {}",
                    s.skipped_not_owned
                ),
                format!("shard_keys_deferred_total{{member=\"{m}\"}} {}", s.deferred),
                format!("shard_rebalances_total{{member=\"{m}\"}} {}", s.rebalances),
                format!(
                    "shard_views_published_total{{member=\"{m}\"}} {}",
                    s.views_published
                ),
            ] {
                assert!(text.contains(&line), "missing {line:?} in\n{text}");
            }
        }
        assert!(text.contains("shard_in_flight{member=\"b\"} 1"));
        assert!(text.contains("shard_keys_skipped_not_owned_total{member=\"a\"} 1"));
        let ratio = |m: &str| -> f64 {
            let prefix = format!("shard_owned_ratio{{member=\"{m}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN)
        };
        assert!((ratio("a") + ratio("b") - 1.0).abs() < 1e-9);
        assert_eq!(text.matches("# TYPE shard_members gauge").count(), 1);
        drop(claim);
    }
}
