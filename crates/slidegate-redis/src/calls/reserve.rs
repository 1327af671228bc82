//! Reservations: `scripts/entry/reserve.lua` (one per algorithm) on a
//! rule's state and the reservation's own key.

use slidegate::store::ReservationRequest;
use slidegate::{Decision, Error, Rule};

use super::{Call, buckets, count, ms, single, unexpected};
use crate::keys::key_for;
use crate::now::Now;
use crate::scripts::Scripts;

/// What a call does: reserve an estimate for a ttl, or settle at a cost.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Reserve { estimate: u32, ttl_ms: u64 },
    Settle { actual: u32 },
}

/// The call doing `op` on `reservation`: its rule's state key and the
/// reservation's key (the state key, `:r:` and the id — in the identity's
/// slot, as its other keys).
pub(crate) fn call<'s>(
    scripts: &'s Scripts,
    prefix: &str,
    reservation: &ReservationRequest<'_>,
    op: Op,
    now: Now,
    field_ttl: bool,
) -> Call<'s> {
    let rule = reservation.rule();
    let state = key_for(prefix, rule, reservation.identity().as_str(), &rule.state_part());
    let held = format!("{state}:r:{}", reservation.id().as_str());
    let mut call = Call::new(scripts.reserve(rule.algorithm()), &[&state, &held]);
    let (name, cost) = match op {
        Op::Reserve { estimate, .. } => ("reserve", estimate),
        Op::Settle { actual } => ("settle", actual),
    };
    call.cmd
        .arg(name)
        .arg(now.time_arg())
        .arg(now.slack_arg())
        .arg(rule.limit())
        .arg(rule.window_ms())
        .arg(buckets(rule.algorithm()))
        .arg(if field_ttl { "1" } else { "0" })
        .arg(cost);
    if let Op::Reserve { ttl_ms, .. } = op {
        call.cmd.arg(ttl_ms);
    }
    call
}

/// A reservation's reply: a check's `{allowed, remaining, retry_ms, reset_ms}`.
pub(crate) fn decode_reserve(limit: u32, reply: &[i64]) -> Result<Decision, Error> {
    let &[allowed, remaining, retry, reset] = reply else { return Err(unexpected(reply)) };
    Ok(if allowed == 1 {
        Decision::allowed(limit, count(remaining), ms(reset))
    } else {
        Decision::limited(limit, count(remaining), ms(retry), ms(reset))
    })
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
