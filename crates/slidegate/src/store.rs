//! The one storage abstraction every backend implements.

use std::future::Future;

use crate::{Decision, Error, Rule};

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

    /// Whether this store answers from process memory without I/O. The
    /// [`Limiter`](crate::Limiter) calls a local store directly; a remote one
    /// (the default) gets the deadline, circuit breaker and deny cache.
    fn is_local(&self) -> bool {
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

    fn is_local(&self) -> bool {
        (**self).is_local()
    }
}
