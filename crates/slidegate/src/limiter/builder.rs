//! [`LimiterBuilder`]: deadline, failure policy, circuit breaker, deny
//! cache, adaptive limits.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::scaling::Adaptive;
use super::{Inner, Limiter};
use crate::adaptive::{AdaptiveConfig, Signals, SystemSignals};
use crate::breaker::Breaker;
use crate::deny_cache::DenyCache;
use crate::limits::{DEFAULT_DEADLINE, DEFAULT_DENY_CACHE_CAPACITY, DEFAULT_FALLBACK_KEYS};
use crate::telemetry::LogThrottle;
use crate::{BreakerConfig, Clock, FailurePolicy, MemoryStore, Store, SystemClock};

/// Configures a [`Limiter`].
///
/// ```
/// use std::time::Duration;
/// use slidegate::{BreakerConfig, FailurePolicy, Limiter, MemoryStore};
///
/// let limiter = Limiter::builder(MemoryStore::new())
///     .deadline(Duration::from_millis(20))
///     .failure_policy(FailurePolicy::FailClosed)
///     .breaker(BreakerConfig::default().failure_threshold(3))
///     .deny_cache(10_000)
///     .build();
/// assert!(limiter.is_enabled());
/// ```
pub struct LimiterBuilder<S> {
    store: S,
    deadline: Duration,
    policy: FailurePolicy,
    breaker: Option<BreakerConfig>,
    deny_cache: Option<usize>,
    fallback: Option<MemoryStore>,
    clock: Arc<dyn Clock>,
    adaptive: Option<AdaptiveConfig>,
    shadow: bool,
    /// `None`: [`SystemSignals`], created only if adaptive limits are on
    /// (it reads `/proc` when created).
    signals: Option<Arc<dyn Signals>>,
}

impl<S: fmt::Debug> fmt::Debug for LimiterBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimiterBuilder")
            .field("store", &self.store)
            .field("deadline", &self.deadline)
            .field("policy", &self.policy)
            .field("breaker", &self.breaker)
            .field("deny_cache", &self.deny_cache)
            .field("adaptive", &self.adaptive)
            .field("shadow", &self.shadow)
            .finish_non_exhaustive()
    }
}

impl<S: Store> LimiterBuilder<S> {
    pub(super) fn new(store: S) -> Self {
        LimiterBuilder {
            store,
            deadline: DEFAULT_DEADLINE,
            policy: FailurePolicy::default(),
            breaker: Some(BreakerConfig::default()),
            deny_cache: Some(DEFAULT_DENY_CACHE_CAPACITY),
            fallback: None,
            clock: Arc::new(SystemClock),
            adaptive: None,
            shadow: false,
            signals: None,
        }
    }

    /// The longest one store call may take (default [`DEFAULT_DEADLINE`],
    /// at least 1 ms). A call still running then is abandoned and answered
    /// by the failure policy. Stores that answer without I/O (the memory
    /// store) are not bounded. Needs a Tokio runtime with its time driver
    /// (the default of `#[tokio::main]`).
    ///
    /// An abandoned call may still reach the store and be charged there:
    /// the deadline bounds the caller's wait, not the store's work.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline.max(Duration::from_millis(1));
        self
    }

    /// How to answer when the store fails (default [`FailurePolicy::Fallback`]).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The circuit breaker's settings (on by default, see [`BreakerConfig`]).
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(config);
        self
    }

    /// No circuit breaker: every call goes to the store, however often it fails.
    pub fn no_breaker(mut self) -> Self {
        self.breaker = None;
        self
    }

    /// Answer repeated denials locally, holding at most `capacity` of them
    /// (on by default with [`DEFAULT_DENY_CACHE_CAPACITY`] entries; exact,
    /// see the [`Limiter`] docs).
    pub fn deny_cache(mut self, capacity: usize) -> Self {
        self.deny_cache = Some(capacity.max(1));
        self
    }

    /// Ask the store about every request, denied or not.
    pub fn no_deny_cache(mut self) -> Self {
        self.deny_cache = None;
        self
    }

    /// The local store [`FailurePolicy::Fallback`] decides with (default: a
    /// [`MemoryStore`] of [`DEFAULT_FALLBACK_KEYS`] keys on the limiter's clock).
    pub fn fallback_store(mut self, store: MemoryStore) -> Self {
        self.fallback = Some(store);
        self
    }

    /// The clock timing the breaker, the deny cache and the default fallback
    /// store (default [`SystemClock`]); a [`ManualClock`](crate::ManualClock)
    /// makes them deterministic in tests.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Turn every rule's limit down under local pressure and back up when
    /// it passes, within `config`'s floor and ceiling (off by default; see
    /// [`adaptive`](crate::adaptive)). The load comes from
    /// [`adaptive_signals`](Self::adaptive_signals) and, when `config`
    /// watches latency, from this limiter's store calls.
    pub fn adaptive(mut self, config: AdaptiveConfig) -> Self {
        self.adaptive = Some(config);
        self
    }

    /// Shadow mode for every rule (default off): each check is decided and
    /// counted, but no denial is enforced — as if every rule were
    /// [`in_shadow`](crate::Rule::in_shadow). For trying limits out on
    /// live traffic without denying anyone.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// Where adaptive limits read the load (default [`SystemSignals`]); a
    /// scripted source makes tests deterministic. Used only together with
    /// [`adaptive`](Self::adaptive).
    pub fn adaptive_signals(mut self, signals: impl Signals) -> Self {
        self.signals = Some(Arc::new(signals));
        self
    }

    /// Builds the limiter.
    pub fn build(self) -> Limiter<S> {
        let fallback = self.fallback.unwrap_or_else(|| {
            MemoryStore::builder().max_keys(DEFAULT_FALLBACK_KEYS).clock(Arc::clone(&self.clock)).build()
        });
        let adaptive = self.adaptive.map(|config| {
            let signals = self.signals.unwrap_or_else(|| Arc::new(SystemSignals::new()));
            Adaptive::new(config, signals, self.clock.now_ms())
        });
        Limiter {
            inner: Arc::new(Inner {
                store: self.store,
                deadline: self.deadline,
                policy: self.policy,
                breaker: self.breaker.map(Breaker::new),
                deny_cache: self.deny_cache.map(DenyCache::new),
                fallback,
                clock: self.clock,
                enabled: AtomicBool::new(true),
                shadow: self.shadow,
                adaptive,
                store_failed: LogThrottle::new(),
                fallback_failed: LogThrottle::new(),
            }),
        }
    }
}
