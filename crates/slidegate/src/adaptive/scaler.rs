//! [`AdaptiveScaler`]: the factor adaptive limits apply, moved by AIMD.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::config::AdaptiveConfig;
use super::signals::Load;

/// Holds the factor every limit is multiplied by and moves it, at most once
/// per [`interval`](AdaptiveConfig::interval), from the observed load:
/// additive increase (when every signal present is below its low
/// watermark), multiplicative decrease (when any is above its high one),
/// between [`floor`](AdaptiveConfig::floor) and [`ceiling`](AdaptiveConfig::ceiling).
///
/// The [`Limiter`](crate::Limiter) owns one when built with
/// [`adaptive`](crate::LimiterBuilder::adaptive); it is public for code that
/// scales something else the same way. Reading the factor is one atomic load.
///
/// ```
/// use std::time::Duration;
/// use slidegate::adaptive::{AdaptiveConfig, AdaptiveScaler, Load};
///
/// let scaler = AdaptiveScaler::new(AdaptiveConfig::default(), 0);
/// let hot = Load::default().with_cpu(0.95);
/// assert_eq!(scaler.update(500, hot, None), None, "not within the first interval");
/// assert_eq!(scaler.update(1_000, hot, None), Some(0.8));
/// assert_eq!(scaler.effective_limit(100), 80);
/// let cool = Load::default().with_cpu(0.2).with_memory(0.3);
/// let raised = scaler.update(2_000, cool, None).unwrap();
/// assert!((raised - 0.85).abs() < 1e-9);
/// ```
#[derive(Debug)]
pub struct AdaptiveScaler {
    config: AdaptiveConfig,
    /// The factor as `f64` bits: the hot path is one load.
    factor: AtomicU64,
    /// When the factor was last evaluated (ms; creation time at first).
    last_ms: AtomicU64,
}

/// A signal level usable for comparisons: finite, within `0..=1`.
fn level(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite()).map(|v| v.clamp(0.0, 1.0))
}

