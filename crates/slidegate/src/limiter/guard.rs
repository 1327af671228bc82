//! The protection every store call gets: circuit breaker, deadline,
//! metrics, the latency signal of adaptive limits; and the failure policy's
//! answers when the call fails.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

// Tokio's Instant, so paused test time times store calls deterministically.
use tokio::time::Instant;
use tracing::Instrument;

use super::Inner;
use crate::breaker::{Admission, Breaker};
use crate::failure::{self, Reason};
use crate::store::{Dimensions, Request};
use crate::telemetry::{LogThrottle, THROTTLED_NOTE};
use crate::{Decision, Error, ErrorKind, FailurePolicy, MultiDecision, Rule, Store, telemetry};

/// How a guarded store call ended.
pub(super) enum Outcome<T> {
    /// The store answered.
    Answered(T),
    /// The input was invalid: the caller's error, returned as is.
    Invalid(Error),
    /// The store failed, timed out, or was not called (breaker open).
    Failed(Reason),
}

/// Lets the next call probe if a probe ends without a verdict (its future
/// was dropped mid-call, or the input was invalid).
struct ProbeGuard<'a> {
    breaker: Option<&'a Breaker>,
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if let Some(breaker) = self.breaker {
            breaker.release_probe();
        }
    }
}

impl<S: Store> Inner<S> {
    /// Makes the call `call` makes on the store behind the breaker and the
    /// deadline (a call the breaker rejects is never made).
    pub(super) async fn guarded<T, F: Future<Output = Result<T, Error>>>(
        &self,
        call: impl FnOnce() -> F,
    ) -> Outcome<T> {
        let admission = self.breaker.as_ref().map_or(Admission::Call, |b| b.admit(self.clock.now_ms()));
        if admission == Admission::Reject {
            return Outcome::Failed(Reason::BreakerOpen);
        }
        let probe = admission == Admission::Probe;
        let mut guard = ProbeGuard { breaker: if probe { self.breaker.as_ref() } else { None } };

        let started = Instant::now();
        // A span per store call (free when no subscriber listens): shows the
        // deadline and whether this call is the breaker's probe.
        let span = tracing::debug_span!(target: "slidegate", "store_call", deadline = ?self.deadline, probe);
        let result = match tokio::time::timeout(self.deadline, call()).instrument(span).await {
            Ok(result) => result,
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!("the store did not answer within the {:?} deadline", self.deadline),
            )),
        };
        let elapsed = started.elapsed();
        match result {
            Ok(answer) => {
                guard.breaker = None;
                telemetry::store_call(elapsed, "ok");
                self.observe_latency(elapsed);
                if let Some(breaker) = &self.breaker {
                    breaker.on_success(probe);
                }
                Outcome::Answered(answer)
            }
            // The guard releases a probe that got no verdict.
            Err(error) if failure::is_input_error(&error) => Outcome::Invalid(error),
            Err(error) => {
                guard.breaker = None;
                telemetry::store_call(elapsed, if error.is_timeout() { "timeout" } else { "error" });
                if error.is_timeout() {
                    // A store too slow to answer is the slowest of all: a
                    // timeout counts (as the time waited), so a store stuck
                    // past the deadline cannot look fast by never succeeding.
                    self.observe_latency(elapsed);
                }
                if let Some(breaker) = &self.breaker {
                    breaker.on_failure(probe, self.clock.now_ms());
                }
                if let Some(held_back) = self.store_failed.pass(self.clock.now_ms(), LogThrottle::EVERY_MS) {
                    tracing::warn!(
                        target: "slidegate",
                        %error,
                        policy = %self.policy,
                        held_back,
                        "store failed; answering by failure policy{THROTTLED_NOTE}"
                    );
                }
                Outcome::Failed(Reason::of(&error))
            }
        }
    }

    pub(super) fn retry_hint(&self) -> Duration {
        self.breaker.as_ref().map_or(Duration::ZERO, |b| b.open_remaining(self.clock.now_ms()))
    }

    /// The failure policy's answer to one request.
    pub(super) fn degrade(&self, request: &Request<'_>, reason: Reason) -> Result<Decision, Error> {
        let (rule, cost) = (request.rule(), request.cost());
        let decision = match self.policy {
            FailurePolicy::Fail => {
                telemetry::degraded(rule, self.policy.as_str(), reason.as_str());
                return Err(reason.error());
            }
            FailurePolicy::Fallback => match self.fallback.check_sync(request) {
                Ok(local) => failure::mark_degraded(local),
                Err(error) if failure::is_input_error(&error) => return Err(error),
                Err(error) => self.fallback_failed(&error, rule, cost),
            },
            policy => failure::fixed_answer(policy, rule.limit(), cost, self.retry_hint()),
        };
        self.count_degraded(rule, reason, &decision);
        Ok(decision)
    }

    /// The failure policy's answer to a multi-dimension request.
    pub(super) fn degrade_all(
        &self,
        dimensions: &Dimensions<'_>,
        reason: Reason,
    ) -> Result<MultiDecision, Error> {
        if self.policy == FailurePolicy::Fail {
            for request in dimensions.requests() {
                telemetry::degraded(request.rule(), self.policy.as_str(), reason.as_str());
            }
            return Err(reason.error());
        }
        let multi = self.policy_answer(dimensions, || self.fallback.check_all_sync(dimensions))?;
        for (request, decision) in dimensions.requests().iter().zip(&multi.decisions) {
            self.count_degraded(request.rule(), reason, decision);
        }
        Ok(multi)
    }

    /// The failure policy's answer to a peek: the fallback store peeked,
    /// not charged. Logged, not counted (a peek decides nothing).
    pub(super) fn degrade_peek(
        &self,
        dimensions: &Dimensions<'_>,
        reason: Reason,
    ) -> Result<MultiDecision, Error> {
        tracing::debug!(target: "slidegate", reason = reason.as_str(), "degraded peek");
        if self.policy == FailurePolicy::Fail {
            return Err(reason.error());
        }
        self.policy_answer(dimensions, || self.fallback.peek_all_sync(dimensions))
    }

    /// The policy's decisions for `dimensions`; `fallback` asks the
    /// fallback store.
    fn policy_answer(
        &self,
        dimensions: &Dimensions<'_>,
        fallback: impl FnOnce() -> Result<MultiDecision, Error>,
    ) -> Result<MultiDecision, Error> {
        let requests = dimensions.requests();
        let decisions = match self.policy {
            FailurePolicy::Fallback => match fallback() {
                Ok(local) => local.decisions.into_iter().map(failure::mark_degraded).collect(),
                Err(error) if failure::is_input_error(&error) => return Err(error),
                Err(error) => {
                    requests.iter().map(|r| self.fallback_failed(&error, r.rule(), r.cost())).collect()
                }
            },
            // Answered by the callers before asking.
            FailurePolicy::Fail => return Err(Reason::Unavailable.error()),
            policy => requests
                .iter()
                .map(|r| failure::fixed_answer(policy, r.rule().limit(), r.cost(), self.retry_hint()))
                .collect(),
        };
        Ok(MultiDecision::from_decisions(decisions))
    }

    /// The fallback store is full too: the policy's intent is to keep
    /// serving, so admit (degraded, counted, logged).
    fn fallback_failed(&self, error: &Error, rule: &Rule, cost: u32) -> Decision {
        if let Some(held_back) = self.fallback_failed.pass(self.clock.now_ms(), LogThrottle::EVERY_MS) {
            tracing::warn!(
                target: "slidegate",
                %error,
                held_back,
                "fallback store failed; admitting{THROTTLED_NOTE}"
            );
        }
        failure::fixed_answer(FailurePolicy::FailOpen, rule.limit(), cost, Duration::ZERO)
    }

    fn count_degraded(&self, rule: &Rule, reason: Reason, decision: &Decision) {
        telemetry::degraded(rule, self.policy.as_str(), reason.as_str());
        tracing::debug!(
            target: "slidegate",
            rule = %rule,
            reason = reason.as_str(),
            allowed = decision.allowed,
            "degraded decision"
        );
    }

    /// Updates the deny cache with the store's answer to `request`, sent at `sent`.
    pub(super) fn remember(&self, request: &Request<'_>, sent: u64, decision: &Decision) {
        let Some(cache) = &self.deny_cache else { return };
        let (rule, identity) = (request.rule(), request.identity().as_str());
        if rule.is_budget() {
            return;
        }
        if decision.allowed {
            cache.forget(rule, identity);
        } else if decision.state == crate::State::Banned
            || (rule.penalty().is_none() && !self.store.releases_charges())
        {
            // With a penalty every denial is a violation the store must
            // count, and a store that releases reservations may lift a
            // denial before its time; bans, which nothing shortens, are
            // cached either way.
            cache.insert(rule, identity, request.cost(), sent, decision);
        }
    }
}

/// What undoes a store call that may have run without saying so (a lease
/// it may have taken, a reservation it may have made): run in a task on
/// the current runtime when dropped still armed — the call failed after
/// it was sent, or the caller's future was dropped mid-call.
pub(super) struct Undo(Option<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Undo {
    /// Armed with `undo`, which runs only if this is dropped armed.
    pub(super) fn new(undo: impl Future<Output = ()> + Send + 'static) -> Undo {
        Undo(Some(Box::pin(undo)))
    }

    /// The call's answer is known: nothing to undo.
    pub(super) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        let Some(undo) = self.0.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(undo);
        }
    }
}
