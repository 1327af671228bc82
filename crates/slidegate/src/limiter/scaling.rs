//! Adaptive limits inside the limiter: lazy evaluation of the scaler, and
//! the effective rule each check enforces (see [`crate::adaptive`]).

use std::borrow::Cow;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use crate::adaptive::{AdaptiveConfig, AdaptiveScaler, LatencyAverage, Signals, scale};
use crate::{Decision, Rule, Source, telemetry};

/// The adaptive state of one limiter (shared by its clones).
#[derive(Debug)]
pub(super) struct Adaptive {
    pub(super) scaler: AdaptiveScaler,
    signals: Arc<dyn Signals>,
    /// The store-latency signal, fed by every timed store call.
    latency: LatencyAverage,
}

impl Adaptive {
    pub(super) fn new(config: AdaptiveConfig, signals: Arc<dyn Signals>, now_ms: u64) -> Adaptive {
        telemetry::adaptive_factor(1.0);
        Adaptive { scaler: AdaptiveScaler::new(config, now_ms), signals, latency: LatencyAverage::new() }
    }
}

/// The factor one check (or one batch) enforces, read once so every rule
/// of the call sees the same one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scaling {
    /// `None`: adaptive limits are off.
    factor: Option<f64>,
    /// Until the factor can next change: the `retry_after` of a cost above
    /// the effective limit.
    retry: Duration,
}

impl Scaling {
    /// Whether rules are scaled at all.
    pub(super) fn is_active(&self) -> bool {
        self.factor.is_some()
    }

    /// The rule to enforce: `rule` with the effective limit, in `rule`'s state.
    pub(super) fn rule<'r>(&self, rule: &'r Rule) -> Cow<'r, Rule> {
        let Some(factor) = self.factor else { return Cow::Borrowed(rule) };
        match NonZeroU32::new(scale(rule.limit(), factor)) {
            Some(limit) if limit.get() != rule.limit() => Cow::Owned(rule.scaled(limit)),
            _ => Cow::Borrowed(rule),
        }
    }

    /// The answer to a cost the effective rule cannot admit (it is within
    /// the configured limit, or validation would have refused it): denied
    /// until the limit may next change, without asking the store.
    pub(super) fn beyond(&self, effective: &Rule, cost: u32) -> Option<Decision> {
        // A budget admits any cost while something remains.
        (cost > effective.limit() && !effective.is_budget()).then(|| {
            Decision::limited(effective.limit(), 0, self.retry, Duration::ZERO).from(Source::AdaptiveLimit)
        })
    }
}

impl Scaling {
    /// No scaling: adaptive limits are off.
    pub(super) const OFF: Scaling = Scaling { factor: None, retry: Duration::ZERO };
}

impl Adaptive {
    /// The factor in force for a call made at `now`, evaluating the
    /// signals first when an interval has passed (one caller per interval).
    pub(super) fn scaling(&self, now: u64) -> Scaling {
        let scaler = &self.scaler;
        if scaler.claim(now) {
            let load = self.signals.sample();
            let latency = self.latency.get();
            let before = scaler.factor();
            let factor = scaler.apply(load, latency);
            telemetry::adaptive_factor(factor);
            if factor != before {
                tracing::info!(
                    target: "slidegate",
                    factor,
                    before,
                    cpu = load.cpu,
                    memory = load.memory,
                    latency_ms = latency.map(|l| l.as_secs_f64() * 1000.0),
                    "adaptive limits rescaled"
                );
            }
        }
        let retry = scaler.until_next_evaluation(now).max(Duration::from_millis(1));
        Scaling { factor: Some(scaler.factor()), retry }
    }

    /// Feeds one store call's duration to the latency signal.
    pub(super) fn observe_latency(&self, took: Duration) {
        self.latency.record(took);
    }
}
