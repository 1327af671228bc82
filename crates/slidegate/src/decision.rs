//! What a check answers.

use std::time::Duration;

/// How a decision came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Admitted and charged.
    Allowed,
    /// Admitted, but the caller has been warned (penalty escalation).
    Warned,
    /// Denied: over the limit. Nothing was charged.
    Limited,
    /// Denied: the identity is banned (penalty escalation).
    Banned,
    /// Answered by a failure policy because the store could not be asked.
    Degraded,
    /// Limiting is switched off at run time
    /// ([`Limiter::set_enabled`](crate::Limiter::set_enabled)): admitted
    /// without asking the store, nothing charged.
    Disabled,
}

/// Who answered a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Source {
    /// The store decided (and charged, if admitted).
    #[default]
    Store,
    /// The limiter's deny cache repeated an earlier denial of the store,
    /// counted down: exact, without asking the store (see
    /// [`LimiterBuilder::deny_cache`](crate::LimiterBuilder::deny_cache)).
    DenyCache,
    /// The [failure policy](crate::FailurePolicy) answered: the store
    /// failed, timed out or was not called (breaker open).
    FailurePolicy,
    /// Limiting is switched off ([`Limiter::set_enabled`](crate::Limiter::set_enabled)).
    Switch,
    /// Adaptive limits answered: the cost is above the limit they enforce
    /// now (see [`crate::adaptive`]).
    AdaptiveLimit,
    /// The cost is above the rule's configured limit: no wait admits it,
    /// so the store is not asked. Denied, with `remaining` 0 and
    /// `retry_after` and `reset_after` one window (what Envoy's rate-limit
    /// service answers such a request).
    CostAboveLimit,
    /// A shadow rule denied and was overruled
    /// ([`Rule::in_shadow`](crate::Rule::in_shadow),
    /// [`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow)): the
    /// decision is `allowed`, and every other field is the denial's
    /// (`state` `Limited` or `Banned`, its `retry_after`). Nothing was
    /// charged to the shadow rule.
    Shadow,
}

/// The answer to "may this caller do this now?".
///
/// Being over the limit is a `Decision` with `allowed == false`, never an
/// error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the request may proceed. Denied requests are not charged,
    /// except by a [budget](crate::Rule::budget), which records every cost.
    pub allowed: bool,
    /// How the decision came about.
    pub state: State,
    /// The rule's limit.
    pub limit: u32,
    /// Cost that could still be admitted now, after this decision.
    pub remaining: u32,
    /// Zero when allowed; otherwise exactly how long until this same request
    /// would be admitted if nothing else arrives.
    pub retry_after: Duration,
    /// How long until the key holds no charge at all (full quota again).
    pub reset_after: Duration,
    /// Violations (denials) of the rule's penalty counted for this identity
    /// in the violation window, at most the penalty's
    /// [`violation_cap`](crate::Penalty::violation_cap); 0 for rules without
    /// a penalty.
    pub violations: u32,
    /// Who answered.
    pub source: Source,
    /// After a charge — a [budget](crate::Rule::budget)'s check or
    /// [`Limiter::charge`](crate::Limiter::charge), recorded whatever
    /// remains: how far over the limit the identity now is, the cost that
    /// must leave the window before anything is admitted again (saturating
    /// at `u32::MAX`). 0 for other checks.
    pub debt: u32,
}

impl Decision {
    /// An admitted request.
    pub fn allowed(limit: u32, remaining: u32, reset_after: Duration) -> Decision {
        Decision {
            allowed: true,
            state: State::Allowed,
            limit,
            remaining,
            retry_after: Duration::ZERO,
            reset_after,
            violations: 0,
            source: Source::Store,
            debt: 0,
        }
    }

    /// A request denied for being over the limit.
    pub fn limited(limit: u32, remaining: u32, retry_after: Duration, reset_after: Duration) -> Decision {
        Decision {
            allowed: false,
            state: State::Limited,
            limit,
            remaining,
            retry_after,
            reset_after,
            violations: 0,
            source: Source::Store,
            debt: 0,
        }
    }

    /// A request whose cost is above `rule`'s limit: never admissible
    /// (see [`Source::CostAboveLimit`]).
    pub fn cost_above_limit(rule: &crate::Rule) -> Decision {
        let window = rule.window();
        Decision::limited(rule.limit(), 0, window, window).from(Source::CostAboveLimit)
    }

    /// A request admitted because limiting is switched off.
    pub fn disabled(limit: u32) -> Decision {
        Decision {
            allowed: true,
            state: State::Disabled,
            limit,
            remaining: limit,
            retry_after: Duration::ZERO,
            reset_after: Duration::ZERO,
            violations: 0,
            source: Source::Switch,
            debt: 0,
        }
    }

    /// A charge recorded whatever remained, with `remaining` and `debt`
    /// from the cost now counted (`used`). It is `allowed` when the
    /// identity `had_room` before it (what a budget's check answers).
    /// `retry_after` is how long until a request of weight 1 would be
    /// admitted.
    pub(crate) fn charged(
        limit: u32,
        had_room: bool,
        used: u64,
        retry_after: Duration,
        reset_after: Duration,
    ) -> Decision {
        let over = used.saturating_sub(u64::from(limit));
        let remaining = u32::try_from(u64::from(limit).saturating_sub(used)).unwrap_or(u32::MAX);
        let debt = u32::try_from(over).unwrap_or(u32::MAX);
        let mut decision =
            Decision { remaining, retry_after, debt, ..Decision::allowed(limit, 0, reset_after) };
        if !had_room {
            decision.allowed = false;
            decision.state = State::Limited;
        }
        decision
    }

    /// The same decision, from `source`.
    pub(crate) fn from(mut self, source: Source) -> Decision {
        self.source = source;
        self
    }

    /// The same decision admitted by shadow mode, when it is a denial.
    pub(crate) fn shadowed(mut self) -> Decision {
        if !self.allowed {
            self.allowed = true;
            self.source = Source::Shadow;
        }
        self
    }

    /// Whether a shadow rule denied it (and it was admitted anyway).
    pub fn is_shadow_denial(&self) -> bool {
        self.source == Source::Shadow
    }

    /// Whether the request may proceed.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }
}
