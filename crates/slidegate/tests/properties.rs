//! Property tests of the pure algorithms on random traces.

use std::num::NonZeroU16;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use slidegate::algorithm::State;
use slidegate::store::Request;
use slidegate::{Algorithm, Rule};

/// One request: time step since the previous one (ms) and cost.
type Trace = Vec<(u64, u32)>;

fn rule(limit: u32, window_ms: u64, algorithm: Algorithm) -> Rule {
    Rule::new(limit, Duration::from_millis(window_ms))
        .and_then(|r| r.with_algorithm(algorithm))
        .expect("valid rule")
}

fn any_algorithm() -> impl Strategy<Value = Algorithm> {
    prop_oneof![
        Just(Algorithm::SlidingLog),
        (1u16..=12).prop_map(|b| Algorithm::SlidingCounter { buckets: NonZeroU16::new(b).expect("b >= 1") }),
        Just(Algorithm::FixedWindow),
        Just(Algorithm::Gcra),
    ]
}

/// A rule with a small limit and window, and a trace dense enough to hit it.
fn rule_and_trace() -> impl Strategy<Value = (u32, u64, Trace)> {
    (1u32..=8, 12u64..=400).prop_flat_map(|(limit, window)| {
        let step = 0..=window / 3;
        let trace = prop::collection::vec((step, 1..=limit), 1..120);
        (Just(limit), Just(window), trace)
    })
}

/// Admitted `(time, cost)` pairs of a run.
fn run(rule: &Rule, trace: &Trace, start: u64) -> Vec<(u64, u32)> {
    let mut state = State::new(rule);
    let mut now = start;
    let mut admitted = Vec::new();
    for &(step, cost) in trace {
        now += step;
        if state.check(rule, now, cost).allowed {
            admitted.push((now, cost));
        }
    }
    admitted
}

