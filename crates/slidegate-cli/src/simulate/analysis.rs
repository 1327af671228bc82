//! Runs a trace through the real memory store under one algorithm and
//! measures what was admitted against the *true* sliding window.

use anyhow::Context;
use slidegate::store::Request;
use slidegate::{Algorithm, ManualClock, MemoryStore, Rule};

use super::traffic::Trace;

/// What one algorithm did with one trace.
#[derive(Debug, Clone)]
pub struct AlgorithmRun {
    /// The algorithm (with its bucket count, for the sliding counter).
    pub algorithm: Algorithm,
    /// Requests offered.
    pub requests: u64,
    /// Requests admitted.
    pub admitted: u64,
    /// The most requests admitted for one key in any true window
    /// `(t - W, t]`, over all keys and times.
    pub max_in_window: u64,
    /// Admission times of key 0 (the busiest), for plotting.
    pub busiest_key_admitted: Vec<u64>,
}

/// Runs `trace` through a fresh [`MemoryStore`] deciding with `rule`, with a
/// [`ManualClock`] set to each request's time.
///
/// # Errors
///
/// Only if the store fails, which the memory store does not for valid
/// rules and keys.
pub async fn run_algorithm(trace: &Trace, rule: &Rule) -> anyhow::Result<AlgorithmRun> {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let names: Vec<String> = (0..trace.keys).map(|k| format!("key-{k}")).collect();
    let mut admitted_per_key: Vec<Vec<u64>> = vec![Vec::new(); names.len()];
    for request in &trace.requests {
        let key = request.key as usize;
        clock.set(request.at_ms);
        let decision = store
            .check_sync(&Request::new(rule, &names[key], 1)?)
            .with_context(|| format!("{} failed at {} ms", rule.algorithm(), request.at_ms))?;
        if decision.allowed {
            admitted_per_key[key].push(request.at_ms);
        }
    }
    let window = rule.window_ms();
    let max_in_window =
        admitted_per_key.iter().map(|times| max_in_true_window(times, window)).max().unwrap_or(0);
    Ok(AlgorithmRun {
        algorithm: rule.algorithm(),
        requests: trace.requests.len() as u64,
        admitted: admitted_per_key.iter().map(|times| times.len() as u64).sum(),
        max_in_window,
        busiest_key_admitted: admitted_per_key.into_iter().next().unwrap_or_default(),
    })
}

/// Runs `trace` under every rule in `rules`, in order.
///
/// # Errors
///
/// As [`run_algorithm`].
pub async fn compare(trace: &Trace, rules: &[Rule]) -> anyhow::Result<Vec<AlgorithmRun>> {
    let mut runs = Vec::with_capacity(rules.len());
    for rule in rules {
        runs.push(run_algorithm(trace, rule).await?);
    }
    Ok(runs)
}

/// The most entries of `sorted` (admission times, ascending) that fall in
/// one window `(t - window_ms, t]`.
///
/// The busiest window always ends at an admission, so checking the window
/// ending at each entry suffices; entries at the same millisecond all count
/// for the last of them.
pub fn max_in_true_window(sorted: &[u64], window_ms: u64) -> u64 {
    let mut oldest = 0;
    let mut best = 0;
    for (newest, &t) in sorted.iter().enumerate() {
        while sorted[oldest].saturating_add(window_ms) <= t {
            oldest += 1;
        }
        best = best.max(newest - oldest + 1);
    }
    best as u64
}

/// How many of `sorted` (admission times, ascending) lie in the trailing
/// window at each moment it changes: `(time, count)` after every change,
/// ascending in time. Each admission at `t` counts from `t` until
/// `t + window_ms`.
pub fn trailing_window_counts(sorted: &[u64], window_ms: u64) -> Vec<(u64, u64)> {
    let mut steps: Vec<(u64, u64)> = Vec::with_capacity(sorted.len() * 2);
    let (mut enter, mut leave) = (0, 0);
    while leave < sorted.len() {
        let next_enter = sorted.get(enter).copied().unwrap_or(u64::MAX);
        let next_leave = sorted[leave].saturating_add(window_ms);
        let at = next_enter.min(next_leave);
        while leave < sorted.len() && sorted[leave].saturating_add(window_ms) == at {
            leave += 1;
        }
        while enter < sorted.len() && sorted[enter] == at {
            enter += 1;
        }
        steps.push((at, (enter - leave) as u64));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::simulate::traffic::{Pattern, Request};

    #[test]
    fn true_window_is_half_open() {
        assert_eq!(max_in_true_window(&[], 10), 0);
        assert_eq!(max_in_true_window(&[0, 9, 10, 19], 10), 2);
        assert_eq!(max_in_true_window(&[0, 5, 5, 5, 14], 10), 4);
        assert_eq!(max_in_true_window(&[0, 1, 2, 100, 100], 10), 3);
    }

    #[test]
    fn trailing_counts_step_up_and_down() {
        let steps = trailing_window_counts(&[0, 5, 5, 12], 10);
        assert_eq!(steps, vec![(0, 1), (5, 3), (10, 2), (12, 3), (15, 1), (22, 0)]);
        assert!(trailing_window_counts(&[], 10).is_empty());
    }

    #[tokio::test]
    async fn fixed_window_doubles_across_a_boundary_and_the_log_does_not() {
        let mut requests: Vec<Request> = (0..4).map(|i| Request { at_ms: 96 + i, key: 0 }).collect();
        requests.extend((0..4).map(|i| Request { at_ms: 100 + i, key: 0 }));
        let trace = Trace { pattern: Pattern::Boundary, keys: 1, requests, description: String::new() };
        let rule = Rule::new(4, Duration::from_millis(100)).unwrap();
        let log = run_algorithm(&trace, &rule).await.unwrap();
        assert_eq!((log.admitted, log.max_in_window), (4, 4));
        let fixed = rule.with_algorithm(Algorithm::FixedWindow).unwrap();
        let fixed = run_algorithm(&trace, &fixed).await.unwrap();
        assert_eq!((fixed.admitted, fixed.max_in_window), (8, 8));
        assert_eq!(fixed.busiest_key_admitted.len(), 8);
    }
}
