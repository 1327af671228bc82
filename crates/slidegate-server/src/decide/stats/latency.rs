//! Store latency percentiles over the last minute or two: log-scale
//! buckets of atomics in two generations, the older dropped every minute.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets: bucket `b` holds latencies below `2^(b/2)` µs (√2 steps),
/// up to about 4 s; the last holds the rest.
const BUCKETS: usize = 44;

/// Seconds a generation lasts.
const GENERATION_S: u64 = 60;

#[derive(Debug)]
struct Generation {
    /// The minute (`now_s / 60`) it counts.
    minute: AtomicU64,
    counts: [AtomicU64; BUCKETS],
}

impl Generation {
    fn new() -> Generation {
        Generation { minute: AtomicU64::new(u64::MAX), counts: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

/// Latencies of the last one to two minutes.
#[derive(Debug)]
pub(crate) struct Latency {
    generations: [Generation; 2],
}

impl Default for Latency {
    fn default() -> Latency {
        Latency { generations: [Generation::new(), Generation::new()] }
    }
}

fn bucket(micros: u64) -> usize {
    // 2 × log2, rounded up: √2 steps.
    let squared = micros.saturating_mul(micros).max(1);
    let b = 64 - (squared - 1).leading_zeros() as usize;
    b.min(BUCKETS - 1)
}

/// The upper bound of bucket `b`, in µs.
fn bound(b: usize) -> f64 {
    2f64.powf(b as f64 / 2.0)
}

impl Latency {
    /// Counts one store call of `micros` µs at second `now_s`.
    pub(crate) fn record(&self, now_s: u64, micros: u64) {
        let minute = now_s / GENERATION_S;
        let generation = &self.generations[usize::try_from(minute % 2).unwrap_or(0)];
        let held = generation.minute.load(Ordering::Relaxed);
        if held != minute
            && generation.minute.compare_exchange(held, minute, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            for count in &generation.counts {
                count.store(0, Ordering::Relaxed);
            }
        }
        generation.counts[bucket(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// The `q` quantiles (0..=1) in µs at second `now_s`, from this minute
    /// and the one before; `None` without calls.
    pub(crate) fn quantiles(&self, now_s: u64, qs: &[f64]) -> Option<Vec<f64>> {
        let minute = now_s / GENERATION_S;
        let mut counts = [0u64; BUCKETS];
        for generation in &self.generations {
            let held = generation.minute.load(Ordering::Relaxed);
            if held == minute || held.checked_add(1) == Some(minute) {
                for (sum, count) in counts.iter_mut().zip(&generation.counts) {
                    *sum += count.load(Ordering::Relaxed);
                }
            }
        }
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let quantile = |q: f64| {
            let rank = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0);
            let mut seen = 0u64;
            for (b, &count) in counts.iter().enumerate() {
                seen += count;
                if seen as f64 >= rank {
                    return bound(b);
                }
            }
            bound(BUCKETS - 1)
        };
        Some(qs.iter().map(|&q| quantile(q)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_a_bucket() {
        let latency = Latency::default();
        assert_eq!(latency.quantiles(600, &[0.5]), None);
        for _ in 0..98 {
            latency.record(600, 100);
        }
        latency.record(600, 5_000);
        latency.record(600, 5_000);
        let q = latency.quantiles(630, &[0.5, 0.99]).expect("calls");
        assert!((100.0..=142.0).contains(&q[0]), "{q:?}");
        assert!((5_000.0..=7_100.0).contains(&q[1]), "{q:?}");
        // Two minutes later they are gone.
        assert_eq!(latency.quantiles(720, &[0.5]), None);
    }
}