/// The most cost admitted in any true window `(t - W, t]`.
fn max_in_any_window(admitted: &[(u64, u32)], window: u64) -> u64 {
    admitted
        .iter()
        .map(|&(t, _)| {
            admitted.iter().filter(|&&(u, _)| u <= t && u + window > t).map(|&(_, c)| u64::from(c)).sum()
        })
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        // Run from the package root by cargo; checked in.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/regressions/properties.txt"))),
        ..ProptestConfig::default()
    })]

    /// The log never admits more than N in any true window, and it admits
    /// exactly when the window has room (checked by brute force).
    #[test]
    fn sliding_log_is_exact((limit, window, trace) in rule_and_trace(), start in 0u64..1_000_000_000_000) {
        let rule = rule(limit, window, Algorithm::SlidingLog);
        let mut state = State::new(&rule);
        let mut now = start;
        let mut admitted: Vec<(u64, u32)> = Vec::new();
        for &(step, cost) in &trace {
            now += step;
            let in_window: u64 = admitted.iter().filter(|&&(t, _)| t + window > now).map(|&(_, c)| u64::from(c)).sum();
            let should = in_window + u64::from(cost) <= u64::from(limit);
            let decision = state.check(&rule, now, cost);
            prop_assert_eq!(decision.allowed, should, "at {} cost {}", now, cost);
            if decision.allowed {
                admitted.push((now, cost));
                prop_assert_eq!(u64::from(decision.remaining), u64::from(limit) - in_window - u64::from(cost));
            }
        }
        prop_assert!(max_in_any_window(&admitted, window) <= u64::from(limit));
    }

    /// The sliding counter never admits more than N in any true window.
    #[test]
    fn sliding_counter_never_over_admits(
        (limit, window, trace) in rule_and_trace(),
        buckets in 1u16..=12,
        start in 0u64..1_000_000_000_000,
    ) {
        let Ok(rule) = rule(limit, window, Algorithm::SlidingLog)
            .with_algorithm(Algorithm::SlidingCounter { buckets: NonZeroU16::new(buckets).expect("nonzero") })
        else {
            return Ok(());
        };
        let admitted = run(&rule, &trace, start);
        prop_assert!(max_in_any_window(&admitted, window) <= u64::from(limit));
    }

    /// `retry_after` is exact for every algorithm: the same request is
    /// denied 1 ms earlier and admitted at it, if nothing else arrives.
    #[test]
    fn retry_after_is_exact(algorithm in any_algorithm(), (limit, window, trace) in rule_and_trace(), start in 0u64..1_000_000_000_000) {
        let Ok(rule) = rule(limit, window, Algorithm::SlidingLog).with_algorithm(algorithm) else {
            return Ok(());
        };
        let mut state = State::new(&rule);
        let mut now = start;
        for &(step, cost) in &trace {
            now += step;
            let before = state.clone();
            let decision = state.check(&rule, now, cost);
            if decision.allowed {
                prop_assert_eq!(decision.retry_after, Duration::ZERO);
                continue;
            }
            let retry = decision.retry_after.as_millis() as u64;
            prop_assert!(retry > 0);
            prop_assert!(!before.clone().check(&rule, now + retry - 1, cost).allowed, "{}: 1ms early", rule);
            prop_assert!(before.clone().check(&rule, now + retry, cost).allowed, "{}: at retry_after", rule);
            // Denied requests charge nothing: the state answers as before.
            prop_assert_eq!(state.clone().check(&rule, now, 1), before.clone().check(&rule, now, 1));
        }
    }

    /// After `reset_after`, the whole limit is available in one request.
    #[test]
    fn reset_after_frees_everything(algorithm in any_algorithm(), (limit, window, trace) in rule_and_trace()) {
        let Ok(rule) = rule(limit, window, Algorithm::SlidingLog).with_algorithm(algorithm) else {
            return Ok(());
        };
        let mut state = State::new(&rule);
        let mut now = 1_000_000;
        for &(step, cost) in &trace {
            now += step;
            let decision = state.check(&rule, now, cost);
            let reset = decision.reset_after.as_millis() as u64;
            prop_assert!(state.clone().check(&rule, now + reset, limit).allowed, "{}: full at reset_after", rule);
        }
    }

    /// The memory store (sharded map, key encoding, one-step decisions,
    /// penalty-free fast path) agrees with the pure model decision by
    /// decision, over several keys and with the clock stepping back.
    #[test]
    fn the_memory_store_matches_the_model(
        algorithm in any_algorithm(),
        (limit, window, trace) in rule_and_trace(),
        keys in prop::collection::vec(0usize..3, 120),
        back in prop::collection::vec(prop::bool::weighted(0.1), 120),
    ) {
        let Ok(rule) = rule(limit, window, Algorithm::SlidingLog).with_algorithm(algorithm) else {
            return Ok(());
        };
        let clock = slidegate::ManualClock::new(1_000_000);
        let store = slidegate::MemoryStore::builder().clock(clock.clone()).build();
        let mut models = [State::new(&rule), State::new(&rule), State::new(&rule)];
        let mut now: u64 = 1_000_000;
        for (i, &(step, cost)) in trace.iter().enumerate() {
            now = if back[i] { now.saturating_sub(step) } else { now + step };
            clock.set(now);
            let key = keys[i];
            let got = store.check_sync(&Request::new(&rule, &format!("k{key}"), cost).expect("valid request")).expect("valid request");
            let want = models[key].check(&rule, now, cost);
            prop_assert_eq!(got, want, "{}: request {} (key {}, cost {}, t {})", rule, i, key, cost, now);
        }
    }

    /// A named sliding log whose limit moves from request to request (an
    /// edited rule, adaptive limits; across 128, where the Redis log
    /// changes layout), on the memory store: a decision admits exactly when
    /// every charge still in the window plus the cost fits the limit in
    /// force at that moment.
    #[test]
    fn the_log_stays_exact_while_its_limit_moves(
        window in 50u64..=2000,
        trace in prop::collection::vec((0u64..=60, prop::sample::select(vec![1u32, 3, 100, 127, 128, 129, 150, 200]), 1u32..=4), 1..200),
    ) {
        let clock = slidegate::ManualClock::new(1_000_000);
        let store = slidegate::MemoryStore::builder().clock(clock.clone()).build();
        let mut now: u64 = 1_000_000;
        let mut admitted: Vec<(u64, u32)> = Vec::new();
        for (i, &(step, limit, cost)) in trace.iter().enumerate() {
            now += step;
            clock.set(now);
            let rule = rule(limit, window, Algorithm::SlidingLog).named("moving").expect("name");
            let cost = cost.min(limit);
            let in_window: u64 = admitted.iter().filter(|&&(t, _)| t + window > now).map(|&(_, c)| u64::from(c)).sum();
            let decision = store.check_sync(&Request::new(&rule, "k", cost).expect("valid request")).expect("valid request");
            prop_assert_eq!(decision.allowed, in_window + u64::from(cost) <= u64::from(limit), "request {} (limit {}, cost {}, {} in the window)", i, limit, cost, in_window);
            if decision.allowed {
                admitted.push((now, cost));
            }
        }
    }
}
