//! The store-latency signal: an exponentially weighted moving average of
//! the limiter's store calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Weight of the newest call: about the last ten calls dominate, so one
/// slow call does not move the limit but a slow store does within an
/// interval of any real traffic.
const ALPHA: f64 = 0.2;

/// No call measured yet (never the bits of a number this type stores).
const NONE: u64 = u64::MAX;

/// Average store-call time in seconds, as `f64` bits, updated lock-free.
#[derive(Debug)]
pub(crate) struct LatencyAverage {
    seconds: AtomicU64,
}

impl LatencyAverage {
    pub(crate) fn new() -> LatencyAverage {
        LatencyAverage { seconds: AtomicU64::new(NONE) }
    }

    /// Folds one call's duration into the average.
    pub(crate) fn record(&self, took: Duration) {
        let sample = took.as_secs_f64();
        // The closure always returns Some, so the update cannot fail.
        let _ = self.seconds.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            let next = if bits == NONE {
                sample
            } else {
                f64::from_bits(bits) + ALPHA * (sample - f64::from_bits(bits))
            };
            Some(next.to_bits())
        });
    }

    /// The average so far, `None` before the first call.
    pub(crate) fn get(&self) -> Option<Duration> {
        let bits = self.seconds.load(Ordering::Relaxed);
        (bits != NONE).then(|| Duration::try_from_secs_f64(f64::from_bits(bits)).unwrap_or(Duration::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_empty_then_follows_the_calls() {
        let avg = LatencyAverage::new();
        assert_eq!(avg.get(), None);
        avg.record(Duration::from_millis(10));
        assert_eq!(avg.get(), Some(Duration::from_millis(10)));
        avg.record(Duration::from_millis(60));
        let ms = avg.get().unwrap().as_secs_f64() * 1000.0;
        assert!((ms - 20.0).abs() < 1e-6, "{ms}");
        for _ in 0..100 {
            avg.record(Duration::from_millis(30));
        }
        let ms = avg.get().unwrap().as_secs_f64() * 1000.0;
        assert!((ms - 30.0).abs() < 1e-3, "{ms}");
    }
}
