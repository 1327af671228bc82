//! The one storage abstraction every backend implements.

use std::future::Future;

use crate::{Decision, Dimension, Error, ErrorKind, MultiDecision, Rule};

/// One request of a batch: rule, key, cost.
pub type BatchItem<'a> = (&'a Rule, &'a str, u32);

/// Where limiter state lives: [`MemoryStore`](crate::MemoryStore) in this
/// crate, Redis in `slidegate-redis`.
///
/// A store decides and records atomically: two concurrent checks of the same
/// key never both take the last unit. Stores validate their input (cost,
/// key) themselves and encode keys with
/// [`encode_identity`](crate::encode_identity).
pub trait Store: Send + Sync + 'static {
    /// Decides a request of `cost` for `key` under `rule`, charging it if
    /// admitted.
    ///
    /// # Errors
    ///
    /// Invalid input ([`InvalidKey`](crate::ErrorKind::InvalidKey),
    /// [`InvalidCost`](crate::ErrorKind::InvalidCost)) or a store failure.
    /// Being over the limit is `Ok` with a denied [`Decision`].
    fn check(
        &self,
        rule: &Rule,
        key: &str,
        cost: u32,
    ) -> impl Future<Output = Result<Decision, Error>> + Send;

    /// Decides one request against several dimensions at once, atomically:
    /// admitted only if every dimension admits, and then all are charged;
    /// if any denies, none is (see [`MultiDecision`]).
    ///
    /// The default refuses with [`ErrorKind::Backend`]: a store must decide
    /// all dimensions atomically, which only the store itself can do. Both
    /// stores of slidegate implement it.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), plus the input errors of
    /// [`validate_dimensions`](crate::validate_dimensions).
    fn check_all(
        &self,
        dimensions: &[Dimension<'_>],
        cost: u32,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        let _ = (dimensions, cost);
        std::future::ready(Err(Error::new(
            ErrorKind::Backend,
            "this store does not implement multi-dimension checks",
        )))
    }

    /// Decides many independent requests; the results are in input order,
    /// one per request. The default asks one at a time; the Redis store
    /// sends the whole batch in one round trip (per Cluster slot).
    fn check_batch(
        &self,
        requests: &[BatchItem<'_>],
    ) -> impl Future<Output = Vec<Result<Decision, Error>>> + Send {
        async move {
            let mut out = Vec::with_capacity(requests.len());
            for &(rule, key, cost) in requests {
                out.push(self.check(rule, key, cost).await);
            }
            out
        }
    }

    /// Whether this store answers from process memory without I/O. The
    /// [`Limiter`](crate::Limiter) calls a local store directly; a remote one
    /// (the default) gets the deadline, circuit breaker and deny cache.
    fn is_local(&self) -> bool {
        false
    }

    /// Whether a denial can be undone by the store itself, not only by
    /// time: a store that reserves charges and releases them (a Redis
    /// Cluster's multi-dimension checks across slots) may deny a request
    /// because of a reservation released a moment later. The limiter's
    /// deny cache, which is exact only if nothing but time frees capacity,
    /// does not keep such a store's denials (bans apart). Default `false`.
    fn releases_charges(&self) -> bool {
        false
    }
}

impl<S: Store> Store for std::sync::Arc<S> {
    fn check(
        &self,
        rule: &Rule,
        key: &str,
        cost: u32,
    ) -> impl Future<Output = Result<Decision, Error>> + Send {
        (**self).check(rule, key, cost)
    }

    fn check_all(
        &self,
        dimensions: &[Dimension<'_>],
        cost: u32,
    ) -> impl Future<Output = Result<MultiDecision, Error>> + Send {
        (**self).check_all(dimensions, cost)
    }

    fn check_batch(
        &self,
        requests: &[BatchItem<'_>],
    ) -> impl Future<Output = Vec<Result<Decision, Error>>> + Send {
        (**self).check_batch(requests)
    }

    fn is_local(&self) -> bool {
        (**self).is_local()
    }

    fn releases_charges(&self) -> bool {
        (**self).releases_charges()
    }
}
