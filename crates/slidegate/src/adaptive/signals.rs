//! What the adaptive limits read: a [`Signals`] source and its [`Load`].

use std::fmt;
use std::sync::Arc;

#[cfg(doc)]
use super::SystemSignals;

/// What a [`Signals`] source saw: the local load, each part `None` when it
/// could not be measured (an absent signal neither lowers nor raises the
/// limit).
///
/// Fields outside `0.0..=1.0` are clamped and non-finite ones ignored by the
/// scaler.
///
/// ```
/// use slidegate::adaptive::Load;
///
/// let load = Load::default().with_cpu(0.42);
/// assert_eq!(load.cpu, Some(0.42));
/// assert_eq!(load.memory, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Load {
    /// Fraction of the machine's CPU time spent busy since the previous
    /// sample, `0.0` idle to `1.0` saturated.
    pub cpu: Option<f64>,
    /// Fraction of memory in use, `0.0` to `1.0`.
    pub memory: Option<f64>,
}

impl Load {
    /// The same load with `cpu` as the CPU busy fraction.
    #[must_use]
    pub fn with_cpu(mut self, cpu: f64) -> Load {
        self.cpu = Some(cpu);
        self
    }

    /// The same load with `memory` as the memory used fraction.
    #[must_use]
    pub fn with_memory(mut self, memory: f64) -> Load {
        self.memory = Some(memory);
        self
    }
}

/// A source of local load for adaptive limits.
///
/// The limiter calls [`sample`](Self::sample) once per evaluation interval,
/// from inside a check, so it should answer quickly (reading a few small
/// files is fine) and never panic. [`SystemSignals`] is the default; inject
/// your own (e.g. a scripted one in tests, or your service's own
/// saturation measure) with
/// [`LimiterBuilder::adaptive_signals`](crate::LimiterBuilder::adaptive_signals).
pub trait Signals: Send + Sync + fmt::Debug + 'static {
    /// The load now. A source that keeps state between samples (such as
    /// the CPU busy fraction, a difference of two readings) reports the
    /// time since its previous sample.
    fn sample(&self) -> Load;
}

impl<S: Signals + ?Sized> Signals for Arc<S> {
    fn sample(&self) -> Load {
        (**self).sample()
    }
}
