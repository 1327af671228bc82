//! Penalty escalation: repeat offenders are warned, then banned.
//!
//! Every denial of a rule with a [`Penalty`] is a *violation*, counted per
//! identity over a sliding violation window. Once the count reaches
//! `warn_after`, admitted requests carry [`State::Warned`](crate::State::Warned)
//! and the count; once it reaches `ban_after`, the identity is banned for
//! `ban_for`: every request is denied as [`State::Banned`](crate::State::Banned)
//! with the remaining ban as `retry_after`, without touching the rule's
//! quota, and the violation count starts over. Requests denied *by* a ban
//! are not violations, so a ban never extends itself.
//!
//! Stores check and update the penalty atomically with the rule (the Redis
//! store in the same script, on keys sharing the identity's hash tag).

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::time::Duration;

use crate::limits::{MAX_VIOLATIONS, MAX_WINDOW};
use crate::{Decision, Error, State};

/// How a rule escalates against identities that keep hitting it.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use slidegate::{Penalty, Rule};
///
/// // 5 logins per minute; after 3 denials in 10 minutes warn, after 10 ban for an hour.
/// let penalty = Penalty::new(Duration::from_secs(600))?
///     .warn_after(3)?
///     .ban_after(10, Duration::from_secs(3600))?;
/// let rule = Rule::per_minute(NonZeroU32::new(5).unwrap()).named("login")?.with_penalty(penalty)?;
/// assert_eq!(rule.penalty().unwrap().ban_for(), Some(Duration::from_secs(3600)));
/// # Ok::<(), slidegate::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Penalty {
    window_ms: u64,
    warn_after: Option<NonZeroU32>,
    ban_after: Option<NonZeroU32>,
    ban_for_ms: u64,
}

fn whole_ms(what: &str, d: Duration) -> Result<u64, Error> {
    if d < Duration::from_millis(1) || d > MAX_WINDOW || !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(Error::invalid_rule(format!(
            "{what} must be a whole number of milliseconds from 1ms to {} days, got {d:?}",
            MAX_WINDOW.as_secs() / 86_400
        )));
    }
    Ok(d.as_secs() * 1000 + u64::from(d.subsec_millis()))
}

fn count(what: &str, n: u32) -> Result<NonZeroU32, Error> {
    NonZeroU32::new(n)
        .filter(|n| n.get() <= MAX_VIOLATIONS)
        .ok_or_else(|| Error::invalid_rule(format!("{what} must be 1..={MAX_VIOLATIONS}, got {n}")))
}

impl Penalty {
    /// Violations are counted over this sliding window; no warning or ban
    /// until [`warn_after`](Self::warn_after) / [`ban_after`](Self::ban_after).
    ///
    /// # Errors
    ///
    /// [`InvalidRule`](crate::ErrorKind::InvalidRule) for a window shorter
    /// than 1 ms, longer than [`MAX_WINDOW`], or not whole milliseconds.
    pub fn new(violation_window: Duration) -> Result<Penalty, Error> {
        Ok(Penalty {
            window_ms: whole_ms("violation window", violation_window)?,
            warn_after: None,
            ban_after: None,
            ban_for_ms: 0,
        })
    }

    /// Admitted requests carry a warning once `violations` have been counted.
    ///
    /// # Errors
    ///
    /// [`InvalidRule`](crate::ErrorKind::InvalidRule) unless
    /// 1 ≤ `violations` ≤ [`MAX_VIOLATIONS`].
    pub fn warn_after(mut self, violations: u32) -> Result<Penalty, Error> {
        self.warn_after = Some(count("warn_after", violations)?);
        Ok(self)
    }

    /// The identity is banned for `ban_for` once `violations` are counted.
    ///
    /// # Errors
    ///
    /// [`InvalidRule`](crate::ErrorKind::InvalidRule) unless
    /// 1 ≤ `violations` ≤ [`MAX_VIOLATIONS`] and `ban_for` is 1 ms to
    /// [`MAX_WINDOW`] in whole milliseconds.
    pub fn ban_after(mut self, violations: u32, ban_for: Duration) -> Result<Penalty, Error> {
        self.ban_after = Some(count("ban_after", violations)?);
        self.ban_for_ms = whole_ms("ban duration", ban_for)?;
        Ok(self)
    }

    /// The violation window.
    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The violation window in milliseconds.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// Violations after which admitted requests are warned.
    pub fn warn_threshold(&self) -> Option<u32> {
        self.warn_after.map(NonZeroU32::get)
    }

