//! Concurrency limits through the limiter: [`Limiter::acquire`] asks the
//! store as a check does (the deadline and the breaker for a remote
//! store); when it fails, the failure policy answers — the fallback store
//! holds the lease, or none is held.

use std::fmt;
use std::sync::atomic::Ordering;

use super::Limiter;
use super::guard::{Outcome, Undo};

use crate::concurrency::{ConcurrencyLimit, LeaseId, LeaseRequest};
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
        // Until the store answers, a lease it may have taken (the call
        // failed after it was sent, or this future was dropped) is given
        // back.
        let undo = {
            let (limiter, limit, key, id) = (self.clone(), limit.clone(), key.to_owned(), id.clone());
            Undo::new(async move {
                let _ = limiter.hold_lease(&limit, &key, &id, Held::Store, Renew::No).await;
            })
        };
        let outcome = inner.ask(|| inner.store.acquire(&request)).await;
        if !matches!(outcome, Outcome::Failed(reason) if reason.may_have_run()) {
            undo.disarm();
        }
        match outcome {
            // Shadow mode overrules a refusal; no lease is held then.
            Outcome::Answered(decision) if inner.shadow && !decision.allowed => {
                Ok(lease(decision.shadowed(), Held::Nowhere))
            }
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
    /// whether it was held. A lease the fallback store took while the
    /// store failed is given back there.
    ///
    /// # Errors
    ///
    /// An empty key, or a store failure.
    pub async fn release(&self, limit: &ConcurrencyLimit, key: &str, id: &LeaseId) -> Result<bool, Error> {
        self.hold_lease(limit, key, id, Held::Anywhere, Renew::No).await
    }

    /// Holds the lease `id` of `key` under `limit` for another ttl from
    /// now. Returns whether it was still held.
    ///
    /// # Errors
    ///
    /// An empty key, or a store failure.
    pub async fn renew(&self, limit: &ConcurrencyLimit, key: &str, id: &LeaseId) -> Result<bool, Error> {
        self.hold_lease(limit, key, id, Held::Anywhere, Renew::Yes).await
    }

    /// Gives back (or, with [`Renew::Yes`], renews) the lease `id` of
    /// `key` under `limit`, where it is `held`.
    pub(crate) async fn hold_lease(
        &self,
        limit: &ConcurrencyLimit,
        key: &str,
        id: &LeaseId,
        held: Held,
        renew: Renew,
    ) -> Result<bool, Error> {
        let request = LeaseRequest::new(limit, key, id)?;
        let inner = &*self.inner;
        let in_store = || async {
            match renew {
                Renew::Yes => inner.ask(|| inner.store.renew(&request)).await,
                Renew::No => inner.ask(|| inner.store.release(&request)).await,
            }
        };
        let in_fallback = || match renew {
            Renew::Yes => inner.fallback.renew_sync(&request),
            Renew::No => inner.fallback.release_sync(&request),
        };
        match held {
            Held::Nowhere => Ok(false),
            Held::Fallback => Ok(in_fallback()),
            Held::Store => answered(in_store().await),
            Held::Anywhere => either(in_store().await, in_fallback),
        }
    }
}

/// Whether [`Limiter::hold_lease`] renews the lease or gives it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renew {
    Yes,
    No,
}

/// A release's or renewal's outcome: the store's answer, or its failure.
fn answered(outcome: Outcome<bool>) -> Result<bool, Error> {
    match outcome {
        Outcome::Answered(held) => Ok(held),
        Outcome::Invalid(error) => Err(error),
        Outcome::Failed(reason) => Err(reason.error()),
    }
}

/// A by-id release's or renewal's outcome: the store's when it held the
/// lease, else the fallback store's (`fallback`); the store's failure when
/// neither held it.
fn either(outcome: Outcome<bool>, fallback: impl FnOnce() -> bool) -> Result<bool, Error> {
    match outcome {
        Outcome::Answered(true) => Ok(true),
        Outcome::Answered(false) => Ok(fallback()),
        Outcome::Invalid(error) => Err(error),
        Outcome::Failed(reason) => {
            if fallback() {
                Ok(true)
            } else {
                Err(reason.error())
            }
        }
    }
}

