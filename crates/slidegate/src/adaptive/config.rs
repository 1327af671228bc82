//! [`AdaptiveConfig`]: how far and how fast adaptive limits move, and what
//! load counts as too much.

use std::time::Duration;

use crate::Error;

/// High and low watermark of one signal: above `high` the limit goes down,
/// below `low` (for every signal) it may go up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Watermarks<T> {
    pub(crate) high: T,
    pub(crate) low: T,
}

/// The settings of adaptive limits, valid by construction: build one with
/// [`AdaptiveConfig::builder`] (or take the [`Default`]) and hand it to
/// [`LimiterBuilder::adaptive`](crate::LimiterBuilder::adaptive).
///
/// ```
/// use std::time::Duration;
/// use slidegate::adaptive::AdaptiveConfig;
///
/// let config = AdaptiveConfig::builder()
///     .floor(0.25)
///     .ceiling(1.5)
///     .cpu_high(0.9)
///     .latency_high(Duration::from_millis(20))
///     .build()?;
/// assert_eq!(config.floor(), 0.25);
/// assert_eq!(config.latency_watermarks(), Some((Duration::from_millis(20), Duration::from_millis(10))));
///
/// let err = AdaptiveConfig::builder().floor(0.0).build().unwrap_err();
/// assert_eq!(err.kind(), slidegate::ErrorKind::InvalidRule);
/// assert!(err.to_string().contains("floor"));
/// # Ok::<(), slidegate::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveConfig {
    floor: f64,
    ceiling: f64,
    cpu: Option<Watermarks<f64>>,
    memory: Option<Watermarks<f64>>,
    latency: Option<Watermarks<Duration>>,
    decrease: f64,
    increase: f64,
    interval: Duration,
}

impl Default for AdaptiveConfig {
    /// Between half and all of the configured limit; down by ×0.8 when CPU
    /// is above 85 % or memory above 90 %, up by 5 % of the limit when CPU
    /// is below 60 % and memory below 75 %; latency not watched; evaluated
    /// at most once a second.
    fn default() -> Self {
        AdaptiveConfig {
            floor: 0.5,
            ceiling: 1.0,
            cpu: Some(Watermarks { high: 0.85, low: 0.60 }),
            memory: Some(Watermarks { high: 0.90, low: 0.75 }),
            latency: None,
            decrease: 0.8,
            increase: 0.05,
            interval: Duration::from_secs(1),
        }
    }
}

impl AdaptiveConfig {
    /// Starts from the [`Default`] settings.
    pub fn builder() -> AdaptiveConfigBuilder {
        AdaptiveConfigBuilder {
            config: AdaptiveConfig::default(),
            cpu_high: None,
            cpu_low: None,
            memory_high: None,
            memory_low: None,
            latency_low: None,
        }
    }

    /// The lowest factor, as a fraction of the configured limit.
    pub fn floor(&self) -> f64 {
        self.floor
    }

    /// The highest factor, as a fraction of the configured limit.
    pub fn ceiling(&self) -> f64 {
        self.ceiling
    }

    /// The CPU busy fraction's `(high, low)` watermarks, if CPU is watched.
    pub fn cpu_watermarks(&self) -> Option<(f64, f64)> {
        self.cpu.map(|w| (w.high, w.low))
    }

    /// The memory used fraction's `(high, low)` watermarks, if memory is watched.
    pub fn memory_watermarks(&self) -> Option<(f64, f64)> {
        self.memory.map(|w| (w.high, w.low))
    }

    /// The store latency's `(high, low)` watermarks, if latency is watched.
    pub fn latency_watermarks(&self) -> Option<(Duration, Duration)> {
        self.latency.map(|w| (w.high, w.low))
    }

    /// The multiplier applied to the factor under pressure.
    pub fn decrease(&self) -> f64 {
        self.decrease
    }

    /// What is added to the factor when the load is low.
    pub fn increase(&self) -> f64 {
        self.increase
    }

    /// The least time between two evaluations.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub(crate) fn cpu(&self) -> Option<Watermarks<f64>> {
        self.cpu
    }

    pub(crate) fn memory(&self) -> Option<Watermarks<f64>> {
        self.memory
    }

    pub(crate) fn latency(&self) -> Option<Watermarks<Duration>> {
        self.latency
    }
}