    /// Violations after which the identity is banned.
    pub fn ban_threshold(&self) -> Option<u32> {
        self.ban_after.map(NonZeroU32::get)
    }

    /// How long a ban lasts (`None` without a ban threshold).
    pub fn ban_for(&self) -> Option<Duration> {
        self.ban_after.map(|_| Duration::from_millis(self.ban_for_ms))
    }

    /// The ban duration in milliseconds (0 without a ban threshold).
    pub fn ban_for_ms(&self) -> u64 {
        if self.ban_after.is_some() { self.ban_for_ms } else { 0 }
    }

    /// The most violations a store keeps per identity: the higher of the
    /// two thresholds ([`MAX_VIOLATIONS`] when neither is set). Only the
    /// newest violations are kept, and whether the count in the window
    /// reaches a threshold is the same with the older ones dropped, so a
    /// flood of denials costs bounded state; decisions report the count up
    /// to this cap.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidegate::Penalty;
    ///
    /// let penalty = Penalty::new(Duration::from_secs(3600))?.warn_after(3)?;
    /// assert_eq!(penalty.violation_cap(), 3);
    /// assert_eq!(penalty.ban_after(10, Duration::from_secs(60))?.violation_cap(), 10);
    /// # Ok::<(), slidegate::Error>(())
    /// ```
    pub fn violation_cap(&self) -> u32 {
        match (self.warn_threshold(), self.ban_threshold()) {
            (None, None) => MAX_VIOLATIONS,
            (warn, ban) => warn.unwrap_or(0).max(ban.unwrap_or(0)),
        }
    }
}

/// The pure state of a penalty for one identity: its newest violation
/// times (at most [`Penalty::violation_cap`]) and the end of its ban. The
/// memory store runs it; the Redis script implements the same steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PenaltyState {
    /// Times (ms) of the newest violations still in the window, oldest
    /// first; at most the penalty's cap.
    violations: VecDeque<u64>,
    /// Time (ms) the ban ends; no ban at or after it.
    banned_until: u64,
}

impl PenaltyState {
    /// No violations, no ban.
    pub fn new() -> PenaltyState {
        PenaltyState::default()
    }

    /// The ban decision at `now`, if the identity is banned.
    pub fn banned(&self, penalty: &Penalty, limit: u32, now: u64) -> Option<Decision> {
        (self.banned_until > now).then(|| {
            let left = Duration::from_millis(self.banned_until - now);
            Decision {
                allowed: false,
                state: State::Banned,
                limit,
                remaining: 0,
                retry_after: left,
                reset_after: left,
                violations: penalty.ban_threshold().unwrap_or(0),
                source: crate::Source::Store,
                debt: 0,
            }
        })
    }

    fn prune(&mut self, penalty: &Penalty, now: u64) {
        while self.violations.front().is_some_and(|&t| t.saturating_add(penalty.window_ms) <= now) {
            self.violations.pop_front();
        }
    }

    /// Marks an admitting `decision` warned when the violations counted at
    /// `now` reach the warning threshold, and reports the count.
    pub fn on_admit(&mut self, penalty: &Penalty, now: u64, decision: &mut Decision) {
        self.prune(penalty, now);
        let count = self.violations.len() as u32;
        decision.violations = count;
        if penalty.warn_threshold().is_some_and(|warn| count >= warn) {
            decision.state = State::Warned;
        }
    }

    /// Reports on `decision` the violations counted at `now` — and, when it
    /// admits, the warning they give — changing nothing (a peek).
    pub fn observe(&self, penalty: &Penalty, now: u64, decision: &mut Decision) {
        let count = self.violations.iter().filter(|&&t| t.saturating_add(penalty.window_ms) > now).count();
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        decision.violations = count;
        if decision.allowed && penalty.warn_threshold().is_some_and(|warn| count >= warn) {
            decision.state = State::Warned;
        }
    }

