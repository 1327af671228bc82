//! The helpers every conformance case uses: rules, a fixed start time, and
//! checks built from plain arguments (validated where requests are built).

use std::num::{NonZeroU16, NonZeroU32};
use std::time::Duration;

use slidegate::store::{Dimensions, Request, Store};
use slidegate::{Algorithm, Decision, Dimension, Error, MultiDecision, Rule, WeightedDimension};

/// Where every case's clock starts (Nov 2023, in ms since the UNIX epoch),
/// so Redis' Lua sees realistic magnitudes.
pub const START_MS: u64 = 1_700_000_000_000;

/// Every algorithm, with `buckets` for the sliding counter.
pub fn algorithms(buckets: u16) -> Vec<Algorithm> {
    let buckets = NonZeroU16::new(buckets.max(1)).unwrap_or(NonZeroU16::MIN);
    vec![
        Algorithm::SlidingLog,
        Algorithm::SlidingCounter { buckets },
        Algorithm::FixedWindow,
        Algorithm::Gcra,
    ]
}

/// A rule of `limit` per `window_ms` under `algorithm` (panics on invalid input: test helper).
pub fn rule(limit: u32, window_ms: u64, algorithm: Algorithm) -> Rule {
    Rule::new(limit, Duration::from_millis(window_ms))
        .and_then(|r| r.with_algorithm(algorithm))
        .unwrap_or_else(|e| panic!("test rule: {e}"))
}

pub(crate) async fn ok<S: Store>(store: &S, rule: &Rule, key: &str, cost: u32) -> Decision {
    check(store, rule, key, cost).await.unwrap_or_else(|e| panic!("check {key:?} under {rule}: {e}"))
}

/// [`Store::check`] of the request built from `rule`, `key` and `cost`:
/// the construction's error when they are invalid (stores only ever see
/// valid requests).
///
/// # Errors
///
/// The request's validation error, or the store's.
pub async fn check<S: Store>(store: &S, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
    store.check(&Request::new(rule, key, cost)?).await
}

/// [`Store::check_all`] of the dimensions built from `dimensions` and `cost`.
///
/// # Errors
///
/// The dimensions' validation error, or the store's.
pub async fn check_all<S: Store>(
    store: &S,
    dimensions: &[Dimension<'_>],
    cost: u32,
) -> Result<MultiDecision, Error> {
    store.check_all(&Dimensions::new(dimensions, cost)?).await
}

/// [`Store::check_all`] of `dimensions`, each with its own cost.
pub(super) async fn check_weighted<S: Store>(
    store: &S,
    dimensions: &[WeightedDimension<'_>],
) -> Result<MultiDecision, Error> {
    store.check_all(&Dimensions::weighted(dimensions)?).await
}

/// [`Store::check_batch`] of the valid items of `items`; the others answer
/// their validation error, in place.
pub async fn check_batch<S: Store>(
    store: &S,
    items: &[WeightedDimension<'_>],
) -> Vec<Result<Decision, Error>> {
    let built: Vec<Result<Request<'_>, Error>> =
        items.iter().map(|&(rule, key, cost)| Request::new(rule, key, cost)).collect();
    let valid: Vec<Request<'_>> = built.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    let mut answers = store.check_batch(&valid).await.into_iter();
    built
        .into_iter()
        .map(|r| match r {
            Ok(_) => answers.next().unwrap_or_else(|| panic!("the store answered fewer requests than asked")),
            Err(error) => Err(error),
        })
        .collect()
}

/// A limit of `n` per `window_ms` as `NonZeroU32` (test helper; panics on 0).
pub fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or_else(|| panic!("nz(0)"))
}
