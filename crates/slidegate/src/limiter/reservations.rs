//! Reservations through the limiter: [`Limiter::reserve`] asks the store
//! as a check does (the deadline and the breaker for a remote store);
//! when it fails, the failure policy answers — the fallback store holds
//! the reservation, or none is held.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Limiter;
use super::guard::{Outcome, Undo};
use super::leases::Held;

use crate::failure;
use crate::limits::MAX_WINDOW;
use crate::reservation::ReservationRequest;
use crate::{Decision, Error, ErrorKind, FailurePolicy, LeaseId, Rule, Store};

impl<S: Store> Limiter<S> {
    /// Reserves `estimate` of `rule` for `key`, held for `ttl`: admitted
    /// only if the whole estimate fits (also under a [budget](Rule::budget)),
    /// and then charged. Exact under concurrency across processes: the
    /// store decides and charges in one step, so reservations never hold
    /// more than the rule admits. [`Reservation::commit`] replaces the
    /// estimate by the real cost (less is given back, more is recorded as
    /// debt), [`Reservation::cancel`] gives it all back; one neither
    /// committed nor cancelled within `ttl` — dropped, or its process
    /// killed — is committed at its estimate by the store.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use std::time::Duration;
    /// use slidegate::{Limiter, Rule};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let tokens = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("tokens")?;
    /// let limiter = Limiter::in_memory();
    /// let held = limiter.reserve(&tokens, "acme", 800, Duration::from_secs(30)).await?;
    /// assert!(held.is_held());
    /// let second = limiter.reserve(&tokens, "acme", 800, Duration::from_secs(30)).await?;
    /// assert!(!second.is_admitted(), "800 of 1000 are held");
    /// let after = held.commit(300).await?.expect("still held");
    /// assert_eq!(after.remaining, 700, "500 given back");
    /// # Ok::<(), slidegate::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An estimate of 0 or above the rule's limit
    /// ([`ErrorKind::InvalidCost`]); a `ttl` shorter than 1 ms or longer
    /// than [`MAX_WINDOW`], or a rule with a penalty
    /// ([`ErrorKind::InvalidRule`]); an empty key; under
    /// [`FailurePolicy::Fail`], the store's failure.
    pub async fn reserve(
        &self,
        rule: &Rule,
        key: &str,
        estimate: u32,
        ttl: Duration,
    ) -> Result<Reservation<S>, Error> {
        if estimate == 0 || estimate > rule.limit() {
            return Err(Error::new(
                ErrorKind::InvalidCost,
                format!("an estimate must be 1 to the limit {}, got {estimate}", rule.limit()),
            ));
        }
        if ttl < Duration::from_millis(1) || ttl > MAX_WINDOW {
            return Err(Error::invalid_rule(format!(
                "a reservation's ttl must be 1ms to {} days, got {ttl:?}",
                MAX_WINDOW.as_secs() / 86_400
            )));
        }
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let id = LeaseId::random()?;
        let inner = &*self.inner;
        // Adaptive limits scale a reservation's rule as a check's.
        let scaling = inner.scaling();
        let scaled = scaling.rule(rule);
        let request = ReservationRequest::new(&scaled, key, &id)?;
        let reservation = |decision: Decision, held| Reservation {
            limiter: self.clone(),
            rule: rule.clone(),
            key: key.to_owned(),
            id: id.clone(),
            estimate,
            decision,
            held: if decision.allowed { held } else { Held::Nowhere },
        };
        if !inner.enabled.load(Ordering::Relaxed) {
            return Ok(reservation(Decision::disabled(rule.limit()), Held::Nowhere));
        }
        if let Some(denial) = scaling.beyond(&scaled, estimate) {
            return Ok(reservation(denial, Held::Nowhere));
        }
        // Until the store answers, a reservation it may have made (the
        // call failed after it was sent, or this future was dropped) is
        // cancelled.
        let undo = {
            let (limiter, rule, key, id) = (self.clone(), rule.clone(), key.to_owned(), id.clone());
            Undo::new(async move {
                let _ = limiter.settle_reservation(&rule, &key, &id, 0, Held::Store).await;
            })
        };
        let outcome = inner.ask(|| inner.store.reserve(&request, estimate, ttl_ms)).await;
        if !matches!(outcome, Outcome::Failed(reason) if reason.may_have_run()) {
            undo.disarm();
        }
        match outcome {
            // Shadow mode (the limiter's or the rule's) overrules a
            // refusal; nothing is held then.
            Outcome::Answered(decision) if inner.is_shadow(rule) && !decision.allowed => {
                Ok(reservation(decision.shadowed(), Held::Nowhere))
            }
            Outcome::Answered(decision) => Ok(reservation(decision, Held::Store)),
            Outcome::Invalid(error) => Err(error),
            Outcome::Failed(reason) => match inner.policy {
                FailurePolicy::Fail => Err(reason.error()),
                FailurePolicy::Fallback => {
                    let decision =
                        failure::mark_degraded(inner.fallback.reserve_sync(&request, estimate, ttl_ms)?);
                    Ok(reservation(decision, Held::Fallback))
                }
                policy => {
                    let answer = failure::fixed_answer(policy, rule.limit(), estimate, inner.retry_hint());
                    Ok(reservation(answer, Held::Nowhere))
                }
            },
        }
    }