    /// Counts the denial `decision` at `now` as a violation; bans the
    /// identity (and turns the decision into a ban) when the count reaches
    /// the ban threshold.
    pub fn on_deny(&mut self, penalty: &Penalty, now: u64, decision: &mut Decision) {
        self.prune(penalty, now);
        let at = self.violations.partition_point(|&t| t <= now);
        self.violations.insert(at, now);
        // The times in the window are the newest ones (a suffix), so
        // dropping the oldest beyond the cap never changes whether the count
        // in the window reaches a threshold, both at most the cap.
        let cap = penalty.violation_cap() as usize;
        while self.violations.len() > cap {
            self.violations.pop_front();
        }
        let count = self.violations.len() as u32;
        decision.violations = count;
        if penalty.ban_threshold().is_some_and(|ban| count >= ban) {
            let ban_for = Duration::from_millis(penalty.ban_for_ms);
            self.banned_until = now.saturating_add(penalty.ban_for_ms);
            self.violations.clear();
            decision.state = State::Banned;
            decision.retry_after = decision.retry_after.max(ban_for);
            decision.reset_after = decision.reset_after.max(ban_for);
        }
    }

    /// The time (ms) from which this state holds nothing (0 when empty).
    pub fn expires_at(&self, penalty: &Penalty) -> u64 {
        let last = self.violations.back().map_or(0, |&t| t.saturating_add(penalty.window_ms));
        last.max(self.banned_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates() {
        assert!(Penalty::new(Duration::ZERO).is_err());
        let p = Penalty::new(Duration::from_secs(1)).unwrap();
        assert!(p.warn_after(0).is_err());
        assert!(p.ban_after(MAX_VIOLATIONS + 1, Duration::from_secs(1)).is_err());
        assert!(p.ban_after(3, Duration::from_micros(10)).unwrap_err().to_string().contains("ban duration"));
    }

    #[test]
    fn warns_then_bans_then_starts_over() {
        let p = Penalty::new(Duration::from_millis(100))
            .unwrap()
            .warn_after(2)
            .unwrap()
            .ban_after(3, Duration::from_millis(50))
            .unwrap();
        let mut s = PenaltyState::new();
        let deny = || Decision::limited(1, 0, Duration::from_millis(5), Duration::from_millis(5));
        let allow = || Decision::allowed(1, 0, Duration::from_millis(5));
        let mut d = deny();
        s.on_deny(&p, 0, &mut d);
        assert_eq!((d.state, d.violations), (State::Limited, 1));
        let mut d = deny();
        s.on_deny(&p, 10, &mut d);
        let mut a = allow();
        s.on_admit(&p, 20, &mut a);
        assert_eq!((a.state, a.violations), (State::Warned, 2));
        let mut d = deny();
        s.on_deny(&p, 30, &mut d);
        assert_eq!((d.state, d.retry_after), (State::Banned, Duration::from_millis(50)));
        assert_eq!(s.banned(&p, 1, 79).unwrap().retry_after, Duration::from_millis(1));
        assert!(s.banned(&p, 1, 80).is_none());
        let mut a = allow();
        s.on_admit(&p, 80, &mut a);
        assert_eq!((a.state, a.violations), (State::Allowed, 0), "the count starts over after a ban");
        // Violations leave the window.
        let mut d = deny();
        s.on_deny(&p, 100, &mut d);
        let mut a = allow();
        s.on_admit(&p, 200, &mut a);
        assert_eq!(a.violations, 0);
    }

    #[test]
    fn a_flood_keeps_only_the_cap() {
        let p = Penalty::new(Duration::from_secs(3600)).unwrap().warn_after(3).unwrap();
        assert_eq!(p.violation_cap(), 3);
        let mut s = PenaltyState::new();
        for now in 0..20_000 {
            let mut d = Decision::limited(1, 0, Duration::from_millis(5), Duration::from_millis(5));
            s.on_deny(&p, now, &mut d);
            assert_eq!(d.violations, (now as u32 + 1).min(3));
        }
        assert_eq!(s.violations.len(), 3, "one entry per denial no more");
        assert_eq!(s.violations, [19_997, 19_998, 19_999]);
        // A clock stepping back lands among them; the oldest still goes.
        let mut d = Decision::limited(1, 0, Duration::ZERO, Duration::ZERO);
        s.on_deny(&p, 19_998, &mut d);
        assert_eq!(s.violations, [19_998, 19_998, 19_999]);
        let mut a = Decision::allowed(1, 0, Duration::ZERO);
        s.on_admit(&p, 20_000, &mut a);
        assert_eq!((a.state, a.violations), (State::Warned, 3));
        let plain = Penalty::new(Duration::from_secs(1)).unwrap();
        assert_eq!(
            plain.violation_cap(),
            MAX_VIOLATIONS,
            "no threshold: counted up to the most any may name"
        );
    }
}
