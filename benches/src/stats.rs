//! Medians and percentiles.

/// The median of `values` (the mean of the two middle values for an even count); `None` when
/// empty. NaNs sort last.
///
/// # Examples
/// ```
/// use kcache_benches::stats::median;
///
/// assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
/// assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
/// assert_eq!(median(&[]), None);
/// ```
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// The `p`-th percentile (0 to 100) of `sorted` by the nearest-rank method; `None` when empty.
/// `sorted` must be sorted ascending.
///
/// # Examples
/// ```
/// use kcache_benches::stats::percentile;
///
/// let v: Vec<i64> = (1..=100).collect();
/// assert_eq!(percentile(&v, 50.0), Some(50));
/// assert_eq!(percentile(&v, 99.0), Some(99));
/// assert_eq!(percentile(&v, 100.0), Some(100));
/// ```
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}
