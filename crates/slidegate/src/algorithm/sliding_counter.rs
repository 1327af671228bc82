//! The bucketed sliding counter.

use std::time::Duration;

use super::entries::Entries;
use crate::{Algorithm, Decision, Rule};

/// State of a sliding counter: per-bucket counts, oldest bucket first.
///
/// With `B` buckets per window `W`, time `t` (ms) falls in bucket
/// `floor(t·B / W)`. At `now`, every bucket holding any millisecond of the
/// window `(now - W, now]` counts in full, i.e. buckets
/// `floor((now - W + 1)·B / W) ..= floor(now·B / W)`. Since every charge in
/// the true window lies in a counted bucket, the counter never admits more
/// than the sliding log would.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlidingCounter {
    /// `(bucket index, count)`, sorted by index.
    buckets: Entries<i64>,
    total: u64,
}

/// Bucket count and window of a rule (1 bucket for non-counter rules, which
/// only happens in misuse and still behaves as a fixed-size bucket).
fn geometry(rule: &Rule) -> (i128, i128) {
    let b = match rule.algorithm() {
        Algorithm::SlidingCounter { buckets } => buckets.get(),
        _ => 1,
    };
    (i128::from(b), i128::from(rule.window_ms()))
}

/// The bucket holding millisecond `t`.
pub fn bucket_of(rule: &Rule, t: i128) -> i64 {
    let (b, w) = geometry(rule);
    // 64-bit arithmetic whenever it cannot overflow (every real clock):
    // 128-bit division is a slow library call.
    if let (Ok(t), Ok(b), Ok(w)) = (i64::try_from(t), i64::try_from(b), i64::try_from(w))
        && let Some(tb) = t.checked_mul(b)
    {
        return tb.div_euclid(w);
    }
    (t * b).div_euclid(w) as i64
}

/// The first time at which bucket `j` no longer counts:
/// `ceil((j + 1)·W / B) + W - 1`.
pub fn drop_time(rule: &Rule, j: i64) -> i128 {
    let (b, w) = geometry(rule);
    if let (Ok(b), Ok(w)) = (i64::try_from(b), i64::try_from(w))
        && let Some(start_next) = j.checked_add(1).and_then(|n| n.checked_mul(w))
        && let Some(neg) = start_next.checked_neg()
    {
        return i128::from(-(neg.div_euclid(b))) + i128::from(w) - 1;
    }
    let start_next = (i128::from(j) + 1) * w;
    -((-start_next).div_euclid(b)) + w - 1
}

impl SlidingCounter {
    /// An empty counter.
    pub fn new() -> SlidingCounter {
        SlidingCounter::default()
    }

    /// Drops the buckets that no longer count at `now`; returns the cost
    /// still counted.
    fn prune(&mut self, rule: &Rule, now: u64) -> u64 {
        let first = bucket_of(rule, i128::from(now) - i128::from(rule.window_ms()) + 1);
        self.total -= self.buckets.drop_front_while(|idx| idx < first);
        self.total
    }

