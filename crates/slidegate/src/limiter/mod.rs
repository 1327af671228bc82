//! The facade applications call: rules and keys in, decisions out, with the
//! failure policy, circuit breaker, deadline, deny cache and adaptive limits
//! around the store.

mod admit;
mod batch;
mod builder;
mod guard;
mod leases;
mod operate;
mod pipeline;
mod reservations;
mod scaling;
mod shadow;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use admit::{Admission, Need, Needs};
pub use builder::LimiterBuilder;
pub use leases::Lease;
pub use reservations::Reservation;

use scaling::{Adaptive, Scaling};

use crate::breaker::Breaker;
use crate::deny_cache::DenyCache;
use crate::store::Dimensions;
use crate::telemetry::LogThrottle;
use crate::{
    Clock, Decision, Dimension, Error, FailurePolicy, MemoryStore, MultiDecision, Rule, Store,
    WeightedDimension,
};

/// Answers "may this caller do this now?" for any rule and key, from one
/// shared [`Store`]. Cheap to clone; clones share the store and all state.
///
/// Around the store it keeps the promises of slidegate's design
/// (docs/design.md §1, "When the store fails"):
///
/// * **Deadline**: a store call taking longer than
///   [`deadline`](LimiterBuilder::deadline) (default 50 ms) is abandoned.
/// * **Failure policy**: a failed or abandoned call is answered by the
///   [`FailurePolicy`] (default: a local in-memory limiter), as a
///   [`State::Degraded`](crate::State::Degraded) decision — counted in
///   metrics and logged, never a silent allow. Invalid input is an `Err`.
/// * **Circuit breaker**: after repeated failures the store is not called
///   at all; a probe goes through after a back-off, and the breaker closes
///   by itself when the store answers again ([`BreakerConfig`](crate::BreakerConfig)).
/// * **Runtime switch**: [`set_enabled(false)`](Limiter::set_enabled) admits
///   everything without asking the store until switched back on.
/// * **Deny cache**: after a denial with `retry_after = r`, the same rule,
///   identity and cost are denied locally until `r` passes — also as a
///   dimension of [`check_all`](Limiter::check_all) and in
///   [`check_batch`](Limiter::check_batch). This is exact — only time frees
///   capacity, so the store would deny them too — and sheds attack traffic
///   without round trips. (A store that releases charges,
///   [`Store::releases_charges`], gets only its bans cached.)
/// * **Shadow mode**: a rule [`in_shadow`](Rule::in_shadow), or every
///   rule with [`LimiterBuilder::shadow`], is decided and counted but its
///   denials are overruled ([`Source::Shadow`](crate::Source::Shadow)).
/// * **A cost above the limit** is denied without asking the store: no
///   wait would admit it ([`Source::CostAboveLimit`](crate::Source::CostAboveLimit)).
/// * **Adaptive limits** (optional, [`LimiterBuilder::adaptive`]): every
///   rule's limit is scaled down under local pressure (CPU, memory, store
///   latency) and back up, within a floor and a ceiling, in the same store
///   state; decisions report the effective limit (see [`crate::adaptive`]).
///
/// Deadline, breaker and deny cache apply to remote stores only: a store
/// whose [`Store::is_local`] is true (the memory store) answers in
/// nanoseconds and is called directly.
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
///
/// // Switched off at run time: everything passes, nothing is charged.
/// limiter.set_enabled(false);
/// assert_eq!(limiter.check_n(&rule, "user-42", 100).await?.state, slidegate::State::Disabled);
/// limiter.set_enabled(true);
/// assert_eq!(limiter.check(&rule, "user-42").await?.remaining, 88);
/// # Ok::<(), slidegate::Error>(()) }).unwrap();
/// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
/// ```
#[derive(Debug)]
pub struct Limiter<S> {
    inner: Arc<Inner<S>>,
}

#[derive(Debug)]
struct Inner<S> {
    store: S,
    deadline: Duration,
    policy: FailurePolicy,
    breaker: Option<Breaker>,
    deny_cache: Option<DenyCache>,
    /// Decides for [`FailurePolicy::Fallback`].
    fallback: MemoryStore,
    clock: Arc<dyn Clock>,
    enabled: AtomicBool,
    /// Every rule in shadow mode ([`LimiterBuilder::shadow`]).
    shadow: bool,
    /// Scales the limits, when adaptive limits are on.
    adaptive: Option<Adaptive>,
    /// Gates the warning of a failed store call.
    store_failed: LogThrottle,
    /// Gates the warning of a full fallback store.
    fallback_failed: LogThrottle,
}

impl<S> Inner<S> {
    /// The scaling in force for a call made now (see [`Adaptive::scaling`]).
    fn scaling(&self) -> Scaling {
        self.adaptive.as_ref().map_or(Scaling::OFF, |adaptive| adaptive.scaling(self.clock.now_ms()))
    }

