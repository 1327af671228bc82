//! A circuit breaker in front of the store.
//!
//! After `failure_threshold` consecutive failures the breaker *opens*: calls
//! are answered by the failure policy without touching the store, so a dead
//! Redis costs nothing per request. When the open period passes, exactly
//! one call is let through as a *probe* (half-open). A successful probe
//! closes the breaker; a failed one opens it again for twice as long, up to
//! `max_open`.
//!
//! The state is a handful of atomics: the closed path — every call while the
//! store is healthy — is one load, and a success writes nothing unless
//! failures had been counted.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::telemetry;

/// When the breaker opens and how long it stays open.
///
/// ```
/// use std::time::Duration;
/// use slidegate::BreakerConfig;
///
/// let config = BreakerConfig::default()
///     .failure_threshold(3)
///     .open_for(Duration::from_millis(100))
///     .max_open(Duration::from_secs(2));
/// assert_eq!(config.threshold(), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    threshold: u32,
    open_for: Duration,
    max_open: Duration,
}

impl Default for BreakerConfig {
    /// Opens after 5 consecutive failures, for 250 ms at first, doubling
    /// on each failed probe up to 1 s — so a restarted Redis is used again
    /// within about a second.
    fn default() -> Self {
        BreakerConfig { threshold: 5, open_for: Duration::from_millis(250), max_open: Duration::from_secs(1) }
    }
}

impl BreakerConfig {
    /// Consecutive failures that open the breaker (at least 1).
    pub fn failure_threshold(mut self, failures: u32) -> Self {
        self.threshold = failures.max(1);
        self
    }

    /// How long the breaker stays open the first time (at least 1 ms).
    pub fn open_for(mut self, open_for: Duration) -> Self {
        self.open_for = open_for.max(Duration::from_millis(1));
        self.max_open = self.max_open.max(self.open_for);
        self
    }

    /// The longest open period after repeated failed probes.
    pub fn max_open(mut self, max_open: Duration) -> Self {
        self.max_open = max_open.max(self.open_for);
        self
    }

    /// Consecutive failures that open the breaker.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }
}

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go to the store.
    Closed,
    /// Calls are answered by the failure policy until the next probe.
    Open,
    /// One probe is in flight; other calls are answered by the policy.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open` (metric labels, logs).
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// What the breaker lets a call do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Call the store (breaker closed).
    Call,
    /// Call the store as the one probe; report the outcome.
    Probe,
    /// Do not call the store.
    Reject,
}

#[derive(Debug)]
pub(crate) struct Breaker {
    config: BreakerConfig,
    failures: AtomicU32,
    /// 0 while closed; otherwise the time (ms) at which a probe may go.
    open_until: AtomicU64,
    /// Current open period (ms), doubled by each failed probe.
    backoff_ms: AtomicU64,
    probing: AtomicBool,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Breaker {
    pub(crate) fn new(config: BreakerConfig) -> Breaker {
        Breaker {
            config,
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            backoff_ms: AtomicU64::new(millis(config.open_for)),
            probing: AtomicBool::new(false),
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        if self.open_until.load(Ordering::Acquire) == 0 {
            BreakerState::Closed
        } else if self.probing.load(Ordering::Acquire) {
            BreakerState::HalfOpen
        } else {
            BreakerState::Open
        }
    }

    /// How long until the next probe may go (zero when closed or due).
    pub(crate) fn open_remaining(&self, now: u64) -> Duration {
        let until = self.open_until.load(Ordering::Acquire);
        Duration::from_millis(until.saturating_sub(now))
    }

    pub(crate) fn admit(&self, now: u64) -> Admission {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Admission::Call;
        }
        if now < until {
            return Admission::Reject;
        }
        if self.probing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            telemetry::breaker_transition(BreakerState::HalfOpen);
            Admission::Probe
        } else {
            Admission::Reject
        }
    }

    pub(crate) fn on_success(&self, probe: bool) {
        if probe {
            self.failures.store(0, Ordering::Release);
            self.backoff_ms.store(millis(self.config.open_for), Ordering::Release);
            self.open_until.store(0, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            telemetry::breaker_transition(BreakerState::Closed);
            tracing::info!(target: "slidegate", "store recovered: circuit breaker closed");
        } else if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Release);
        }
    }

    pub(crate) fn on_failure(&self, probe: bool, now: u64) {
        if probe {
            let max = millis(self.config.max_open);
            let backoff = self.backoff_ms.load(Ordering::Acquire).saturating_mul(2).min(max);
            self.backoff_ms.store(backoff, Ordering::Release);
            self.open_until.store(now.saturating_add(backoff).max(1), Ordering::Release);
            self.probing.store(false, Ordering::Release);
            telemetry::breaker_transition(BreakerState::Open);
            tracing::warn!(target: "slidegate", backoff_ms = backoff, "probe failed: circuit breaker open again");
            return;
        }
        let failures = self.failures.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        if failures == self.config.threshold
            && self
                .open_until
                .compare_exchange(
                    0,
                    now.saturating_add(self.backoff_ms.load(Ordering::Acquire)).max(1),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            telemetry::breaker_transition(BreakerState::Open);
            tracing::warn!(target: "slidegate", failures, "store keeps failing: circuit breaker open");
        }
    }

    /// A probe that ended without a verdict (the caller went away, or its
    /// input was invalid): let the next call probe instead.
    pub(crate) fn release_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(
            BreakerConfig::default()
                .failure_threshold(3)
                .open_for(Duration::from_millis(100))
                .max_open(Duration::from_millis(300)),
        )
    }

    #[test]
    fn opens_after_threshold_and_probes_with_backoff() {
        let b = breaker();
        for _ in 0..2 {
            assert_eq!(b.admit(0), Admission::Call);
            b.on_failure(false, 0);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        b.on_failure(false, 0);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.admit(99), Admission::Reject);
        assert_eq!(b.admit(100), Admission::Probe);
        assert_eq!(b.admit(100), Admission::Reject, "one probe at a time");
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.on_failure(true, 100);
        assert_eq!(b.open_remaining(100), Duration::from_millis(200), "doubled");
        assert_eq!(b.admit(300), Admission::Probe);
        b.on_failure(true, 300);
        assert_eq!(b.open_remaining(300), Duration::from_millis(300), "capped at max_open");
        assert_eq!(b.admit(600), Admission::Probe);
        b.on_success(true);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.admit(600), Admission::Call);
        // Back-off starts over after recovery.
        for _ in 0..3 {
            b.on_failure(false, 1000);
        }
        assert_eq!(b.open_remaining(1000), Duration::from_millis(100));
    }

    #[test]
    fn a_success_resets_the_count() {
        let b = breaker();
        b.on_failure(false, 0);
        b.on_failure(false, 0);
        b.on_success(false);
        b.on_failure(false, 0);
        b.on_failure(false, 0);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn released_probe_lets_another_call_probe() {
        let b = breaker();
        for _ in 0..3 {
            b.on_failure(false, 0);
        }
        assert_eq!(b.admit(100), Admission::Probe);
        b.release_probe();
        assert_eq!(b.admit(100), Admission::Probe);
    }
}
