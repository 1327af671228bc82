//! What runs the limiter, beside its checks: the run-time switch, an
//! operator's reset, the circuit breaker's state and probe, and the
//! settings in force.

use std::sync::atomic::Ordering;

use super::Limiter;
use crate::breaker::Breaker;
use crate::store::Dimensions;
use crate::{BreakerState, Error, FailurePolicy, Rule, Store};

impl<S: Store> Limiter<S> {
    /// Forgets everything `rule` keeps for `key` — its charges, and a
    /// penalty's violations and ban — in the store, the deny cache and the
    /// fallback store: the next request starts from a full quota (an
    /// operator's reset, e.g. after a false positive). Returns whether the
    /// store kept anything.
    ///
    /// # Errors
    ///
    /// [`InvalidKey`](crate::ErrorKind::InvalidKey) for an empty key; a store
    /// failure (not answered by the failure policy: nothing was reset).
    pub async fn reset(&self, rule: &Rule, key: &str) -> Result<bool, Error> {
        let request = crate::store::Request::new(rule, key, 1)?;
        let inner = &*self.inner;
        if let Some(cache) = &inner.deny_cache {
            cache.forget(rule, request.identity().as_str());
        }
        inner.fallback.reset_sync(&request);
        let reset = inner.store.reset(&request);
        if inner.store.is_local() {
            return reset.await;
        }
        match tokio::time::timeout(inner.deadline, reset).await {
            Ok(result) => result,
            Err(_) => Err(Error::new(crate::ErrorKind::Timeout, "the store did not reset in time")),
        }
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

    /// Lets the circuit breaker find out, without traffic, whether a
    /// failing store is back: when the breaker is open and its next probe
    /// is due, asks the store something that charges nothing (a peek at an
    /// identity nobody uses, under the rule `slidegate.probe`) as that
    /// probe; a store that answers closes the breaker. Returns the
    /// breaker's state afterwards. Nothing is asked while the breaker is
    /// closed, or before its probe is due.
    ///
    /// Call it now and then from a timer or a readiness check: a service
    /// that its load balancer stopped sending traffic to, because the
    /// store failed, has no request left to probe with and would never
    /// see the store come back. `slidegate serve` does, twice a second.
    pub async fn probe_store(&self) -> BreakerState {
        let inner = &*self.inner;
        if self.breaker_state() == BreakerState::Closed || inner.store.is_local() {
            return self.breaker_state();
        }
        // Both valid: a fixed name and key.
        let Ok(rule) = Rule::per_second(std::num::NonZeroU32::MIN).named("slidegate.probe") else {
            return self.breaker_state();
        };
        if let Ok(dimensions) = Dimensions::new(&[(&rule, "probe")], 1) {
            let _ = inner.guarded(|| inner.store.peek_all(&dimensions)).await;
        }
        self.breaker_state()
    }

    /// The factor adaptive limits currently apply to every rule's limit
    /// (`None` when they are off). It moves at most once per evaluation
    /// interval, on checks; see [`crate::adaptive`].
    pub fn adaptive_factor(&self) -> Option<f64> {
        self.inner.adaptive.as_ref().map(|a| a.scaler.factor())
    }

    /// Whether every rule is in shadow mode ([`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow)).
    pub fn is_shadow(&self) -> bool {
        self.inner.shadow
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