/// `max(1, round(limit × factor))`.
pub(crate) fn scale(limit: u32, factor: f64) -> u32 {
    // `as` saturates at u32::MAX (a ceiling above 1 on a huge limit).
    ((f64::from(limit) * factor).round() as u32).max(1)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl AdaptiveScaler {
    /// A scaler at factor 1.0 whose first evaluation is due one interval
    /// after `now_ms`.
    pub fn new(config: AdaptiveConfig, now_ms: u64) -> AdaptiveScaler {
        AdaptiveScaler { config, factor: AtomicU64::new(1.0f64.to_bits()), last_ms: AtomicU64::new(now_ms) }
    }

    /// The settings.
    pub fn config(&self) -> &AdaptiveConfig {
        &self.config
    }

    /// The factor in force, between floor and ceiling.
    pub fn factor(&self) -> f64 {
        f64::from_bits(self.factor.load(Ordering::Relaxed))
    }

    /// `limit` scaled by the factor: `max(1, round(limit × factor))`.
    pub fn effective_limit(&self, limit: u32) -> u32 {
        scale(limit, self.factor())
    }

    /// Evaluates at `now_ms` if an interval has passed since the last
    /// evaluation (or the clock stepped back), moving the factor by one
    /// AIMD step for `load` and the store's `latency`; returns the new
    /// factor, or `None` when no evaluation was due (the factor is then
    /// unchanged). Of concurrent callers, one evaluates.
    pub fn update(&self, now_ms: u64, load: Load, latency: Option<Duration>) -> Option<f64> {
        self.claim(now_ms).then(|| self.apply(load, latency))
    }

    /// How long after `now_ms` the next evaluation is due (zero when it is).
    pub fn until_next_evaluation(&self, now_ms: u64) -> Duration {
        let due = self.last_ms.load(Ordering::Relaxed).saturating_add(millis(self.config.interval()));
        Duration::from_millis(due.saturating_sub(now_ms))
    }

    /// Takes the evaluation due at `now_ms`, if one is: true for exactly one
    /// caller per interval (one CAS), who then samples and [`apply`](Self::apply)s.
    pub(crate) fn claim(&self, now_ms: u64) -> bool {
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = now_ms.checked_sub(last).is_none_or(|elapsed| elapsed >= millis(self.config.interval()));
        due && self.last_ms.compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// One AIMD step; returns the new factor. Only the caller that won
    /// [`claim`](Self::claim) writes, so a plain store is enough.
    pub(crate) fn apply(&self, load: Load, latency: Option<Duration>) -> f64 {
        let config = &self.config;
        // (above high, below low) for each signal both watched and measured.
        let mut readings: Vec<(bool, bool)> = Vec::with_capacity(3);
        if let (Some(w), Some(cpu)) = (config.cpu(), level(load.cpu)) {
            readings.push((cpu > w.high, cpu < w.low));
        }
        if let (Some(w), Some(memory)) = (config.memory(), level(load.memory)) {
            readings.push((memory > w.high, memory < w.low));
        }
        if let (Some(w), Some(latency)) = (config.latency(), latency) {
            readings.push((latency > w.high, latency < w.low));
        }
        let old = self.factor();
        let new = if readings.iter().any(|&(high, _)| high) {
            (old * config.decrease()).max(config.floor())
        } else if !readings.is_empty() && readings.iter().all(|&(_, low)| low) {
            (old + config.increase()).min(config.ceiling())
        } else {
            // Between the watermarks, or nothing measured: hold.
            old
        };
        self.factor.store(new.to_bits(), Ordering::Relaxed);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaler() -> AdaptiveScaler {
        AdaptiveScaler::new(AdaptiveConfig::default(), 0)
    }

    fn cpu(v: f64) -> Load {
        Load::default().with_cpu(v)
    }

    #[test]
    fn one_evaluation_per_interval() {
        let s = scaler();
        assert!(!s.claim(999));
        assert_eq!(s.until_next_evaluation(400), Duration::from_millis(600));
        assert!(s.claim(1000));
        assert!(!s.claim(1000), "claimed once");
        assert!(!s.claim(1999));
        assert!(s.claim(5000), "a long idle gap is one evaluation");
        assert!(s.claim(10), "a clock stepped back starts over");
        assert_eq!(s.until_next_evaluation(10), Duration::from_secs(1));
    }

    #[test]
    fn any_high_signal_decreases_to_the_floor() {
        let s = scaler();
        let factors: Vec<f64> = (0..5).map(|_| s.apply(cpu(0.3).with_memory(0.95), None)).collect();
        let limits: Vec<u32> = factors.iter().map(|f| (100.0 * f).round() as u32).collect();
        assert_eq!(limits, [80, 64, 51, 50, 50]);
        assert_eq!(s.factor(), 0.5);
        assert_eq!(s.effective_limit(100), 50);
    }

    #[test]
    fn all_low_signals_increase_to_the_ceiling() {
        let config = AdaptiveConfig::builder().ceiling(1.2).build().unwrap();
        let s = AdaptiveScaler::new(config, 0);
        for _ in 0..10 {
            s.apply(cpu(0.1).with_memory(0.1), None);
        }
        assert_eq!(s.factor(), 1.2);
        assert_eq!(s.effective_limit(100), 120);
    }

    #[test]
    fn between_watermarks_or_unmeasured_holds() {
        let s = scaler();
        s.apply(cpu(0.9), None);
        assert_eq!(s.apply(cpu(0.7), None), 0.8, "between the watermarks");
        assert_eq!(s.apply(cpu(0.1).with_memory(0.8), None), 0.8, "memory is not low");
        assert_eq!(s.apply(Load::default(), None), 0.8, "nothing measured");
        assert_eq!(s.apply(cpu(f64::NAN), None), 0.8, "not a number is not a measurement");
        assert!((s.apply(cpu(-3.0), None) - 0.85).abs() < 1e-12, "clamped to 0: low");
    }

    #[test]
    fn latency_counts_only_when_watched() {
        let s = scaler();
        let slow = Some(Duration::from_millis(500));
        assert_eq!(s.apply(Load::default(), slow), 1.0, "latency not watched by default");
        let watched = AdaptiveConfig::builder().latency_high(Duration::from_millis(20)).build().unwrap();
        let s = AdaptiveScaler::new(watched, 0);
        assert_eq!(s.apply(cpu(0.1), slow), 0.8);
        assert_eq!(s.apply(cpu(0.1), Some(Duration::from_millis(15))), 0.8, "between 10 and 20 ms");
        assert!((s.apply(cpu(0.1), Some(Duration::from_millis(5))) - 0.85).abs() < 1e-12);
    }

    #[test]
    fn effective_limit_is_at_least_one_and_saturates() {
        let config = AdaptiveConfig::builder().floor(0.01).ceiling(2.0).build().unwrap();
        let s = AdaptiveScaler::new(config, 0);
        for _ in 0..30 {
            s.apply(cpu(1.0), None);
        }
        assert_eq!(s.effective_limit(3), 1);
        for _ in 0..60 {
            s.apply(cpu(0.0).with_memory(0.0), None);
        }
        assert_eq!(s.effective_limit(u32::MAX), u32::MAX);
    }
}
