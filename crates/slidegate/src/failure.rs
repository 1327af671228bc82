//! What a check answers when the store cannot: failure policies.

use std::fmt;
use std::time::Duration;

use crate::{Decision, Error, ErrorKind, Source, State};

/// How the [`Limiter`](crate::Limiter) answers when its store fails (an
/// error, the deadline passed, or the circuit breaker is open).
///
/// Every such answer is a [`Decision`] whose state is
/// [`State::Degraded`] (or, under [`Fail`](FailurePolicy::Fail), an `Err`),
/// counted in `slidegate_degraded_total` and logged — never a silent
/// allow. Invalid input (an empty key, a cost of 0) is not a store
/// failure: it is returned as an `Err` whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Admit the request. Keeps the service up at the price of no limit
    /// while the store is down.
    FailOpen,
    /// Deny the request, with `retry_after` the time until the store is
    /// tried again (at least 1 s when unknown). For limits that protect
    /// something more fragile than the service itself.
    FailClosed,
    /// Decide with a local in-memory limiter (the default): each process
    /// enforces the rule on its own, so the fleet admits at most
    /// (processes × limit) while the shared store is gone — a second layer
    /// that keeps every process alive.
    #[default]
    Fallback,
    /// Fail the check: it returns an `Err` whose kind says why
    /// ([`Timeout`](ErrorKind::Timeout), [`Unavailable`](ErrorKind::Unavailable)
    /// — also while the breaker is open —, [`Backend`](ErrorKind::Backend)
    /// or [`CapacityExhausted`](ErrorKind::CapacityExhausted)), so the
    /// caller's own policy decides. slidegate's edges answer it with
    /// `503 Service Unavailable` or gRPC `UNAVAILABLE` (Envoy's
    /// `failure_mode_deny` then decides for the proxy).
    Fail,
}

impl FailurePolicy {
    /// `fail_open`, `fail_closed` or `fallback` (metric labels, logs, config).
    pub fn as_str(&self) -> &'static str {
        match self {
            FailurePolicy::FailOpen => "fail_open",
            FailurePolicy::FailClosed => "fail_closed",
            FailurePolicy::Fallback => "fallback",
            FailurePolicy::Fail => "fail",
        }
    }
}

impl fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FailurePolicy {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "fail_open" | "open" => Ok(FailurePolicy::FailOpen),
            "fail_closed" | "closed" => Ok(FailurePolicy::FailClosed),
            "fallback" | "local" => Ok(FailurePolicy::Fallback),
            "fail" | "error" | "unavailable" => Ok(FailurePolicy::Fail),
            _ => Err(Error::new(
                ErrorKind::InvalidRule,
                format!("unknown failure policy {text:?}: expected fail-open, fail-closed, fallback or fail"),
            )),
        }
    }
}

/// Why the store was not (successfully) asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Timeout,
    Unavailable,
    Backend,
    Capacity,
    BreakerOpen,
}

impl Reason {
    pub(crate) fn of(error: &Error) -> Reason {
        match error.kind() {
            ErrorKind::Timeout => Reason::Timeout,
            ErrorKind::Unavailable => Reason::Unavailable,
            ErrorKind::CapacityExhausted => Reason::Capacity,
            _ => Reason::Backend,
        }
    }

    /// Whether the call may have run in the store though it failed: it
    /// was sent (a timeout, a lost connection, a reply that could not be
    /// read), not refused before (an open breaker, a full local store).
    pub(crate) fn may_have_run(self) -> bool {
        matches!(self, Reason::Timeout | Reason::Unavailable | Reason::Backend)
    }

    /// The error a check returns under [`FailurePolicy::Fail`].
    pub(crate) fn error(self) -> Error {
        let kind = match self {
            Reason::Timeout => ErrorKind::Timeout,
            Reason::Unavailable | Reason::BreakerOpen => ErrorKind::Unavailable,
            Reason::Backend => ErrorKind::Backend,
            Reason::Capacity => ErrorKind::CapacityExhausted,
        };
        Error::new(kind, format!("the store failed ({}); the failure policy is `fail`", self.as_str()))
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Timeout => "timeout",
            Reason::Unavailable => "unavailable",
            Reason::Backend => "backend",
            Reason::Capacity => "capacity",
            Reason::BreakerOpen => "breaker_open",
        }
    }
}

/// Whether `error` is the caller's fault (returned as is) rather than the
/// store's (answered by the policy). A clock beyond [`MAX_TIME_MS`](crate::limits::MAX_TIME_MS)
/// is the caller's too: every store, the fallback included, would refuse it.
pub(crate) fn is_input_error(error: &Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::InvalidKey | ErrorKind::InvalidCost | ErrorKind::InvalidRule | ErrorKind::InvalidTime
    )
}

/// The degraded answer of `FailOpen` or `FailClosed`.
pub(crate) fn fixed_answer(policy: FailurePolicy, limit: u32, cost: u32, retry: Duration) -> Decision {
    let allowed = policy == FailurePolicy::FailOpen;
    Decision {
        allowed,
        state: State::Degraded,
        limit,
        remaining: if allowed { limit.saturating_sub(cost) } else { 0 },
        retry_after: if allowed { Duration::ZERO } else { retry.max(Duration::from_secs(1)) },
        reset_after: Duration::ZERO,
        violations: 0,
        source: Source::FailurePolicy,
        debt: 0,
    }
}

/// A decision of the local fallback store, marked degraded.
pub(crate) fn mark_degraded(mut decision: Decision) -> Decision {
    decision.state = State::Degraded;
    decision.source = Source::FailurePolicy;
    decision
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_policies() {
        assert_eq!("fail-open".parse::<FailurePolicy>().unwrap(), FailurePolicy::FailOpen);
        assert_eq!("FAIL_CLOSED".parse::<FailurePolicy>().unwrap(), FailurePolicy::FailClosed);
        assert_eq!("fallback".parse::<FailurePolicy>().unwrap(), FailurePolicy::Fallback);
        assert_eq!("unavailable".parse::<FailurePolicy>().unwrap(), FailurePolicy::Fail);
        assert_eq!(FailurePolicy::Fail.to_string().parse::<FailurePolicy>().unwrap(), FailurePolicy::Fail);
        assert!("sometimes".parse::<FailurePolicy>().unwrap_err().to_string().contains("fail-open"));
        assert_eq!(FailurePolicy::default(), FailurePolicy::Fallback);
    }

    #[test]
    fn fixed_answers() {
        let open = fixed_answer(FailurePolicy::FailOpen, 10, 3, Duration::ZERO);
        assert!(open.allowed && open.state == State::Degraded && open.remaining == 7);
        let closed = fixed_answer(FailurePolicy::FailClosed, 10, 3, Duration::from_millis(10));
        assert!(!closed.allowed && closed.retry_after == Duration::from_secs(1));
    }
}
