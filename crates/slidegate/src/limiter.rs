//! The facade applications call.

use std::sync::Arc;

use crate::{Decision, Error, MemoryStore, Rule, Store};

/// Answers "may this caller do this now?" for any rule and key, from one
/// shared [`Store`]. Cheap to clone; clones share the store.
///
/// ```
/// use std::num::NonZeroU32;
/// use slidegate::{Limiter, Rule};
///
/// # tokio_test_shim::block_on(async {
/// let limiter = Limiter::in_memory();
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap());
/// let decision = limiter.check(&rule, "user-42").await?;
/// assert!(decision.allowed);
/// assert_eq!(decision.remaining, 99);
///
/// // Weighted: an expensive call costs 10.
/// let decision = limiter.check_n(&rule, "user-42", 10).await?;
/// assert_eq!(decision.remaining, 89);
/// # Ok::<(), slidegate::Error>(()) }).unwrap();
/// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #   tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) } }
/// ```
#[derive(Debug)]
pub struct Limiter<S> {
    store: Arc<S>,
}

impl<S> Clone for Limiter<S> {
    fn clone(&self) -> Self {
        Limiter { store: Arc::clone(&self.store) }
    }
}

impl Limiter<MemoryStore> {
    /// A limiter on a fresh embedded [`MemoryStore`] with default settings.
    pub fn in_memory() -> Self {
        Limiter::new(MemoryStore::new())
    }
}

impl<S: Store> Limiter<S> {
    /// A limiter deciding with `store`.
    pub fn new(store: S) -> Self {
        Limiter { store: Arc::new(store) }
    }

    /// Decides one request (cost 1) for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// Invalid key, or a store failure. Over the limit is `Ok` with a denied
    /// [`Decision`].
    pub async fn check(&self, rule: &Rule, key: &str) -> Result<Decision, Error> {
        self.store.check(rule, key, 1).await
    }

    /// Decides a request of weight `cost` for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), plus
    /// [`InvalidCost`](crate::ErrorKind::InvalidCost) when `cost` is 0 or
    /// above the rule's limit.
    pub async fn check_n(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        self.store.check(rule, key, cost).await
    }

    /// The store this limiter decides with.
    pub fn store(&self) -> &S {
        &self.store
    }
}
