//! Adaptive limits: an optional scaler turns every rule's limit down while
//! this process is under pressure and back up when it recovers, within a
//! floor and a ceiling (docs/design.md §1, "When the store fails").
//!
//! * [`Signals`] sample the local [`Load`] (CPU busy and memory used
//!   fractions); [`SystemSignals`] reads Linux `/proc`, and tests inject a
//!   scripted source so they are deterministic.
//! * The [`Limiter`](crate::Limiter) also measures the latency of its store
//!   calls (an exponentially weighted moving average) as a third signal.
//! * [`AdaptiveScaler`] keeps one *factor* and moves it by AIMD once per
//!   [`interval`](AdaptiveConfigBuilder::interval): when any signal is above
//!   its high watermark the factor is multiplied by
//!   [`decrease`](AdaptiveConfigBuilder::decrease) (not below the
//!   [`floor`](AdaptiveConfigBuilder::floor)); when every signal present is
//!   below its low watermark it grows by
//!   [`increase`](AdaptiveConfigBuilder::increase) (not above the
//!   [`ceiling`](AdaptiveConfigBuilder::ceiling)); otherwise, or when no
//!   signal is available at all, it stays.
//! * Every check enforces `max(1, round(limit × factor))` — the *effective
//!   limit*, which decisions report in [`Decision::limit`](crate::Decision::limit)
//!   — in the **same store state** as the configured rule (named or not),
//!   so scaling never resets anybody's quota.
//!
//! Evaluation is lazy: the first check after an interval has passed (by the
//! limiter's [`Clock`](crate::Clock)) samples the signals and moves the
//! factor, one caller per interval; an idle limiter does not evaluate. The
//! factor is shared by every rule of the limiter and its clones, and
//! recorded in the `slidegate_adaptive_factor` gauge.
//!
//! **A cost above the effective limit** but within the configured one
//! cannot be admitted until the factor grows. It is not the caller's fault,
//! so it is not an error: it is denied as [`State::Limited`](crate::State::Limited)
//! without asking the store, with `retry_after` the time until the next
//! evaluation (the earliest the limit can change; the request may need
//! several), `remaining` and `reset_after` 0 (not known without the store),
//! and it is not counted as a penalty violation. In a multi-dimension check
//! the other dimensions, not asked either, report `allowed: true` with
//! `remaining` 0.
//!
//! ```
//! use std::num::NonZeroU32;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use slidegate::adaptive::{AdaptiveConfig, Load, Signals};
//! use slidegate::{Limiter, ManualClock, MemoryStore, Rule};
//!
//! /// A load source the test sets by hand.
//! #[derive(Debug, Clone, Default)]
//! struct Scripted(Arc<Mutex<Load>>);
//!
//! impl Signals for Scripted {
//!     fn sample(&self) -> Load {
//!         *self.0.lock().unwrap()
//!     }
//! }
//!
//! # tokio_test_shim::block_on(async {
//! let clock = ManualClock::new(0);
//! let load = Scripted::default();
//! let limiter = Limiter::builder(MemoryStore::builder().clock(clock.clone()).build())
//!     .clock(clock.clone())
//!     .adaptive(AdaptiveConfig::builder().floor(0.5).interval(Duration::from_secs(1)).build()?)
//!     .adaptive_signals(load.clone())
//!     .build();
//! let rule = Rule::per_minute(NonZeroU32::new(100).unwrap());
//! assert_eq!(limiter.check(&rule, "alice").await?.limit, 100);
//!
//! // CPU above its high watermark (0.85): one step down per interval.
//! *load.0.lock().unwrap() = Load::default().with_cpu(0.97);
//! clock.advance(Duration::from_secs(1));
//! assert_eq!(limiter.check(&rule, "alice").await?.limit, 80);
//! assert_eq!(limiter.adaptive_factor(), Some(0.8));
//! # Ok::<(), slidegate::Error>(()) }).unwrap();
//! # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #   tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) } }
//! ```

mod config;
mod latency;
mod scaler;
mod signals;
mod system;

pub use config::{AdaptiveConfig, AdaptiveConfigBuilder};
pub(crate) use latency::LatencyAverage;
pub use scaler::AdaptiveScaler;
pub(crate) use scaler::scale;
pub use signals::{Load, Signals};
pub use system::SystemSignals;
