//! The algorithms as pure, deterministic state machines over explicit time.
//!
//! Each takes its state, a rule, the time in milliseconds and a cost, and
//! returns a [`Decision`]. The memory store runs them
//! directly; the Redis scripts implement the same definitions, and the tests
//! compare the two decision by decision. Costs must already be validated
//! (`1..=limit`, see [`validate_cost`](crate::store::validate_cost)).
//!
//! ```
//! use std::num::NonZeroU32;
//! use slidegate::{Rule, algorithm::State};
//!
//! let rule = Rule::per_second(NonZeroU32::new(2).unwrap());
//! let mut state = State::new(&rule);
//! assert!(state.check(&rule, 0, 1).allowed);
//! assert!(state.check(&rule, 10, 1).allowed);
//! let denied = state.check(&rule, 20, 1);
//! assert!(!denied.allowed);
//! // The first charge (t = 0) leaves the window at t = 1000.
//! assert_eq!(denied.retry_after.as_millis(), 980);
//! ```

#[cfg(test)]
mod charge_tests;
mod entries;
mod fixed_window;
mod gcra;
mod reserve;
mod sliding_counter;
mod sliding_log;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use reserve::Receipt;
pub use sliding_counter::{SlidingCounter, bucket_of, drop_time};
pub use sliding_log::SlidingLog;

use crate::{Algorithm, Decision, Rule};

/// The state of any algorithm, for code that picks the algorithm at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// See [`SlidingLog`].
    Log(SlidingLog),
    /// See [`SlidingCounter`].
    Counter(SlidingCounter),
    /// See [`FixedWindow`].
    Fixed(FixedWindow),
    /// See [`Gcra`].
    Gcra(Gcra),
}

impl State {
    /// Empty state for `rule`'s algorithm.
    pub fn new(rule: &Rule) -> State {
        match rule.algorithm() {
            Algorithm::SlidingLog => State::Log(SlidingLog::new()),
            Algorithm::SlidingCounter { .. } => State::Counter(SlidingCounter::new()),
            Algorithm::FixedWindow => State::Fixed(FixedWindow::new()),
            Algorithm::Gcra => State::Gcra(Gcra::new()),
        }
    }

    /// Decides a request of `cost` (1..=limit) at `now` ms, charging it if
    /// admitted.
    ///
    /// If the state belongs to another algorithm than `rule`'s (a caller
    /// mixing states), it is replaced by fresh state for `rule`.
    ///
    /// A [budget](Rule::budget) is charged ([`charge`](Self::charge)):
    /// its cost is recorded whatever remains.
    pub fn check(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        if rule.is_budget() {
            return self.charge(rule, now, cost);
        }
        self.matching(rule);
        match self {
            State::Log(s) => s.check(rule, now, cost),
            State::Counter(s) => s.check(rule, now, cost),
            State::Fixed(s) => s.check(rule, now, cost),
            State::Gcra(s) => s.check(rule, now, cost),
        }
    }

    /// [`check`](Self::check), and [`expires_at`](Self::expires_at) after
    /// it (worked out once where the algorithm computes both).
    pub(crate) fn check_expiring(&mut self, rule: &Rule, now: u64, cost: u32) -> (Decision, u64) {
        self.matching(rule);
        if let State::Counter(s) = self
            && !rule.is_budget()
        {
            let (decision, expires_at) = s.check_expiring(rule, now, cost);
            return (decision, u64::try_from(expires_at).unwrap_or(0));
        }
        let decision = self.check(rule, now, cost);
        (decision, self.expires_at(rule))
    }

    /// Decides like [`check`](Self::check) but charges nothing: an admitting
    /// decision reports the remaining quota and reset time *before* the
    /// charge. Only expired state is dropped. Multi-dimension checks peek at
    /// every dimension and charge them only if all admit. A
    /// [budget](Rule::budget) admits whatever the cost while anything
    /// remains: it is peeked as a charge of 0, which also reports its debt.
    pub fn peek(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        if rule.is_budget() {
            return self.charge(rule, now, 0);
        }
        self.matching(rule);
        match self {
            State::Log(s) => s.peek(rule, now, cost),
            State::Counter(s) => s.peek(rule, now, cost),
            State::Fixed(s) => s.peek(rule, now, cost),
            State::Gcra(s) => s.peek(rule, now, cost),
        }
    }

    /// Records a charge of `cost` at `now` whatever remains: a budget's
    /// cost learnt after the fact. The state may go past `rule`'s limit
    /// (into debt, [`Decision::debt`]); any cost is taken, also 0 or one
    /// above the limit. Later checks are denied until the debt is paid
    /// off: exactly when enough of the window has slid past for the
    /// sliding log and counter, at the window's end for the fixed window,
    /// at the rule's rate for GCRA (up to
    /// [`GCRA_MAX_AHEAD`](crate::limits::GCRA_MAX_AHEAD)). The sliding log
    /// holds up to [`MAX_LOGGED`](crate::limits::MAX_LOGGED); one entry (a
    /// millisecond, a counter's bucket, a fixed window) up to `u32::MAX`.
    ///
    /// The decision is `allowed` when the identity had something left
    /// before the charge (what a budget's check answers); its
    /// `retry_after` is how long until a request of weight 1 would be
    /// admitted.
    pub fn charge(&mut self, rule: &Rule, now: u64, cost: u32) -> Decision {
        self.matching(rule);
        match self {
            State::Log(s) => s.charge(rule, now, cost),
            State::Counter(s) => s.charge(rule, now, cost),
            State::Fixed(s) => s.charge(rule, now, cost),
            State::Gcra(s) => s.charge(rule, now, cost),
        }
    }

    fn matching(&mut self, rule: &Rule) {
        let matches = matches!(
            (&*self, rule.algorithm()),
            (State::Log(_), Algorithm::SlidingLog)
                | (State::Counter(_), Algorithm::SlidingCounter { .. })
                | (State::Fixed(_), Algorithm::FixedWindow)
                | (State::Gcra(_), Algorithm::Gcra)
        );
        if !matches {
            *self = State::new(rule);
        }
    }

    /// The time (ms) from which this state holds no charge and can be dropped.
    pub fn expires_at(&self, rule: &Rule) -> u64 {
        match self {
            State::Log(s) => s.expires_at(rule.window_ms()),
            State::Counter(s) => u64::try_from(s.expires_at(rule)).unwrap_or(0),
            State::Fixed(s) => s.expires_at(rule.window_ms()),
            State::Gcra(s) => s.expires_at(),
        }
    }
}
