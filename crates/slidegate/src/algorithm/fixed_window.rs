//! Fixed windows aligned to multiples of the window length.

use std::time::Duration;

use crate::{Decision, Rule};

/// State of a fixed window: which window, and how much it has admitted.
///
/// If the clock steps back into an earlier window, the later window's count
/// is kept (conservative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedWindow {
    index: u64,
    count: u32,
}

impl FixedWindow {
    /// An empty window.
    pub fn new() -> FixedWindow {
        FixedWindow::default()
    }

    /// Decides a request of `cost` (1..=limit) at `now` *without* counting
    /// it: an admitting decision reports what is left before the charge.
    /// Changes nothing (as the Redis script, which writes only a charge).
    pub fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let mut current = *self;
        current.roll(rule.window_ms(), now);
        current.decide(rule, now, cost)
    }

    /// Moves to the window of `now`, empty, when it is later than the
    /// state's (an earlier one keeps the later count).
    fn roll(&mut self, window: u64, now: u64) {
        let cur = now / window;
        if cur > self.index {
            *self = FixedWindow { index: cur, count: 0 };
        }
    }

    /// The verdict for `cost` in the state's window (rolled to `now`).
    fn decide(&self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let window = rule.window_ms();
        let ends = Duration::from_millis(self.ends_at(window) - now);
        if u64::from(self.count) + u64::from(cost) <= u64::from(rule.limit()) {
            let reset = if self.count > 0 { ends } else { Duration::ZERO };
            return Decision::allowed(rule.limit(), rule.limit() - self.count, reset);
        }
        Decision::limited(rule.limit(), rule.limit().saturating_sub(self.count), ends, ends)
    }

    /// Decides a request of `cost` (1..=limit) at `now`, counting it if admitted.
    pub fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let mut current = *self;
        current.roll(rule.window_ms(), now);
        let peeked = current.decide(rule, now, cost);
        if !peeked.allowed {
            return peeked;
        }
        *self = current;
        self.count += cost;
        let ends = Duration::from_millis(self.ends_at(rule.window_ms()) - now);
        Decision::allowed(rule.limit(), rule.limit() - self.count, ends)
    }

    /// Records a charge of `cost` at `now` whatever remains (see
    /// [`SlidingLog::charge`](super::SlidingLog::charge)): the window's
    /// count may pass the limit; checks are denied until the window ends,
    /// which pays any debt off at once (a fixed window's own arithmetic).
    ///
    /// A charge of 0 changes nothing (a stepped-back clock keeps seeing
    /// the state as it was).
    pub fn charge(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        if cost == 0 {
            let mut unchanged = *self;
            return unchanged.record(rule, now, 0);
        }
        self.record(rule, now, cost)
    }

    fn record(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        let window = rule.window_ms();
        self.roll(window, now);
        let had_room = self.count < rule.limit();
        self.count = self.count.saturating_add(cost);
        let ends = Duration::from_millis(self.ends_at(window) - now);
        let retry = if self.count < rule.limit() { Duration::ZERO } else { ends };
        let reset = if self.count > 0 { ends } else { Duration::ZERO };
        Decision::charged(rule.limit(), had_room, u64::from(self.count), retry, reset)
    }

    /// Takes back up to `cost` from the window of `at` (a reservation given
    /// back), if the state still counts that window.
    pub(crate) fn give_back(&mut self, rule: &Rule, at: u64, cost: u32) {
        if self.index == at / rule.window_ms() {
            self.count -= cost.min(self.count);
        }
    }

    /// When the current window ends (saturating at the end of time).
    fn ends_at(&self, window: u64) -> u64 {
        self.index.saturating_add(1).saturating_mul(window)
    }

    /// When the current window ends (0 when nothing was counted).
    pub fn expires_at(&self, window: u64) -> u64 {
        if self.count == 0 { 0 } else { self.ends_at(window) }
    }
}
