//! The facade applications call: rules and keys in, decisions out, with the
//! failure policy, circuit breaker, deadline and deny cache around the store.

mod builder;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use builder::{DEFAULT_DEADLINE, DEFAULT_FALLBACK_KEYS, LimiterBuilder};

use crate::breaker::{Admission, Breaker};
use crate::deny_cache::DenyCache;
use crate::failure::{self, Reason};
use crate::{
    BreakerState, Clock, Decision, Error, ErrorKind, FailurePolicy, MemoryStore, Rule, Store,
    encode_identity, telemetry, validate_cost,
};

/// Answers "may this caller do this now?" for any rule and key, from one
/// shared [`Store`]. Cheap to clone; clones share the store and all state.
///
/// Around the store it keeps the promises of slidegate's design (§3):
///
/// * **Deadline**: a store call taking longer than
///   [`deadline`](LimiterBuilder::deadline) (default 50 ms) is abandoned.
/// * **Failure policy**: a failed or abandoned call is answered by the
///   [`FailurePolicy`] (default: a local in-memory limiter), as a
///   [`State::Degraded`](crate::State::Degraded) decision — counted in
///   metrics and logged, never a silent allow. Invalid input is an `Err`.
/// * **Circuit breaker**: after repeated failures the store is not called
///   at all; a probe goes through after a back-off, and the breaker closes
///   by itself when the store answers again ([`BreakerConfig`](crate::BreakerConfig)).
/// * **Runtime switch**: [`set_enabled(false)`](Limiter::set_enabled) admits
///   everything without asking the store until switched back on.
/// * **Deny cache**: after a denial with `retry_after = r`, the same rule,
///   identity and cost are denied locally until `r` passes. This is exact —
///   only time frees capacity, so the store would deny them too — and sheds
///   attack traffic without round trips.
///
/// Deadline, breaker and deny cache apply to remote stores only: a store
/// whose [`Store::is_local`] is true (the memory store) answers in
/// nanoseconds and is called directly.
///
/// ```
/// use std::num::NonZeroU32;
/// use slidegate::{Limiter, Rule};
///
/// # tokio_test_shim::block_on(async {
/// let limiter = Limiter::in_memory();
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap());
/// let decision = limiter.check(&rule, "user-42").await?;
/// assert!(decision.allowed);
/// assert_eq!(decision.remaining, 99);
///
/// // Weighted: an expensive call costs 10.
/// let decision = limiter.check_n(&rule, "user-42", 10).await?;
/// assert_eq!(decision.remaining, 89);
///
/// // Switched off at run time: everything passes, nothing is charged.
/// limiter.set_enabled(false);
/// assert_eq!(limiter.check_n(&rule, "user-42", 100).await?.state, slidegate::State::Disabled);
/// limiter.set_enabled(true);
/// assert_eq!(limiter.check(&rule, "user-42").await?.remaining, 88);
/// # Ok::<(), slidegate::Error>(()) }).unwrap();
/// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
/// ```
#[derive(Debug)]
pub struct Limiter<S> {
    inner: Arc<Inner<S>>,
}

#[derive(Debug)]
struct Inner<S> {
    store: S,
    deadline: Duration,
    policy: FailurePolicy,
    breaker: Option<Breaker>,
    deny_cache: Option<DenyCache>,
    /// Decides for [`FailurePolicy::Fallback`].
    fallback: MemoryStore,
    clock: Arc<dyn Clock>,
    enabled: AtomicBool,
}

impl<S> Clone for Limiter<S> {
    fn clone(&self) -> Self {
        Limiter { inner: Arc::clone(&self.inner) }
    }
}

impl Limiter<MemoryStore> {
    /// A limiter on a fresh embedded [`MemoryStore`] with default settings.
    pub fn in_memory() -> Self {
        Limiter::new(MemoryStore::new())
    }
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

impl<S: Store> Limiter<S> {
    /// A limiter deciding with `store`, with default settings.
    pub fn new(store: S) -> Self {
        Limiter::builder(store).build()
    }

    /// Starts configuring a limiter deciding with `store`.
    pub fn builder(store: S) -> LimiterBuilder<S> {
        LimiterBuilder::new(store)
    }

    /// Decides one request (cost 1) for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// Invalid input only ([`InvalidKey`](ErrorKind::InvalidKey) for an empty
    /// key). Over the limit is `Ok` with a denied [`Decision`]; a failing
    /// store is answered by the failure policy.
    pub async fn check(&self, rule: &Rule, key: &str) -> Result<Decision, Error> {
        self.check_n(rule, key, 1).await
    }

