//! The exact sliding log.

use std::time::Duration;

use super::entries::Entries;
use crate::limits::MAX_LOGGED;
use crate::{Decision, Rule};

/// State of an exact sliding log: every admitted request with its time and
/// cost, oldest first.
///
/// A request at `now` is admitted iff the costs recorded in `(now - W, now]`
/// plus its own stay within the limit. An entry stamped later than `now` (the
/// clock stepped back) still counts: a clock step must not free capacity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlidingLog {
    /// `(time ms, cost)`, sorted by time.
    entries: Entries<u64>,
    /// Sum of the costs in `entries`.
    total: u64,
}

impl SlidingLog {
    /// An empty log.
    pub fn new() -> SlidingLog {
        SlidingLog::default()
    }

    fn prune(&mut self, window: u64, now: u64) {
        self.total -= self.entries.drop_front_while(|ts| ts.saturating_add(window) <= now);
    }

    /// Decides a request of `cost` (1..=limit) at `now` *without* charging
    /// it: an admitting decision reports what is left before the charge.
    /// Multi-dimension checks peek every dimension before charging any.
    pub fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let (limit, window) = (u64::from(rule.limit()), rule.window_ms());
        self.prune(window, now);
        let used = self.total;
        if used + u64::from(cost) <= limit {
            return Decision::allowed(rule.limit(), (limit - used) as u32, self.reset_after(window, now));
        }
        self.limited(rule, now, cost)
    }

    /// The denial of a request of `cost` (after pruning).
    fn limited(&self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let (limit, window, used) = (u64::from(rule.limit()), rule.window_ms(), self.total);
        // Oldest charges leave first; find the one whose expiry frees enough.
        let excess = used + u64::from(cost) - limit;
        let mut freed = 0u64;
        let mut retry_at = now;
        for (ts, c) in self.entries.iter() {
            freed += u64::from(c);
            if freed >= excess {
                retry_at = ts.saturating_add(window);
                break;
            }
        }
        Decision::limited(
            rule.limit(),
            (limit - used.min(limit)) as u32,
            Duration::from_millis(retry_at.saturating_sub(now)),
            self.reset_after(window, now),
        )
    }

    /// Decides a request of `cost` (1..=limit) at `now`, recording it if admitted.
    pub fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let (limit, window) = (u64::from(rule.limit()), rule.window_ms());
        self.prune(window, now);
        if self.total + u64::from(cost) > limit {
            return self.limited(rule, now, cost);
        }
        // Sorted even when the clock steps back; charges of one millisecond
        // share an entry.
        self.entries.add_sorted(now, cost);
        self.total += u64::from(cost);
        let remaining = (limit - self.total) as u32;
        Decision::allowed(rule.limit(), remaining, self.reset_after(window, now))
    }

    /// Records a charge of `cost` at `now` whatever remains: a cost learnt
    /// after the fact (a response's tokens) may take the log past its
    /// limit, into debt, and any cost is taken, also one above the limit.
    /// Checks are then denied until enough of it has left the window —
    /// exactly when the charges that make the debt leave it.
    pub fn charge(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let (limit, window) = (u64::from(rule.limit()), rule.window_ms());
        self.prune(window, now);
        let had_room = self.total < limit;
        let cost = u32::try_from(MAX_LOGGED.saturating_sub(self.total)).map_or(cost, |room| cost.min(room));
        if cost > 0 {
            self.total += u64::from(self.entries.add_sorted(now, cost));
        }
        let retry = if self.total < limit { Duration::ZERO } else { self.limited(rule, now, 1).retry_after };
        Decision::charged(rule.limit(), had_room, self.total, retry, self.reset_after(window, now))
    }

    /// Takes back up to `cost` of what was charged at `at` (a reservation
    /// given back), as far as the log still holds it at `now`: charges of
    /// one millisecond are alike, so this is exact.
    pub(crate) fn give_back(&mut self, rule: &Rule, now: u64, at: u64, cost: u32) {
        self.prune(rule.window_ms(), now);
        self.total -= u64::from(self.entries.take(at, cost));
    }

    fn reset_after(&self, window: u64, now: u64) -> Duration {
        Duration::from_millis(self.expires_at(window).saturating_sub(now))
    }

    /// When the last recorded charge leaves the window (0 when empty).
    pub fn expires_at(&self, window: u64) -> u64 {
        self.entries.last_position().map_or(0, |ts| ts.saturating_add(window))
    }

    /// Cost recorded at or before pruning time (for inspection and tests).
    pub fn recorded(&self) -> u64 {
        self.total
    }
}
