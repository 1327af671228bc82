//! The bucketed sliding counter.

use std::collections::VecDeque;
use std::time::Duration;

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
    buckets: VecDeque<(i64, u32)>,
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
    (t * b).div_euclid(w) as i64
}

/// The first time at which bucket `j` no longer counts:
/// `ceil((j + 1)·W / B) + W - 1`.
pub fn drop_time(rule: &Rule, j: i64) -> i128 {
    let (b, w) = geometry(rule);
    let start_next = (i128::from(j) + 1) * w;
    -((-start_next).div_euclid(b)) + w - 1
}

impl SlidingCounter {
    /// An empty counter.
    pub fn new() -> SlidingCounter {
        SlidingCounter::default()
    }

    /// Decides a request of `cost` (1..=limit) at `now` *without* counting
    /// it: an admitting decision reports what is left before the charge.
    pub fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let limit = u64::from(rule.limit());
        let now_i = i128::from(now);
        let first = bucket_of(rule, now_i - i128::from(rule.window_ms()) + 1);
        while let Some(&(idx, count)) = self.buckets.front() {
            if idx >= first {
                break;
            }
            self.buckets.pop_front();
            self.total -= u64::from(count);
        }
        let used = self.total;
        if used + u64::from(cost) <= limit {
            return Decision::allowed(
                rule.limit(),
                (limit - used) as u32,
                self.until(self.expires_at(rule), now),
            );
        }
        let excess = used + u64::from(cost) - limit;
        let mut freed = 0u64;
        let mut retry_at = i128::from(now);
        for &(idx, count) in &self.buckets {
            freed += u64::from(count);
            if freed >= excess {
                retry_at = drop_time(rule, idx);
                break;
            }
        }
        Decision::limited(
            rule.limit(),
            (limit - used.min(limit)) as u32,
            self.until(retry_at, now),
            self.until(self.expires_at(rule), now),
        )
    }

    /// Decides a request of `cost` (1..=limit) at `now`, counting it if admitted.
    pub fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let peeked = self.peek(rule, now, cost);
        if !peeked.allowed {
            return peeked;
        }
        let cur = bucket_of(rule, i128::from(now));
        let at = self.buckets.partition_point(|&(idx, _)| idx < cur);
        match self.buckets.get_mut(at) {
            Some((idx, count)) if *idx == cur => *count += cost,
            _ => self.buckets.insert(at, (cur, cost)),
        }
        self.total += u64::from(cost);
        let remaining = (u64::from(rule.limit()) - self.total) as u32;
        Decision::allowed(rule.limit(), remaining, self.until(self.expires_at(rule), now))
    }

    fn until(&self, at: i128, now: u64) -> Duration {
        Duration::from_millis(u64::try_from(at - i128::from(now)).unwrap_or(0))
    }

    /// When the newest bucket stops counting (0 when empty).
    pub fn expires_at(&self, rule: &Rule) -> i128 {
        self.buckets.back().map_or(0, |&(idx, _)| drop_time(rule, idx))
    }
}
