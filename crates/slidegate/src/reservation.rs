//! Reservations: an estimate held against a rule until the real cost is
//! known. [`Limiter::reserve`](crate::Limiter::reserve) admits only if the
//! estimate fits, and charges it; the
//! [`Reservation`](crate::Reservation) is then committed at the real cost
//! (less is given back, more is recorded as debt) or cancelled (all given
//! back). One neither committed nor cancelled within its ttl is committed
//! at its estimate by the store itself: the charge simply stays.

use crate::concurrency::LeaseId;
use crate::identity::Identity;
use crate::{Error, ErrorKind, Rule};

/// One reservation's request to a store: the rule, whose (an encoded
/// identity) and which reservation (its id: 128 random bits, so it cannot
/// be guessed or forged to settle another's).
#[derive(Debug, Clone)]
pub struct ReservationRequest<'a> {
    rule: &'a Rule,
    identity: Identity<'a>,
    id: &'a LeaseId,
}

impl<'a> ReservationRequest<'a> {
    /// The reservation `id` of `key` under `rule`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidKey`] for an empty key;
    /// [`ErrorKind::InvalidRule`] for a rule with a penalty (a reservation
    /// is no request the penalty could count).
    pub fn new(rule: &'a Rule, key: &'a str, id: &'a LeaseId) -> Result<ReservationRequest<'a>, Error> {
        if rule.penalty().is_some() {
            return Err(Error::new(ErrorKind::InvalidRule, "reservations take rules without a penalty"));
        }
        Ok(ReservationRequest { rule, identity: Identity::new(key)?, id })
    }

    /// The rule.
    pub fn rule(&self) -> &Rule {
        self.rule
    }

    /// Whose reservation.
    pub fn identity(&self) -> &Identity<'a> {
        &self.identity
    }

    /// Which reservation.
    pub fn id(&self) -> &LeaseId {
        self.id
    }
}
