//! Concurrency leases (`scripts/lib/lease.lua`): an identity's leases'
//! key, and the replies (the calls are [`super::holds`]).

use slidegate::store::LeaseRequest;
use slidegate::{Decision, Error};

use super::{count, ms, unexpected};

/// The key of `lease`'s identity's leases: `<prefix>lease:<name>:{<identity>}`
/// — the identity's hash tag, as its other keys.
pub(crate) fn key(prefix: &str, lease: &LeaseRequest<'_>) -> String {
    let (name, identity) = (lease.limit().name(), lease.identity().as_str());
    let mut out = String::with_capacity(prefix.len() + name.len() + identity.len() + 10);
    out.push_str(prefix);
    out.push_str("lease:");
    out.push_str(name);
    out.push_str(":{");
    out.push_str(identity);
    out.push('}');
    out
}

/// An acquisition's reply: `{allowed, remaining, retry_ms, reset_ms}`.
pub(crate) fn decode_acquire(limit: u32, reply: &[i64]) -> Result<Decision, Error> {
    let &[allowed, remaining, retry, reset] = reply else { return Err(unexpected(reply)) };
    Ok(if allowed == 1 {
        Decision::allowed(limit, count(remaining), ms(reset))
    } else {
        Decision::limited(limit, count(remaining), ms(retry), ms(reset))
    })
}

/// A release's or renewal's reply: `{held}`.
pub(crate) fn decode_held(reply: &[i64]) -> Result<bool, Error> {
    match reply {
        &[held] => Ok(held == 1),
        _ => Err(unexpected(reply)),
    }
}
