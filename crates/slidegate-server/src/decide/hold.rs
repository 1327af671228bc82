//! Reservations and leases through the service (`/v1/reserve`,
//! `/v1/commit`, `/v1/cancel`; `/v1/acquire`, `/v1/release`,
//! `/v1/renew`): one descriptor meets the one limit they hold under — a
//! rate limit or budget for a reservation, a `max_in_flight` limit for a
//! lease — and the limiter holds it as it does for a library caller. The
//! ids are the limiter's: 128 random bits, bound to the limit and the
//! identity, so no caller can guess one or settle another's.

use std::sync::Arc;
use std::time::Duration;

use slidegate::{ConcurrencyLimit, Decision, LeaseId, Rule};

use super::item::identity;
use super::item::invalid;
use super::request::{CheckError, CheckRequest};
use super::{Decider, budget_used};
use crate::config::Limit;

/// What a reservation or a lease is held under: the limit and whose.
pub(crate) struct Held {
    pub(crate) limit: Arc<Limit>,
    pub(crate) identity: String,
}

/// Which kind of limit a call holds under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A rate limit or a budget: a reservation.
    Reservation,
    /// A `max_in_flight` limit: a lease.
    Lease,
}

impl Kind {
    fn holds(self, limit: &Limit) -> bool {
        match self {
            Kind::Reservation => limit.rule().is_some(),
            Kind::Lease => limit.in_flight().is_some(),
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::Reservation => "a reservation is held under one rate limit or budget",
            Kind::Lease => "a lease is held under one `max_in_flight` limit",
        }
    }
}

/// A reservation's or a lease's answer: held (its id), or refused.
pub(crate) struct Taken {
    pub(crate) held: Held,
    pub(crate) id: Option<LeaseId>,
    pub(crate) decision: Decision,
}

impl Decider {
    /// The one limit of `kind` that `request`'s one descriptor meets.
    ///
    /// # Errors
    ///
    /// [`CheckError::Invalid`] for a malformed request, several
    /// descriptors, or a descriptor meeting no such limit or several.
    pub(crate) fn held_under(&self, request: &CheckRequest, kind: Kind) -> Result<Held, CheckError> {
        request.validate()?;
        let invalid = |message: String| Err(CheckError::Invalid(format!("{}: {message}", kind.words())));
        let [descriptor] = request.descriptors.as_slice() else {
            return invalid(format!("send one descriptor, not {}", request.descriptors.len()));
        };
        if descriptor.limit.is_some() {
            return invalid("a descriptor's own `limit` cannot hold one".to_owned());
        }
        let config = self.rules().current();
        let Some(domain) = config.domain(&request.domain) else {
            return invalid(format!("no domain `{}` is configured", request.domain));
        };
        let entries: Vec<(&str, &str)> =
            descriptor.entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let Some(path) = domain.lookup(&entries) else {
            return invalid("the descriptor meets no limit".to_owned());
        };
        let Some(&(node, _)) = path.last() else {
            return invalid("the descriptor meets no limit".to_owned());
        };
        let mut limits = node.limits.iter().filter(|limit| kind.holds(limit));
        let (Some(limit), None) = (limits.next(), limits.next()) else {
            let found = node.limits.iter().filter(|limit| kind.holds(limit)).count();
            return invalid(format!("the descriptor meets {found} such limits"));
        };
        let identity = identity(domain.name(), &entries, Some((&path, limit)));
        Ok(Held { limit: Arc::clone(limit), identity })
    }

