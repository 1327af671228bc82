//! What a layer holds and charges beyond its answers, told to an
//! [`Observer`] as it happens.

use slidegate::{ConcurrencyLimit, Decision, Rule};

/// Told what a layer holds and charges beyond its answers — the budgets
/// charged when responses end ([`response_cost`](crate::RateLimitLayer::response_cost))
/// and the concurrency leases taken and given back
/// ([`concurrency`](crate::RateLimitLayer::concurrency)) — e.g. to show
/// them on a status page ([`RateLimitLayer::observer`](crate::RateLimitLayer::observer)).
/// The decisions of requests are in their responses' extensions instead.
/// Called on the request's task or the task that charges; keep it quick.
/// Every method does nothing unless implemented.
pub trait Observer: Send + Sync + 'static {
    /// A response's cost charged to `rule`'s budget for `key` when its
    /// body ended: the state after (what remains, the debt).
    fn charged(&self, rule: &Rule, key: &str, after: &Decision) {
        let _ = (rule, key, after);
    }

    /// A lease of `limit` taken for `key`: its decision (`remaining`
    /// beside it, this one counted).
    fn acquired(&self, limit: &ConcurrencyLimit, key: &str, decision: &Decision) {
        let _ = (limit, key, decision);
    }

    /// A lease of `limit` for `key` given back: its request ended.
    fn released(&self, limit: &ConcurrencyLimit, key: &str) {
        let _ = (limit, key);
    }
}