/// Where a lease (or a reservation) is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// In the store.
    Store,
    /// In the limiter's fallback store (the store had failed).
    Fallback,
    /// Known by its id only: in the store, or else in the fallback store.
    Anywhere,
    /// Nowhere: refused, or admitted by the failure policy without one.
    Nowhere,
}

/// The answer to [`Limiter::acquire`]: a lease held, or refused. A held
/// lease is given back by [`release`](Self::release), or when dropped (in
/// a task on the current Tokio runtime), or by the store once its ttl
/// passes without a [`renew`](Self::renew).
pub struct Lease<S: Store> {
    pub(crate) limiter: Limiter<S>,
    pub(crate) limit: ConcurrencyLimit,
    pub(crate) key: String,
    pub(crate) id: LeaseId,
    pub(crate) decision: Decision,
    pub(crate) held: Held,
}

impl<S: Store> fmt::Debug for Lease<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("limit", &self.limit.name())
            .field("id", &self.id)
            .field("held", &self.held)
            .field("decision", &self.decision)
            .finish()
    }
}

impl<S: Store> Lease<S> {
    /// Whether the request may proceed: a lease is held, or it was
    /// admitted without one — by the failure policy
    /// ([`State::Degraded`](crate::State::Degraded)), shadow mode or
    /// limiting switched off.
    pub fn is_admitted(&self) -> bool {
        self.decision.allowed
    }

    /// Whether a lease is held (in the store, or in the fallback store
    /// while the store fails): what [`renew`](Self::renew) and
    /// [`release`](Self::release) act on.
    pub fn is_held(&self) -> bool {
        self.held != Held::Nowhere
    }

    /// How the acquisition was decided: `limit`, `remaining` (the limit
    /// less the leases held now, this one included), and for a refusal
    /// `retry_after` (until the oldest lease's ttl passes, if it is not
    /// given back sooner).
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Its concurrency limit.
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.limit
    }

    /// The lease's id (to give it back from elsewhere, e.g. `POST
    /// /v1/release`).
    pub fn id(&self) -> &LeaseId {
        &self.id
    }

    /// Gives the lease back now. Returns whether the store still held it
    /// (`false` once its ttl had passed).
    ///
    /// # Errors
    ///
    /// A store failure (the lease then comes back when its ttl passes).
    pub async fn release(mut self) -> Result<bool, Error> {
        let held = std::mem::replace(&mut self.held, Held::Nowhere);
        self.limiter.hold_lease(&self.limit, &self.key, &self.id, held, Renew::No).await
    }

    /// Holds the lease for another ttl from now. Returns whether the
    /// store still held it (`false`: its ttl had passed, and it may have
    /// been taken by another).
    ///
    /// # Errors
    ///
    /// A store failure.
    pub async fn renew(&self) -> Result<bool, Error> {
        self.limiter.hold_lease(&self.limit, &self.key, &self.id, self.held, Renew::Yes).await
    }

    /// Keeps the lease held after this value is dropped: its id gives it
    /// back ([`Limiter::release`]), or its ttl.
    pub fn detach(mut self) -> LeaseId {
        self.held = Held::Nowhere;
        self.id.clone()
    }
}

impl<S: Store> Drop for Lease<S> {
    fn drop(&mut self) {
        let held = std::mem::replace(&mut self.held, Held::Nowhere);
        if held == Held::Nowhere {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(target: "slidegate", limit = %self.limit.name(), "a lease dropped outside a Tokio runtime comes back when its ttl passes");
            return;
        };
        let (limiter, limit, key, id) =
            (self.limiter.clone(), self.limit.clone(), std::mem::take(&mut self.key), self.id.clone());
        runtime.spawn(async move {
            if let Err(error) = limiter.hold_lease(&limit, &key, &id, held, Renew::No).await {
                tracing::warn!(target: "slidegate", %error, limit = %limit.name(), "a dropped lease could not be given back; it comes back when its ttl passes");
            }
        });
    }
}
