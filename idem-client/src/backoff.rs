//! Exponential backoff with full jitter: the wait before retry `n` is uniform in
//! `[0, min(cap, initial × 2^(n-1))]` (the "full jitter" of AWS's architecture blog, which
//! spreads clients that failed together better than a fixed or half-random wait).

use std::time::Duration;

/// The ceiling of the wait before retry `retry` (1 for the first retry).
pub(crate) fn ceiling(initial: Duration, cap: Duration, retry: u32) -> Duration {
    let doublings = retry.saturating_sub(1).min(31);
    initial
        .checked_mul(1 << doublings)
        .unwrap_or(Duration::MAX)
        .min(cap)
}

/// A wait drawn uniformly from `[0, ceiling]`.
pub(crate) fn jittered(ceiling: Duration) -> Duration {
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    // Should the operating system's generator fail, the clock's nanoseconds jitter well enough.
    let draw = getrandom::u64().unwrap_or_else(|_| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.unwrap_or_default().subsec_nanos().into()
    });
    // The remainder's bias is below one part in 2^64 / nanos: nothing a backoff can show.
    Duration::from_nanos(nanos.checked_add(1).map_or(draw, |span| draw % span))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: Duration = Duration::from_millis(500);
    const FIVE: Duration = Duration::from_secs(5);

    #[test]
    fn the_ceiling_doubles_up_to_the_cap() {
        let ceilings: Vec<u128> = (1..=6)
            .map(|retry| ceiling(HALF, FIVE, retry).as_millis())
            .collect();
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(ceiling(HALF, FIVE, u32::MAX), FIVE);
        assert_eq!(ceiling(Duration::MAX, Duration::MAX, 40), Duration::MAX);
        assert_eq!(ceiling(HALF, FIVE, 0), HALF);
    }

    #[test]
    fn jitter_stays_within_the_ceiling() {
        for _ in 0..1000 {
            assert!(jittered(HALF) <= HALF);
        }
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
        let _ = jittered(Duration::MAX);
    }
}