/// Builds an [`AdaptiveConfig`]; every value is checked by
/// [`build`](Self::build), so setters can come in any order.
#[derive(Debug, Clone)]
pub struct AdaptiveConfigBuilder {
    config: AdaptiveConfig,
    /// Watermarks set explicitly; unset ones keep their defaults (for
    /// latency: half the high watermark).
    cpu_high: Option<f64>,
    cpu_low: Option<f64>,
    memory_high: Option<f64>,
    memory_low: Option<f64>,
    latency_low: Option<Duration>,
}

impl AdaptiveConfigBuilder {
    /// The lowest the factor goes, as a fraction of the configured limit:
    /// `0 < floor <= 1` (default 0.5).
    pub fn floor(mut self, floor: f64) -> Self {
        self.config.floor = floor;
        self
    }

    /// The highest the factor goes: `ceiling >= 1` (default 1.0, never
    /// above the configured limit). Above 1, a lightly loaded process
    /// admits more than configured.
    pub fn ceiling(mut self, ceiling: f64) -> Self {
        self.config.ceiling = ceiling;
        self
    }

    /// Above this CPU busy fraction the limit goes down (default 0.85).
    pub fn cpu_high(mut self, high: f64) -> Self {
        self.cpu_high = Some(high);
        self
    }

    /// Below this CPU busy fraction the limit may go up (default 0.60).
    pub fn cpu_low(mut self, low: f64) -> Self {
        self.cpu_low = Some(low);
        self
    }

    /// Ignore the CPU signal (then `cpu_high` / `cpu_low` are errors).
    pub fn no_cpu(mut self) -> Self {
        self.config.cpu = None;
        self
    }

    /// Above this memory used fraction the limit goes down (default 0.90).
    pub fn memory_high(mut self, high: f64) -> Self {
        self.memory_high = Some(high);
        self
    }

    /// Below this memory used fraction the limit may go up (default 0.75).
    pub fn memory_low(mut self, low: f64) -> Self {
        self.memory_low = Some(low);
        self
    }

    /// Ignore the memory signal (then `memory_high` / `memory_low` are
    /// errors) — e.g. in a container, where `/proc/meminfo` shows the
    /// host's memory, not the container's limit.
    pub fn no_memory(mut self) -> Self {
        self.config.memory = None;
        self
    }

    /// Watch the store's latency (not watched by default): above `high`
    /// (e.g. 20 ms) the limit goes down. Only remote stores are timed.
    pub fn latency_high(mut self, high: Duration) -> Self {
        self.config.latency = Some(Watermarks { high, low: high / 2 });
        self
    }

    /// Below this store latency the limit may go up (default: half of
    /// [`latency_high`](Self::latency_high), which must be set too).
    pub fn latency_low(mut self, low: Duration) -> Self {
        self.latency_low = Some(low);
        self
    }

    /// The multiplier applied under pressure: `0 < decrease < 1` (default 0.8).
    pub fn decrease(mut self, decrease: f64) -> Self {
        self.config.decrease = decrease;
        self
    }

    /// Added to the factor per evaluation when the load is low, as a
    /// fraction of the configured limit: `0 < increase <= 1` (default 0.05).
    pub fn increase(mut self, increase: f64) -> Self {
        self.config.increase = increase;
        self
    }

    /// The least time between two evaluations, at least 1 ms (default 1 s).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.config.interval = interval;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`InvalidRule`](crate::ErrorKind::InvalidRule), naming the setting,
    /// when a value is out of range (see each setter), not finite, or a
    /// low watermark is not below its high one, or a watermark is set for a
    /// signal that is not watched (`latency_low` without `latency_high`,
    /// `cpu_*` after `no_cpu`, `memory_*` after `no_memory`).
    pub fn build(self) -> Result<AdaptiveConfig, Error> {
        let mut config = self.config;
        if !(config.floor > 0.0 && config.floor <= 1.0) {
            return Err(invalid(format!("floor must be in (0, 1], got {}", config.floor)));
        }
        if !(config.ceiling >= 1.0 && config.ceiling.is_finite()) {
            return Err(invalid(format!("ceiling must be at least 1 and finite, got {}", config.ceiling)));
        }
        if !(config.decrease > 0.0 && config.decrease < 1.0) {
            return Err(invalid(format!("decrease must be in (0, 1), got {}", config.decrease)));
        }
        if !(config.increase > 0.0 && config.increase <= 1.0) {
            return Err(invalid(format!("increase must be in (0, 1], got {}", config.increase)));
        }
        if config.interval < Duration::from_millis(1) {
            return Err(invalid(format!("interval must be at least 1ms, got {:?}", config.interval)));
        }
        config.cpu = fractions("cpu", config.cpu, self.cpu_high, self.cpu_low)?;
        config.memory = fractions("memory", config.memory, self.memory_high, self.memory_low)?;
        match (config.latency, self.latency_low) {
            (None, Some(low)) => {
                return Err(invalid(format!("latency_low ({low:?}) needs latency_high to be set")));
            }
            (Some(mut w), low) => {
                w.low = low.unwrap_or(w.low);
                if w.high.is_zero() {
                    return Err(invalid("latency_high must be above zero"));
                }
                if w.low >= w.high {
                    return Err(invalid(format!(
                        "latency_low ({:?}) must be below latency_high ({:?})",
                        w.low, w.high
                    )));
                }
                config.latency = Some(w);
            }
            (None, None) => {}
        }
        Ok(config)
    }
}