    /// Feeds one store call's duration to the adaptive latency signal.
    fn observe_latency(&self, took: Duration) {
        if let Some(adaptive) = &self.adaptive {
            adaptive.observe_latency(took);
        }
    }
}

impl<S> Clone for Limiter<S> {
    fn clone(&self) -> Self {
        Limiter { inner: Arc::clone(&self.inner) }
    }
}

impl Limiter<MemoryStore> {
    /// A limiter on a fresh embedded [`MemoryStore`] with default settings.
    pub fn in_memory() -> Self {
        Limiter::new(MemoryStore::new())
    }
}

impl<S: Store> Limiter<S> {
    /// A limiter deciding with `store`, with default settings.
    pub fn new(store: S) -> Self {
        Limiter::builder(store).build()
    }

    /// Starts configuring a limiter deciding with `store`.
    pub fn builder(store: S) -> LimiterBuilder<S> {
        LimiterBuilder::new(store)
    }

    /// Decides one request (cost 1) for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// Invalid input only ([`InvalidKey`](crate::ErrorKind::InvalidKey) for an empty
    /// key). Over the limit is `Ok` with a denied [`Decision`]; a failing
    /// store is answered by the failure policy.
    pub async fn check(&self, rule: &Rule, key: &str) -> Result<Decision, Error> {
        self.check_n(rule, key, 1).await
    }

    /// Decides a request of weight `cost` for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), plus
    /// [`InvalidCost`](crate::ErrorKind::InvalidCost) when `cost` is 0. A
    /// cost above the rule's limit is a denial that no wait lifts
    /// ([`Source::CostAboveLimit`](crate::Source::CostAboveLimit)), given
    /// without asking the store; above an adaptively lowered limit, a denial
    /// until the limit may change (see [`crate::adaptive`]).
    pub async fn check_n(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        self.decide(rule, key, cost).await
    }

    /// Records a charge of `cost` for `key` under `rule` whatever remains:
    /// what a request really cost, learnt after it ran (an LLM response's
    /// tokens, bytes sent). The identity may go into debt — the decision's
    /// `remaining` is then 0 and its [`debt`](Decision::debt) how far over
    /// the limit it is — and later checks are denied until enough of the
    /// window has passed to pay it off (see [`algorithm::State::charge`]
    /// for each algorithm's arithmetic). Any cost is taken, also 0 and more
    /// than the limit. The decision is `allowed` when the identity had
    /// something left before the charge; it is recorded either way — but
    /// not while a rule's penalty bans the identity, and on a rule with a
    /// penalty a charge that finds nothing left counts as a violation.
    /// Charging under `rule` is checking under it as a
    /// [budget](Rule::budget), in the same state.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use slidegate::{Limiter, Rule};
    ///
    /// # tokio_test_shim::block_on(async {
    /// let tokens = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("tokens")?;
    /// let limiter = Limiter::in_memory();
    /// assert!(limiter.charge(&tokens, "tenant-7", 700).await?.allowed);
    /// let second = limiter.charge(&tokens, "tenant-7", 700).await?;
    /// assert_eq!((second.allowed, second.remaining, second.debt), (true, 0, 400));
    /// assert!(!limiter.check(&tokens, "tenant-7").await?.allowed, "in debt until the first 700 leave");
    /// # Ok::<(), slidegate::Error>(()) }).unwrap();
    /// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
    /// ```
    ///
    /// [`algorithm::State::charge`]: crate::algorithm::State::charge
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    pub async fn charge(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        if rule.is_budget() {
            return self.decide(rule, key, cost).await;
        }
        self.decide(&rule.clone().budget(), key, cost).await
    }