    /// Commits the reservation `id` of `key` under `rule` at `actual`
    /// (from another process than the one that made it: `POST
    /// /v1/commit`): see [`Reservation::commit`]. A reservation the
    /// fallback store made while the store failed is settled there.
    ///
    /// # Errors
    ///
    /// An empty key, a rule with a penalty, or a store failure.
    pub async fn commit(
        &self,
        rule: &Rule,
        key: &str,
        id: &LeaseId,
        actual: u32,
    ) -> Result<Option<Decision>, Error> {
        self.settle_reservation(rule, key, id, actual, Held::Anywhere).await
    }

    /// Cancels the reservation `id` of `key` under `rule`: see
    /// [`Reservation::cancel`].
    ///
    /// # Errors
    ///
    /// As [`commit`](Self::commit).
    pub async fn cancel(&self, rule: &Rule, key: &str, id: &LeaseId) -> Result<Option<Decision>, Error> {
        self.settle_reservation(rule, key, id, 0, Held::Anywhere).await
    }

    async fn settle_reservation(
        &self,
        rule: &Rule,
        key: &str,
        id: &LeaseId,
        actual: u32,
        held: Held,
    ) -> Result<Option<Decision>, Error> {
        let inner = &*self.inner;
        let scaled = inner.scaling().rule(rule);
        let request = ReservationRequest::new(&scaled, key, id)?;
        let in_store = || async { inner.ask(|| inner.store.settle(&request, actual)).await };
        match held {
            Held::Nowhere => Ok(None),
            Held::Fallback => inner.fallback.settle_sync(&request, actual),
            Held::Store => match in_store().await {
                Outcome::Answered(settled) => Ok(settled),
                Outcome::Invalid(error) => Err(error),
                Outcome::Failed(reason) => Err(reason.error()),
            },
            // By id: the store's, else the fallback store's.
            Held::Anywhere => match in_store().await {
                Outcome::Answered(Some(settled)) => Ok(Some(settled)),
                Outcome::Answered(None) => inner.fallback.settle_sync(&request, actual),
                Outcome::Invalid(error) => Err(error),
                Outcome::Failed(reason) => match inner.fallback.settle_sync(&request, actual)? {
                    Some(settled) => Ok(Some(failure::mark_degraded(settled))),
                    None => Err(reason.error()),
                },
            },
        }
    }
}

/// The answer to [`Limiter::reserve`]: an estimate held, or refused.
/// Settled by [`commit`](Self::commit) or [`cancel`](Self::cancel); one
/// dropped unsettled stays charged at its estimate (the store forgets it
/// when its ttl passes).
#[must_use = "a reservation is committed or cancelled; dropped, it stays charged at its estimate"]
pub struct Reservation<S: Store> {
    limiter: Limiter<S>,
    rule: Rule,
    key: String,
    id: LeaseId,
    estimate: u32,
    decision: Decision,
    held: Held,
}

impl<S: Store> fmt::Debug for Reservation<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("rule", &self.rule.state_name())
            .field("id", &self.id)
            .field("estimate", &self.estimate)
            .field("held", &self.held)
            .field("decision", &self.decision)
            .finish()
    }
}

impl<S: Store> Reservation<S> {
    /// Whether the request may proceed: the estimate is held, or it was
    /// admitted without a reservation — by the failure policy
    /// ([`State::Degraded`](crate::State::Degraded)), shadow mode or
    /// limiting switched off.
    pub fn is_admitted(&self) -> bool {
        self.decision.allowed
    }

    /// Whether the estimate is held (in the store, or in the fallback
    /// store while the store fails): what commit and cancel act on.
    pub fn is_held(&self) -> bool {
        self.held != Held::Nowhere
    }

    /// How the reservation was decided, as a check of the estimate.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The estimate reserved.
    pub fn estimate(&self) -> u32 {
        self.estimate
    }

    /// The reservation's id (to settle it from elsewhere, e.g. `POST
    /// /v1/commit`).
    pub fn id(&self) -> &LeaseId {
        &self.id
    }

    /// Replaces the estimate by `actual`, the real cost: less gives the
    /// rest back (exactly for the sliding log, the counter while the
    /// reservation's bucket counts and the fixed window within its
    /// window; for GCRA only while the bucket is as its charge left it —
    /// see [`State::settle`](crate::algorithm::State::settle)), more is
    /// recorded now whatever remains (a debt, as a budget's charge). The
    /// state after, with its debt; `None` when the reservation was not
    /// held (its ttl had passed: it stays charged at its estimate).
    ///
    /// # Errors
    ///
    /// A store failure (the reservation may then have been settled, or
    /// stay charged at its estimate until its ttl passes).
    pub async fn commit(mut self, actual: u32) -> Result<Option<Decision>, Error> {
        let held = std::mem::replace(&mut self.held, Held::Nowhere);
        self.limiter.settle_reservation(&self.rule, &self.key, &self.id, actual, held).await
    }

    /// Gives the whole estimate back: [`commit`](Self::commit) at 0.
    ///
    /// # Errors
    ///
    /// As [`commit`](Self::commit).
    pub async fn cancel(self) -> Result<Option<Decision>, Error> {
        self.commit(0).await
    }

    /// Leaves the reservation to be settled from elsewhere by its id
    /// ([`Limiter::commit`], [`Limiter::cancel`]) or by its ttl.
    pub fn detach(mut self) -> LeaseId {
        self.held = Held::Nowhere;
        self.id.clone()
    }
}
