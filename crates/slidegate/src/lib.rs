//! slidegate: exact sliding-window rate limiting for Rust services.
//!
//! A decision looks back exactly one window from *now*, so the boundary
//! burst of fixed windows (a full quota at 10:00:59 and another at 10:01:01)
//! cannot happen. This crate holds the parts that know nothing of Redis or
//! HTTP:
//!
//! * [`Rule`] — a limit per window and an [`Algorithm`], impossible to build invalid;
//! * [`Decision`] — allowed or not, remaining, exact `retry_after`, `reset_after`;
//! * [`algorithm`] — the algorithms as pure state machines over explicit time;
//! * [`Store`] — the storage trait, with the embedded [`MemoryStore`];
//!   `slidegate-redis` provides the Redis store;
//! * [`Limiter`] — the facade applications call, with the deadline,
//!   [`FailurePolicy`], circuit breaker ([`BreakerConfig`]), runtime switch
//!   and local deny cache around the store;
//! * [`adaptive`] — optional adaptive limits: every limit scaled down under
//!   local load (CPU, memory, store latency) and back up, within a floor and
//!   a ceiling, from injectable [`Signals`](adaptive::Signals);
//! * [`Clock`] with [`SystemClock`] and the test-friendly [`ManualClock`];
//! * [`Error`] with an [`ErrorKind`] and [`Error::is_transient`];
//! * [`telemetry`] — the metrics recorded through the `metrics` facade;
//! * `#[rate_limit]` (feature `macros`) — an attribute that guards an
//!   `async fn` with a limiter, returning [`RateLimited`] through the
//!   function's own error type when over the limit; [`RateLimitKey`] says
//!   what its `key` accepts.
//!
//! ```
//! use std::num::NonZeroU32;
//! use std::time::Duration;
//! use slidegate::{Limiter, ManualClock, MemoryStore, Rule};
//!
//! # tokio_test_shim::block_on(async {
//! let clock = ManualClock::new(0);
//! let limiter = Limiter::new(MemoryStore::builder().clock(clock.clone()).build());
//! let rule = Rule::per_second(NonZeroU32::new(2).unwrap());
//!
//! assert!(limiter.check(&rule, "alice").await?.allowed);
//! clock.advance(Duration::from_millis(400));
//! assert!(limiter.check(&rule, "alice").await?.allowed);
//! let denied = limiter.check(&rule, "alice").await?;
//! assert!(!denied.allowed);
//! // Exact: the first request leaves the window 1 s after it was made.
//! assert_eq!(denied.retry_after, Duration::from_millis(600));
//! # Ok::<(), slidegate::Error>(()) }).unwrap();
//! # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #   tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) } }
//! ```

pub mod adaptive;
pub mod algorithm;
mod breaker;
mod clock;
pub mod concurrency;
mod decision;
mod deny_cache;
mod error;
mod failure;
mod identity;
mod key;
mod limiter;
pub mod limits;
mod macro_support;
mod memory;
mod multi;
mod penalty;
mod rate_limited;
mod reservation;
mod rule;
pub mod store;
pub mod telemetry;

pub use adaptive::AdaptiveConfig;
pub use breaker::{BreakerConfig, BreakerState};
pub use clock::{Clock, ManualClock, SystemClock};
pub use concurrency::{ConcurrencyLimit, LeaseId};
pub use decision::{Decision, Source, State};
pub use error::{Error, ErrorKind};
pub use failure::FailurePolicy;
pub use key::RateLimitKey;
pub use limiter::{Admission, Lease, Limiter, LimiterBuilder, Need, Needs, Reservation};
pub use memory::{MemoryStore, MemoryStoreBuilder};
pub use multi::{Dimension, MultiDecision, WeightedDimension};
pub use penalty::Penalty;
pub use rate_limited::RateLimited;
pub use rule::{Algorithm, Rule};
pub use store::Store;

/// Guards an `async fn` with a limiter: `#[rate_limit(limiter = …, limit = 5,
/// window = "1m", key = user_id)]`. Over the limit, the function returns
/// `Err(RateLimited.into())` without running its body.
///
/// See the [`slidegate-macros`](slidegate_macros) crate for every argument.
#[cfg(feature = "macros")]
pub use slidegate_macros::rate_limit;

/// Used by the code `#[rate_limit]` generates; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::macro_support::{RuleCell, RuleName, RuleSpec, check};
}