    /// Decides one request (cost 1) against several (rule, key) dimensions:
    /// admitted only if every dimension admits, and then every one is
    /// charged; if any denies, none is charged. Atomic in every store.
    ///
    /// # Errors
    ///
    /// Invalid input only, see [`Dimensions::new`](crate::store::Dimensions::new).
    pub async fn check_all(&self, dimensions: &[Dimension<'_>]) -> Result<MultiDecision, Error> {
        self.check_all_n(dimensions, 1).await
    }

    /// [`check_all`](Self::check_all) for a request of weight `cost`,
    /// charged to every dimension.
    ///
    /// # Errors
    ///
    /// Invalid input only, see [`Dimensions::new`](crate::store::Dimensions::new).
    pub async fn check_all_n(&self, dimensions: &[Dimension<'_>], cost: u32) -> Result<MultiDecision, Error> {
        let given = || dimensions.iter().map(|&(rule, key)| (rule, key, cost)).collect();
        let (valid, heavy) = shadow::validate(Dimensions::new(dimensions, cost), given)?;
        self.decide_all(valid, heavy).await
    }

    /// [`check_all`](Self::check_all) where each dimension is charged its
    /// own cost — e.g. an Envoy rate-limit request whose descriptors carry
    /// their own `hits_addend`. All or nothing, as `check_all`.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use slidegate::{Limiter, Rule};
    ///
    /// # tokio_test_shim::block_on(async {
    /// let per_user = Rule::per_minute(NonZeroU32::new(10).unwrap());
    /// let bytes = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("upload-bytes")?;
    /// let limiter = Limiter::in_memory();
    ///
    /// let upload = limiter.check_all_weighted(&[(&per_user, "alice", 1), (&bytes, "alice", 800)]).await?;
    /// assert!(upload.allowed);
    /// assert_eq!(upload.decisions[1].remaining, 200);
    /// // 300 more bytes do not fit: neither dimension is charged.
    /// let denied = limiter.check_all_weighted(&[(&per_user, "alice", 1), (&bytes, "alice", 300)]).await?;
    /// assert!(!denied.allowed);
    /// assert_eq!(denied.decisions[0].remaining, 9);
    /// # Ok::<(), slidegate::Error>(()) }).unwrap();
    /// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
    /// ```
    ///
    /// # Errors
    ///
    /// Invalid input only, see [`Dimensions::weighted`].
    pub async fn check_all_weighted(
        &self,
        dimensions: &[WeightedDimension<'_>],
    ) -> Result<MultiDecision, Error> {
        let (valid, heavy) = shadow::validate(Dimensions::weighted(dimensions), || dimensions.to_vec())?;
        self.decide_all(valid, heavy).await
    }

    /// What [`check_all_weighted`](Self::check_all_weighted) would answer
    /// now, charging nothing and counting no penalty violation: each
    /// dimension's verdict for its cost, `remaining` being what it admits
    /// now. For check-only requests (an Envoy descriptor's `hits_addend:
    /// 0`) and dry runs. A failing store is answered by the failure policy
    /// (the fallback store is peeked, not charged).
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use slidegate::{Limiter, Rule};
    ///
    /// # tokio_test_shim::block_on(async {
    /// let rule = Rule::per_minute(NonZeroU32::new(2).unwrap());
    /// let limiter = Limiter::in_memory();
    /// limiter.check(&rule, "alice").await?;
    /// let peeked = limiter.peek_all_weighted(&[(&rule, "alice", 1)]).await?;
    /// assert!(peeked.allowed);
    /// assert_eq!(peeked.decisions[0].remaining, 1);
    /// // Peeking charged nothing: one more is admitted, then none.
    /// assert!(limiter.check(&rule, "alice").await?.allowed);
    /// assert!(!limiter.peek_all_weighted(&[(&rule, "alice", 1)]).await?.allowed);
    /// # Ok::<(), slidegate::Error>(()) }).unwrap();
    /// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
    /// ```
    ///
    /// # Errors
    ///
    /// Invalid input only, see [`Dimensions::weighted`].
    pub async fn peek_all_weighted(
        &self,
        dimensions: &[WeightedDimension<'_>],
    ) -> Result<MultiDecision, Error> {
        let (valid, heavy) = shadow::validate(Dimensions::weighted(dimensions), || dimensions.to_vec())?;
        if heavy.is_some() || self.inner.shadows(valid.requests()) {
            return self.peek_all_shadowed(valid, heavy).await;
        }
        self.peek_all(valid).await
    }

    /// [`check_all_n`](Self::check_all_n)'s answer when it needs no store
    /// call — limiting switched off, a cost beyond an adaptively lowered
    /// limit, a denial the deny cache holds — or `None` when only the store
    /// can answer (then call `check_all_n`). Synchronous, and nothing is
    /// charged: a server answers attack traffic with it without a task or
    /// a future of its own (the tower layer does).
    ///
    /// # Errors
    ///
    /// As [`check_all_n`](Self::check_all_n), when it validates the request
    /// (not when it returns `None` at once: with no denial cached, limiting
    /// on and no scaling in force there is nothing it could answer).
    pub fn check_all_now(
        &self,
        dimensions: &[Dimension<'_>],
        cost: u32,
    ) -> Option<Result<MultiDecision, Error>> {
        self.decide_all_now(dimensions, cost)
    }

    /// Decides many independent requests at once — one round trip to the
    /// Redis store (per Cluster slot) instead of one each. Results are in
    /// input order; an invalid request gets its own `Err` and does not
    /// affect the others. Denials in the deny cache are answered locally.
    pub async fn check_batch(&self, requests: &[WeightedDimension<'_>]) -> Vec<Result<Decision, Error>> {
        self.decide_batch(requests).await
    }
}