    /// Reserves `estimate` for `ttl` under the limit `request` meets.
    ///
    /// # Errors
    ///
    /// As [`held_under`](Self::held_under); a bad estimate or ttl; the
    /// store's failure under `--on-store-failure unavailable`.
    pub(crate) async fn reserve(
        &self,
        request: &CheckRequest,
        estimate: u32,
        ttl: Duration,
    ) -> Result<Taken, CheckError> {
        let held = self.held_under(request, Kind::Reservation)?;
        let rule = rule_of(&held)?;
        let reserved = self.limiter().reserve(rule, &held.identity, estimate, ttl).await;
        let reserved = reserved.map_err(|e| hold_error(&e))?;
        let decision = *reserved.decision();
        held.limit.rates.record(super::stats::now_s(), decision.allowed);
        if rule.is_budget() {
            held.limit.usage.record(&shown(request), budget_used(&decision), &decision);
        }
        let id = reserved.is_held().then(|| reserved.detach());
        Ok(Taken { held, id, decision })
    }

    /// Settles the reservation `id` at `actual` (0 cancels): the state
    /// after, or `None` when it is not held.
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) async fn settle(
        &self,
        request: &CheckRequest,
        id: &LeaseId,
        actual: u32,
    ) -> Result<(Held, Option<Decision>), CheckError> {
        let held = self.held_under(request, Kind::Reservation)?;
        let rule = rule_of(&held)?;
        let settled = self.limiter().commit(rule, &held.identity, id, actual).await;
        let settled = settled.map_err(|e| hold_error(&e))?;
        if let Some(decision) = settled.filter(|_| rule.is_budget()) {
            held.limit.usage.record(&shown(request), budget_used(&decision), &decision);
        }
        Ok((held, settled))
    }

    /// Takes a lease of the `max_in_flight` limit `request` meets.
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) async fn acquire(&self, request: &CheckRequest) -> Result<Taken, CheckError> {
        let held = self.held_under(request, Kind::Lease)?;
        let limit = in_flight_of(&held)?;
        let lease = self.limiter().acquire(limit, &held.identity).await.map_err(|e| hold_error(&e))?;
        let decision = *lease.decision();
        held.limit.rates.record(super::stats::now_s(), decision.allowed);
        // Running: the limit less what is left, this one included; a
        // refusal: all of them.
        let running =
            if decision.allowed { decision.limit.saturating_sub(decision.remaining) } else { decision.limit };
        held.limit.usage.record(&shown(request), u64::from(running), &decision);
        let id = lease.is_held().then(|| lease.detach());
        Ok(Taken { held, id, decision })
    }

    /// Gives back (`renew`: holds for another ttl) the lease `id`;
    /// whether it was held.
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) async fn release(
        &self,
        request: &CheckRequest,
        id: &LeaseId,
        renew: bool,
    ) -> Result<bool, CheckError> {
        let held = self.held_under(request, Kind::Lease)?;
        let limit = in_flight_of(&held)?;
        let done = if renew {
            self.limiter().renew(limit, &held.identity, id).await
        } else {
            self.limiter().release(limit, &held.identity, id).await
        };
        let done = done.map_err(|e| hold_error(&e))?;
        if done && !renew {
            held.limit.usage.released(&shown(request));
        }
        Ok(done)
    }
}

/// The request's one descriptor as the status page shows identities.
fn shown(request: &CheckRequest) -> String {
    let entries = request.descriptors.first().map_or(&[][..], |d| d.entries.as_slice());
    super::stats::shown(&request.domain, entries)
}

fn rule_of(held: &Held) -> Result<&Rule, CheckError> {
    held.limit.rule().ok_or_else(|| CheckError::Invalid("the limit holds no reservation".to_owned()))
}

fn in_flight_of(held: &Held) -> Result<&ConcurrencyLimit, CheckError> {
    held.limit.in_flight().ok_or_else(|| CheckError::Invalid("the limit holds no lease".to_owned()))
}

/// The error of a limiter call that holds or settles: the request's fault,
/// or the store's (which no failure policy answers for a settlement).
fn hold_error(error: &slidegate::Error) -> CheckError {
    if error.is_store_failure() {
        return CheckError::Unavailable(format!("the rate-limit store failed: {error}"));
    }
    invalid(error)
}
