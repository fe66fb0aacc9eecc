//! Per-handler resync periods, with client-go's rounding rules (`sharedIndexInformer`).

use std::time::Duration;

/// The shortest resync period a handler can ask for; shorter positive requests are raised.
pub(crate) const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// A handler's effective period given the informer's check period (client-go's
/// `determineResyncPeriod`): zero stays zero; with no check period there are no resyncs; a
/// request below the check period is raised to it.
pub(crate) fn effective_period(requested: Duration, check_period: Duration) -> Duration {
    if requested.is_zero() {
        return Duration::ZERO;
    }
    if check_period.is_zero() {
        tracing::warn!(
            ?requested,
            "the informer has resyncs disabled: the handler's resync period is ignored"
        );
        return Duration::ZERO;
    }
    if requested < check_period {
        tracing::warn!(
            ?requested,
            ?check_period,
            "the handler's resync period is below the informer's resync check period: raised"
        );
        return check_period;
    }
    requested
}

/// Applies the minimum to a handler's request.
pub(crate) fn clamp_request(requested: Duration) -> Duration {
    if !requested.is_zero() && requested < MINIMUM_RESYNC_PERIOD {
        tracing::warn!(
            ?requested,
            "resync period below the minimum of 1 s: raised to 1 s"
        );
        return MINIMUM_RESYNC_PERIOD;
    }
    requested
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn zero_requests_never_resync() {
        assert_eq!(effective_period(Duration::ZERO, 10 * S), Duration::ZERO);
    }

    #[test]
    fn requests_are_ignored_when_the_informer_has_no_check_period() {
        assert_eq!(effective_period(5 * S, Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn requests_below_the_check_period_are_raised_to_it() {
        assert_eq!(effective_period(5 * S, 10 * S), 10 * S);
        assert_eq!(effective_period(20 * S, 10 * S), 20 * S);
    }

    #[test]
    fn positive_requests_below_one_second_are_raised_to_one_second() {
        assert_eq!(clamp_request(Duration::from_millis(10)), S);
        assert_eq!(clamp_request(Duration::ZERO), Duration::ZERO);
        assert_eq!(clamp_request(3 * S), 3 * S);
    }
}