    /// Decides a request of weight `cost` for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), plus
    /// [`InvalidCost`](ErrorKind::InvalidCost) when `cost` is 0 or above the
    /// rule's limit.
    pub async fn check_n(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        validate_cost(rule, cost)?;
        let identity = encode_identity(key)?;
        let inner = &*self.inner;
        if !inner.enabled.load(Ordering::Relaxed) {
            return Ok(self.record(rule, Decision::disabled(rule.limit())));
        }
        if inner.store.is_local() {
            return match inner.store.check(rule, key, cost).await {
                Ok(decision) => Ok(self.record(rule, decision)),
                Err(error) if failure::is_input_error(&error) => Err(error),
                Err(error) => self.degrade(rule, key, cost, Reason::of(&error), Some(&error)),
            };
        }

        let sent = inner.clock.now_ms();
        if let Some(decision) = inner.deny_cache.as_ref().and_then(|c| c.get(rule, &identity, cost, sent)) {
            telemetry::deny_cache_hit(rule);
            return Ok(self.record(rule, decision));
        }
        let admission = inner.breaker.as_ref().map_or(Admission::Call, |b| b.admit(sent));
        if admission == Admission::Reject {
            return self.degrade(rule, key, cost, Reason::BreakerOpen, None);
        }
        let probe = admission == Admission::Probe;
        let mut guard = ProbeGuard { breaker: if probe { inner.breaker.as_ref() } else { None } };

        let started = Instant::now();
        let result = match tokio::time::timeout(inner.deadline, inner.store.check(rule, key, cost)).await {
            Ok(result) => result,
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!("the store did not answer within the {:?} deadline", inner.deadline),
            )),
        };
        let elapsed = started.elapsed();
        match result {
            Ok(decision) => {
                guard.breaker = None;
                telemetry::store_call(elapsed, "ok");
                if let Some(breaker) = &inner.breaker {
                    breaker.on_success(probe);
                }
                if let Some(cache) = &inner.deny_cache {
                    if decision.allowed {
                        cache.forget(rule, &identity);
                    } else {
                        cache.insert(rule, &identity, cost, sent, &decision);
                    }
                }
                Ok(self.record(rule, decision))
            }
            // The guard releases a probe that got no verdict.
            Err(error) if failure::is_input_error(&error) => Err(error),
            Err(error) => {
                guard.breaker = None;
                telemetry::store_call(elapsed, if error.is_timeout() { "timeout" } else { "error" });
                if let Some(breaker) = &inner.breaker {
                    breaker.on_failure(probe, inner.clock.now_ms());
                }
                self.degrade(rule, key, cost, Reason::of(&error), Some(&error))
            }
        }
    }

    /// Answers by the failure policy.
    fn degrade(
        &self,
        rule: &Rule,
        key: &str,
        cost: u32,
        reason: Reason,
        error: Option<&Error>,
    ) -> Result<Decision, Error> {
        let inner = &*self.inner;
        if let Some(error) = error {
            tracing::warn!(target: "slidegate", rule = %rule, %error, policy = %inner.policy, "store failed; answering by failure policy");
        }
        let retry = inner.breaker.as_ref().map_or(Duration::ZERO, |b| b.open_remaining(inner.clock.now_ms()));
        let decision = match inner.policy {
            FailurePolicy::Fallback => match inner.fallback.check_sync(rule, key, cost) {
                Ok(local) => failure::mark_degraded(local),
                Err(error) if failure::is_input_error(&error) => return Err(error),
                // The fallback store is full too: the policy's intent is to
                // keep serving, so admit (degraded, counted, logged).
                Err(error) => {
                    tracing::warn!(target: "slidegate", %error, "fallback store failed; admitting");
                    failure::fixed_answer(FailurePolicy::FailOpen, rule.limit(), cost, retry)
                }
            },
            policy => failure::fixed_answer(policy, rule.limit(), cost, retry),
        };
        telemetry::degraded(rule, inner.policy.as_str(), reason.as_str());
        tracing::debug!(
            target: "slidegate",
            rule = %rule,
            reason = reason.as_str(),
            allowed = decision.allowed,
            "degraded decision"
        );
        Ok(self.record(rule, decision))
    }

    fn record(&self, rule: &Rule, decision: Decision) -> Decision {
        telemetry::decision(rule, &decision);
        decision
    }

    /// Turns limiting on or off for this limiter and all its clones, at run
    /// time (e.g. while Redis is overloaded). While off, every check is
    /// admitted as [`State::Disabled`](crate::State::Disabled) without asking
    /// the store, and nothing is charged.
    pub fn set_enabled(&self, enabled: bool) {
        let was = self.inner.enabled.swap(enabled, Ordering::Relaxed);
        if was != enabled {
            tracing::warn!(target: "slidegate", enabled, "rate limiting switched");
            metrics::gauge!("slidegate_enabled").set(if enabled { 1.0 } else { 0.0 });
        }
    }

    /// Whether limiting is on (see [`set_enabled`](Self::set_enabled)).
    pub fn is_enabled(&self) -> bool {
        self.inner.enabled.load(Ordering::Relaxed)
    }

    /// The circuit breaker's state ([`BreakerState::Closed`] when there is none).
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.as_ref().map_or(BreakerState::Closed, Breaker::state)
    }

    /// The failure policy in force.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.inner.policy
    }

    /// The store this limiter decides with.
    pub fn store(&self) -> &S {
        &self.inner.store
    }
}
