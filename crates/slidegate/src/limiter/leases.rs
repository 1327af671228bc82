//! Concurrency limits through the limiter: [`Limiter::acquire`] asks the
//! store as a check does (the deadline and the breaker for a remote
//! store); when it fails, the failure policy answers — the fallback store
//! holds the lease, or none is held.

use std::sync::atomic::Ordering;

use super::Limiter;
use super::guard::Outcome;
use crate::concurrency::{ConcurrencyLimit, Held, Lease, LeaseId, LeaseRequest};
use crate::failure;
use crate::{Decision, Error, FailurePolicy, Store};

impl<S: Store> Limiter<S> {
    /// Takes a lease of `limit` for `key` when fewer than its limit are
    /// held: the answer says whether ([`Lease::is_held`]) and how many are
    /// held now. Exact under concurrency across processes: the store
    /// counts and takes in one step. A lease not given back
    /// ([`Lease::release`], dropped) nor renewed within the limit's ttl is
    /// given back by the store.
    ///
    /// # Errors
    ///
    /// An empty key; under [`FailurePolicy::Fail`], the store's failure.
    pub async fn acquire(&self, limit: &ConcurrencyLimit, key: &str) -> Result<Lease<S>, Error> {
        let id = LeaseId::random()?;
        let inner = &*self.inner;
        let request = LeaseRequest::new(limit, key, &id)?;
        let lease = |decision: Decision, held| Lease {
            limiter: self.clone(),
            limit: limit.clone(),
            key: key.to_owned(),
            id: id.clone(),
            decision,
            held: if decision.allowed { held } else { Held::Nowhere },
        };
        if !inner.enabled.load(Ordering::Relaxed) {
            return Ok(lease(Decision::disabled(limit.limit()), Held::Nowhere));
        }
        let outcome = inner.ask(|| inner.store.acquire(&request)).await;
        match outcome {
            Outcome::Answered(decision) => Ok(lease(decision, Held::Store)),
            Outcome::Invalid(error) => Err(error),
            Outcome::Failed(reason) => match inner.policy {
                FailurePolicy::Fail => Err(reason.error()),
                FailurePolicy::Fallback => {
                    let decision = failure::mark_degraded(inner.fallback.acquire_sync(&request)?);
                    Ok(lease(decision, Held::Fallback))
                }
                policy => {
                    let answer = failure::fixed_answer(policy, limit.limit(), 1, inner.retry_hint());
                    Ok(lease(answer, Held::Nowhere))
                }
            },
        }
    }

    /// Gives back the lease `id` of `key` under `limit` (from another
    /// process than the one that took it: `POST /v1/release`). Returns
    /// whether it was held.
    ///
    /// # Errors
    ///
    /// An empty key, or a store failure.
    pub async fn release(&self, limit: &ConcurrencyLimit, key: &str, id: &LeaseId) -> Result<bool, Error> {
        self.release_lease(limit, key, id, Held::Store).await
    }

    /// Holds the lease `id` of `key` under `limit` for another ttl from
    /// now. Returns whether it was still held.
    ///
    /// # Errors
    ///
    /// An empty key, or a store failure.
    pub async fn renew(&self, limit: &ConcurrencyLimit, key: &str, id: &LeaseId) -> Result<bool, Error> {
        self.renew_lease(limit, key, id, Held::Store).await
    }

    pub(crate) async fn release_lease(
        &self,
        limit: &ConcurrencyLimit,
        key: &str,
        id: &LeaseId,
        held: Held,
    ) -> Result<bool, Error> {
        let request = LeaseRequest::new(limit, key, id)?;
        let inner = &*self.inner;
        match held {
            Held::Nowhere => Ok(false),
            Held::Fallback => Ok(inner.fallback.release_sync(&request)),
            Held::Store => answered(inner.ask(|| inner.store.release(&request)).await),
        }
    }

    pub(crate) async fn renew_lease(
        &self,
        limit: &ConcurrencyLimit,
        key: &str,
        id: &LeaseId,
        held: Held,
    ) -> Result<bool, Error> {
        let request = LeaseRequest::new(limit, key, id)?;
        let inner = &*self.inner;
        match held {
            Held::Nowhere => Ok(false),
            Held::Fallback => Ok(inner.fallback.renew_sync(&request)),
            Held::Store => answered(inner.ask(|| inner.store.renew(&request)).await),
        }
    }
}

/// A release's or renewal's outcome: the store's answer, or its failure.
fn answered(outcome: Outcome<bool>) -> Result<bool, Error> {
    match outcome {
        Outcome::Answered(held) => Ok(held),
        Outcome::Invalid(error) => Err(error),
        Outcome::Failed(reason) => Err(reason.error()),
    }
}
