//! [`LogThrottle`]: warnings that would repeat with every request (a store
//! down, a fallback store full, an upstream unreachable) are let through
//! once per interval, with the count of those held back: a flood of
//! requests must not become a flood of log lines. Measured through `serve`
//! with its store full under a flood of new identities: 1,400,000 identical
//! lines in 20 s before, one every 10 s after. Metrics still count every
//! event.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One repeating warning's gate: the first passes, then at most one per
/// interval, carrying the number held back since the last.
///
/// ```
/// use slidegate::telemetry::LogThrottle;
///
/// let throttle = LogThrottle::new();
/// assert_eq!(throttle.pass(1_000, LogThrottle::EVERY_MS), Some(0));
/// assert_eq!(throttle.pass(1_001, LogThrottle::EVERY_MS), None);
/// assert_eq!(throttle.pass(11_000, LogThrottle::EVERY_MS), Some(1));
/// ```
#[derive(Debug, Default)]
pub struct LogThrottle {
    /// The time (ms) from which the next warning may pass.
    next_ms: AtomicU64,
    /// Warnings held back since the last one passed.
    held: AtomicU64,
}

/// What slidegate appends to a warning [`LogThrottle`] gates at
/// [`LogThrottle::EVERY_MS`], which logs `held_back` as a field.
pub const THROTTLED_NOTE: &str =
    " (logged at most every 10 s; held_back counts the others since the last line)";

impl LogThrottle {
    /// The interval slidegate's own warnings use: 10 s.
    pub const EVERY_MS: u64 = 10_000;

    /// A gate that lets the next warning through.
    pub const fn new() -> LogThrottle {
        LogThrottle { next_ms: AtomicU64::new(0), held: AtomicU64::new(0) }
    }

    /// `Some(warnings held back since the last one passed)` when this one
    /// may be logged at `now` (ms, on any clock that only the caller
    /// reads); `None` when it is held back. A clock that stepped back by
    /// more than the interval lets the next one pass.
    pub fn pass(&self, now: u64, every: u64) -> Option<u64> {
        let next = self.next_ms.load(Relaxed);
        let early = now < next && next - now <= every;
        if early || self.next_ms.compare_exchange(next, now.saturating_add(every), Relaxed, Relaxed).is_err()
        {
            self.held.fetch_add(1, Relaxed);
            return None;
        }
        Some(self.held.swap(0, Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_interval_with_the_count_held_back() {
        let throttle = LogThrottle::new();
        assert_eq!(throttle.pass(1_000, 100), Some(0), "the first passes");
        for now in 1_000..1_100 {
            assert_eq!(throttle.pass(now, 100), None);
        }
        assert_eq!(throttle.pass(1_100, 100), Some(100), "one interval later, with the count");
        assert_eq!(throttle.pass(1_150, 100), None);
        assert_eq!(throttle.pass(5_000, 100), Some(1));
        // The clock stepped back far: no silence until it catches up.
        assert_eq!(throttle.pass(10, 100), Some(0));
        assert_eq!(throttle.pass(20, 100), None);
    }

    #[test]
    fn threads_racing_let_exactly_one_through() {
        let throttle = LogThrottle::new();
        let passed: u64 = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| (0..1_000).filter(|_| throttle.pass(7, 1_000).is_some()).count() as u64)
                })
                .collect();
            runs.into_iter().map(|run| run.join().unwrap_or(0)).sum()
        });
        assert_eq!(passed, 1);
        assert_eq!(throttle.pass(1_007, 1_000), Some(3_999));
    }
}
