//! The generic cell rate algorithm.

use std::time::Duration;

use crate::limits::GCRA_MAX_AHEAD;
use crate::{Decision, Rule};

/// State of GCRA: the theoretical arrival time (TAT) as whole milliseconds
/// plus a remainder in `1/limit` ms, so the emission interval `W / limit` is
/// kept exactly (no floating point).
///
/// A request of cost `c` at `now` moves `TAT' = max(TAT, now) + c·W/limit`
/// and is admitted iff `TAT' - now <= W`: a full bucket holds `limit` units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gcra {
    tat_ms: u64,
    tat_rem: u64,
}

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

impl Gcra {
    /// A full bucket.
    pub fn new() -> Gcra {
        Gcra::default()
    }

    /// `(TAT - now)` in units of `1/limit` ms, at least 0.
    fn ahead(&self, n: u128, now: u64) -> u128 {
        if self.tat_ms < now { 0 } else { u128::from(self.tat_ms - now) * n + u128::from(self.tat_rem) }
    }

    /// Decides a request of `cost` (1..=limit) at `now` *without* charging
    /// it: an admitting decision reports what is left before the charge.
    pub fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        self.decide(rule, now, cost, false)
    }

    /// Decides a request of `cost` (1..=limit) at `now`, charging it if admitted.
    pub fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        self.decide(rule, now, cost, true)
    }

    fn decide(&mut self, rule: &Rule, now: u64, cost: u32, charge: bool) -> Decision {
        let n = u128::from(rule.limit());
        let w = u128::from(rule.window_ms());
        let ahead = self.ahead(n, now);
        let next = ahead + u128::from(cost) * w;
        let ms = |units: u128| Duration::from_millis(ceil_div(units, n) as u64);
        if next <= w * n {
            if !charge {
                return Decision::allowed(rule.limit(), ((w * n - ahead) / w) as u32, ms(ahead));
            }
            self.tat_ms = now.saturating_add((next / n) as u64);
            self.tat_rem = (next % n) as u64;
            let remaining = ((w * n - next) / w) as u32;
            return Decision::allowed(rule.limit(), remaining, ms(next));
        }
        let remaining = (w * n).saturating_sub(ahead) / w;
        Decision::limited(rule.limit(), remaining as u32, ms(next - w * n), ms(ahead))
    }

    /// Records a charge of `cost` at `now` whatever remains (see
    /// [`SlidingLog::charge`](super::SlidingLog::charge)): the theoretical
    /// arrival time moves by `cost·W/limit` even past a full bucket, and
    /// checks are denied until it is back within the window — the debt
    /// drains at the rule's rate (GCRA's own arithmetic). `debt` counts
    /// the units beyond a full bucket, rounded up.
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
        let n = u128::from(rule.limit());
        let w = u128::from(rule.window_ms());
        let ahead = self.ahead(n, now);
        let had_room = ahead + w <= w * n;
        let next = (ahead + u128::from(cost) * w).min(u128::from(GCRA_MAX_AHEAD));
        self.tat_ms = now.saturating_add(u64::try_from(next / n).unwrap_or(u64::MAX));
        self.tat_rem = (next % n) as u64;
        let ms = |units: u128| Duration::from_millis(u64::try_from(ceil_div(units, n)).unwrap_or(u64::MAX));
        // A request of weight 1 fits once `ahead + W <= W·limit`.
        let retry = ms((next + w).saturating_sub(w * n));
        // Units in use: what the arrival time is ahead of now, in costs.
        let used = u64::try_from(ceil_div(next, w)).unwrap_or(u64::MAX);
        Decision::charged(rule.limit(), had_room, used, retry, ms(next))
    }

    /// Takes back `cost` of a charge made at `at` (a reservation given
    /// back) when the bucket is still exactly as that charge left it
    /// (`receipt`): GCRA is not additive — a charge to an idle bucket
    /// starts from its time, so a later charge may have absorbed part of
    /// an earlier one, and taking it back then could hand out capacity
    /// nobody gave back. Otherwise the charge stays and drains at the
    /// rule's rate: never over-admits.
    pub(crate) fn give_back(&mut self, rule: &Rule, at: u64, cost: u32, receipt: Gcra) {
        if *self != receipt || self.tat_ms < at {
            return;
        }
        let n = u128::from(rule.limit());
        let held = u128::from(self.tat_ms - at) * n + u128::from(self.tat_rem);
        let Some(before) = held.checked_sub(u128::from(cost) * u128::from(rule.window_ms())) else { return };
        self.tat_ms = at + u64::try_from(before / n).unwrap_or(0);
        self.tat_rem = (before % n) as u64;
    }

    /// When the bucket is full again (0 when it already is).
    pub fn expires_at(&self) -> u64 {
        self.tat_ms.saturating_add(u64::from(self.tat_rem > 0))
    }
}
