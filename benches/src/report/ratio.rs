//! The one ratio the runner and its report print: how many times better kcache's figure is than
//! another implementation's (`kcache_ahead_by`), defined so that its meaning never flips.

/// Whether a larger value of `metric` is better (rates: names ending in `per_s`), or a smaller one
/// (times, bytes).
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("per_s")
}

/// How many times better kcache's figure is than `other`'s on `metric`: `other / kcache` for a
/// cost (lower is better), `kcache / other` for a rate (higher is better). Above 1 kcache is ahead,
/// below 1 behind. `None` when either figure is not a positive finite number, or for a metric that
/// is neither a cost nor a rate (a ratio of counts such as `dedup_ratio`).
pub fn ahead_by(metric: &str, kcache: f64, other: f64) -> Option<f64> {
    let usable = |v: f64| v.is_finite() && v > 0.0;
    if metric.ends_with("_ratio") || !usable(kcache) || !usable(other) {
        return None;
    }
    Some(if higher_is_better(metric) {
        kcache / other
    } else {
        other / kcache
    })
}

/// A ratio as the report prints it: `2.10x`, `37.5x`, `1.2 kx`.
pub fn format_ratio(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.2}x")
    } else if r < 100.0 {
        format!("{r:.1}x")
    } else if r < 10_000.0 {
        format!("{r:.0}x")
    } else {
        format!("{}x", super::short(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_better_high_and_costs_low() {
        assert!(higher_is_better("events_per_s"));
        assert!(!higher_is_better("ns_per_item"));
        assert!(!higher_is_better("relist_peak_bytes_per_object"));
    }

    #[test]
    fn above_one_means_kcache_ahead_for_costs_and_rates_alike() {
        // A cost: kcache takes 100 ns where the other takes 250.
        assert_eq!(ahead_by("ns_per_item", 100.0, 250.0), Some(2.5));
        // A rate: kcache does 2 M events/s where the other does 1 M.
        assert_eq!(ahead_by("events_per_s", 2e6, 1e6), Some(2.0));
        // And behind, both ways.
        assert_eq!(ahead_by("add_ns", 200.0, 100.0), Some(0.5));
        assert_eq!(ahead_by("events_per_s", 1e6, 4e6), Some(0.25));
    }

    #[test]
    fn no_ratio_of_counts_zeros_or_missing_figures() {
        assert_eq!(ahead_by("dedup_ratio", 3.0, 13.0), None);
        assert_eq!(ahead_by("ns_per_item", 0.0, 13.0), None);
        assert_eq!(ahead_by("ns_per_item", 10.0, f64::NAN), None);
    }

    #[test]
    fn ratios_print_with_a_precision_that_fits_their_size() {
        let got: Vec<String> = [0.734, 2.1, 37.54, 751.0, 375_735.0]
            .map(format_ratio)
            .into();
        assert_eq!(got, ["0.73x", "2.10x", "37.5x", "751x", "375.7 kx"]);
    }
}
