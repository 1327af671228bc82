//! Reservations (`scripts/lib/reserve.lua`): the replies (the calls are
//! [`super::holds`]).

use slidegate::{Decision, Error, Rule};

use super::{single, unexpected};

/// A reservation's reply: a check's (decoded as the single script's, whose
/// fast path it may take).
pub(crate) fn decode_reserve(rule: &Rule, reply: &[i64]) -> Result<Decision, Error> {
    single::decode(rule, reply)
}

/// A settlement's reply: `{0}` (not held) or `{1, allowed, remaining,
/// retry_ms, reset_ms, debt}` (decoded as a charge's).
pub(crate) fn decode_settle(rule: &Rule, reply: &[i64]) -> Result<Option<Decision>, Error> {
    match reply {
        [0] => Ok(None),
        [1, charge @ ..] if charge.len() == 5 => single::decode(rule, charge).map(Some),
        _ => Err(unexpected(reply)),
    }
}