/// The checked watermarks of a fraction signal (CPU, memory): the
/// defaults overridden by the explicit settings.
fn fractions(
    what: &str,
    current: Option<Watermarks<f64>>,
    high: Option<f64>,
    low: Option<f64>,
) -> Result<Option<Watermarks<f64>>, Error> {
    let Some(mut w) = current else {
        if high.is_some() || low.is_some() {
            return Err(invalid(format!("{what} watermarks are set but no_{what}() ignores that signal")));
        }
        return Ok(None);
    };
    w.high = high.unwrap_or(w.high);
    w.low = low.unwrap_or(w.low);
    if !(w.high > 0.0 && w.high <= 1.0) {
        return Err(invalid(format!("{what}_high must be in (0, 1], got {}", w.high)));
    }
    if !(w.low >= 0.0 && w.low < w.high) {
        return Err(invalid(format!(
            "{what}_low must be in [0, {what}_high), got {} (high {})",
            w.low, w.high
        )));
    }
    Ok(Some(w))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid_rule(format!("adaptive limits: {}", message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn defaults_are_the_documented_ones() {
        let d = AdaptiveConfig::builder().build().unwrap();
        assert_eq!(d, AdaptiveConfig::default());
        assert_eq!((d.floor(), d.ceiling()), (0.5, 1.0));
        assert_eq!(d.cpu_watermarks(), Some((0.85, 0.60)));
        assert_eq!(d.memory_watermarks(), Some((0.90, 0.75)));
        assert_eq!(d.latency_watermarks(), None);
        assert_eq!((d.decrease(), d.increase()), (0.8, 0.05));
        assert_eq!(d.interval(), Duration::from_secs(1));
    }

    #[test]
    fn setters_apply_in_any_order() {
        let c = AdaptiveConfig::builder()
            .cpu_low(0.9)
            .cpu_high(0.95)
            .latency_low(Duration::from_millis(5))
            .latency_high(Duration::from_millis(20))
            .no_memory()
            .build()
            .unwrap();
        assert_eq!(c.cpu_watermarks(), Some((0.95, 0.9)));
        assert_eq!(c.latency_watermarks(), Some((Duration::from_millis(20), Duration::from_millis(5))));
        assert_eq!(c.memory_watermarks(), None);
    }

    #[test]
    fn invalid_values_name_the_setting() {
        let b = AdaptiveConfig::builder;
        let cases = [
            (b().floor(0.0), "floor"),
            (b().floor(1.5), "floor"),
            (b().floor(f64::NAN), "floor"),
            (b().ceiling(0.9), "ceiling"),
            (b().ceiling(f64::INFINITY), "ceiling"),
            (b().decrease(1.0), "decrease"),
            (b().decrease(0.0), "decrease"),
            (b().increase(0.0), "increase"),
            (b().increase(2.0), "increase"),
            (b().interval(Duration::from_micros(10)), "interval"),
            (b().cpu_high(1.2), "cpu_high"),
            (b().cpu_low(0.9), "cpu_low"),
            (b().memory_low(-0.1), "memory_low"),
            (b().memory_high(0.5), "memory_low"),
            (b().latency_high(Duration::ZERO), "latency_high"),
            (b().latency_low(Duration::from_millis(5)), "needs latency_high"),
            (b().cpu_high(0.9).no_cpu(), "no_cpu()"),
            (
                b().latency_high(Duration::from_millis(10)).latency_low(Duration::from_millis(10)),
                "latency_low",
            ),
        ];
        for (builder, needle) in cases {
            let err = builder.build().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidRule);
            assert!(err.to_string().contains(needle), "{err} should name {needle}");
            assert!(err.to_string().contains("adaptive limits"), "{err}");
        }
    }
}