    /// Decides a request of `cost` (1..=limit) at `now` *without* counting
    /// it: an admitting decision reports what is left before the charge.
    pub fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let used = self.prune(rule, now);
        if used + u64::from(cost) <= u64::from(rule.limit()) {
            return Decision::allowed(
                rule.limit(),
                (u64::from(rule.limit()) - used) as u32,
                self.until(self.expires_at(rule), now),
            );
        }
        self.limited(rule, now, cost, used)
    }

    /// The denial of a request of `cost` when `used` is counted.
    fn limited(&self, rule: &Rule, now: u64, cost: u32, used: u64) -> Decision {
        self.limited_expiring(rule, now, cost, used).0
    }

    /// [`limited`](Self::limited), and when the state expires: each is a
    /// bucket's drop time (a division), the same one when the oldest
    /// bucket is also the newest, so it is worked out once.
    fn limited_expiring(&self, rule: &Rule, now: u64, cost: u32, used: u64) -> (Decision, i128) {
        let limit = u64::from(rule.limit());
        let excess = used + u64::from(cost) - limit;
        let newest = self.buckets.last_position();
        let expires_at = newest.map_or(0, |idx| drop_time(rule, idx));
        let mut freed = 0u64;
        let mut retry_at = i128::from(now);
        for (idx, count) in self.buckets.iter() {
            freed += u64::from(count);
            if freed >= excess {
                retry_at = if Some(idx) == newest { expires_at } else { drop_time(rule, idx) };
                break;
            }
        }
        let decision = Decision::limited(
            rule.limit(),
            (limit - used.min(limit)) as u32,
            self.until(retry_at, now),
            self.until(expires_at, now),
        );
        (decision, expires_at)
    }

    /// Records a charge of `cost` at `now` whatever remains (see
    /// [`SlidingLog::charge`](super::SlidingLog::charge)): in the current
    /// bucket, past the limit if it must; checks are denied until the
    /// buckets that make the debt stop counting.
    pub fn charge(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let limit = u64::from(rule.limit());
        self.prune(rule, now);
        let had_room = self.total < limit;
        if cost > 0 {
            let cur = bucket_of(rule, i128::from(now));
            self.total += u64::from(self.buckets.add_sorted(cur, cost));
        }
        let (retry, expires_at) = if self.total < limit {
            (Duration::ZERO, self.expires_at(rule))
        } else {
            let (denied, expires_at) = self.limited_expiring(rule, now, 1, self.total);
            (denied.retry_after, expires_at)
        };
        Decision::charged(rule.limit(), had_room, self.total, retry, self.until(expires_at, now))
    }

    /// Takes back up to `cost` from the bucket of `at` (a reservation given
    /// back), if it still counts at `now`: counts add, so this is exact.
    pub(crate) fn give_back(&mut self, rule: &Rule, now: u64, at: u64, cost: u32) {
        self.prune(rule, now);
        self.total -= u64::from(self.buckets.take(bucket_of(rule, i128::from(at)), cost));
    }

    /// Decides a request of `cost` (1..=limit) at `now`, counting it if admitted.
    pub fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        self.check_expiring(rule, now, cost).0
    }

    /// [`check`](Self::check), and when the state expires after it (what
    /// [`expires_at`](Self::expires_at) would say, without working it out
    /// again).
    pub(crate) fn check_expiring(&mut self, rule: &Rule, now: u64, cost: u32) -> (Decision, i128) {
        let used = self.prune(rule, now);
        if used + u64::from(cost) > u64::from(rule.limit()) {
            return self.limited_expiring(rule, now, cost, used);
        }
        let cur = bucket_of(rule, i128::from(now));
        // Sorted by index, also when the clock steps back.
        self.buckets.add_sorted(cur, cost);
        self.total += u64::from(cost);
        let remaining = (u64::from(rule.limit()) - self.total) as u32;
        let expires_at = self.expires_at(rule);
        (Decision::allowed(rule.limit(), remaining, self.until(expires_at, now)), expires_at)
    }

    fn until(&self, at: i128, now: u64) -> Duration {
        Duration::from_millis(u64::try_from(at - i128::from(now)).unwrap_or(0))
    }

    /// When the newest bucket stops counting (0 when empty).
    pub fn expires_at(&self, rule: &Rule) -> i128 {
        self.buckets.last_position().map_or(0, |idx| drop_time(rule, idx))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU16;
    use std::time::Duration;

    use super::*;

    /// The definitions in 128-bit arithmetic, which the 64-bit fast paths
    /// must match everywhere.
    fn reference(rule: &Rule, t: i128, j: i64) -> (i64, i128) {
        let (b, w) = geometry(rule);
        let start_next = (i128::from(j) + 1) * w;
        ((t * b).div_euclid(w) as i64, -((-start_next).div_euclid(b)) + w - 1)
    }

    #[test]
    fn check_expiring_tells_what_expires_at_would() {
        let rule = Rule::new(5, Duration::from_millis(1000))
            .unwrap()
            .with_algorithm(Algorithm::SlidingCounter { buckets: NonZeroU16::new(4).unwrap() })
            .unwrap();
        let (mut told, mut plain) = (SlidingCounter::new(), SlidingCounter::new());
        let mut now = 1_700_000_000_000u64;
        for step in 0..400u64 {
            // Admissions, denials, an emptied window, a clock stepping back.
            now = match step % 97 {
                0 => now + 1_500,
                50 => now - 300,
                _ => now + step % 7 * 41,
            };
            let cost = u32::try_from(step % 3 + 1).unwrap();
            let (decision, expires_at) = told.check_expiring(&rule, now, cost);
            assert_eq!(decision, plain.check(&rule, now, cost), "step {step}");
            assert_eq!(expires_at, plain.expires_at(&rule), "step {step}");
        }
    }

    #[test]
    fn fast_bucket_arithmetic_matches_the_definition() {
        let huge = i128::from(i64::MAX);
        for (buckets, window) in [(1, 1), (10, 60_000), (7, 1_000), (1000, 1000), (1000, 31_622_400_000)] {
            let rule = Rule::new(5, Duration::from_millis(window))
                .unwrap()
                .with_algorithm(Algorithm::SlidingCounter { buckets: NonZeroU16::new(buckets).unwrap() })
                .unwrap();
            for t in [
                -huge * 4,
                -huge - 1,
                -huge,
                -60_001,
                -1,
                0,
                1,
                999,
                1_700_000_000_123,
                huge / 1000,
                huge,
                huge * 3,
            ] {
                let j = i64::try_from(t.clamp(i128::from(i64::MIN), i128::from(i64::MAX))).unwrap();
                let (bucket, drop) = reference(&rule, t, j);
                assert_eq!(bucket_of(&rule, t), bucket, "bucket_of({t}) for {buckets}/{window}");
                assert_eq!(drop_time(&rule, j), drop, "drop_time({j}) for {buckets}/{window}");
            }
        }
    }
}
