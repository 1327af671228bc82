//! A rule's limit changing within a window — a named rule edited, or
//! adaptive limits scaling it — up and down, across 128 (where the Redis
//! log changes layout). Every decision must count every charge still in the
//! window against the limit in force at that moment: no store may forget a
//! charge because the limit moved.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use slidegate::adaptive::{AdaptiveConfig, Load, Signals};
use slidegate::algorithm::State;
use slidegate::{Algorithm, Clock, Limiter, ManualClock, Rule, State as DecisionState, Store};

use super::helpers::{algorithms, ok, rule};

/// Limits on both sides of 128, and 128 itself.
const LIMITS: [u32; 8] = [100, 120, 127, 128, 129, 150, 200, 256];

fn named(limit: u32, window_ms: u64, algorithm: Algorithm) -> Rule {
    rule(limit, window_ms, algorithm).named("moving").unwrap_or_else(|e| panic!("rule: {e}"))
}

/// Charges admitted so far, to check the log's invariant directly.
#[derive(Default)]
struct Ledger(Vec<(u64, u32)>);

impl Ledger {
    /// Cost admitted in `(now - window, now]` (and later: a clock that
    /// stepped back still counts them).
    fn in_window(&self, now: u64, window: u64) -> u64 {
        self.0.iter().filter(|&&(t, _)| t + window > now).map(|&(_, c)| u64::from(c)).sum()
    }
}

/// The adversarial review's cases, then a long random walk of limits: the
/// store decides as the pure model does at every step, and the sliding
/// log admits exactly when the charges in the window plus the cost fit the
/// limit of that moment.
pub async fn limit_changes_keep_every_charge<S: Store>(store: &S, clock: &ManualClock) {
    let window = 60_000;
    for algorithm in algorithms(10) {
        for (i, &(first, low)) in [(150, 120), (200, 100), (129, 128), (100, 200)].iter().enumerate() {
            let key = format!("dance-{}-{i}", algorithm.short_name());
            let mut model = State::new(&named(first, window, algorithm));
            let start = clock.now_ms();
            for (at, limit, attempts) in
                [(0, first, first), (1000, low, 1), (2000, first, first), (3000, low, 2)]
            {
                clock.set(start + at);
                let rule = named(limit, window, algorithm);
                for n in 0..attempts {
                    let got = ok(store, &rule, &key, 1).await;
                    let want = model.check(&rule, clock.now_ms(), 1);
                    assert_eq!(got, want, "{rule}: {first} → {low} → {first}, at +{at} ms, attempt {n}");
                }
            }
            clock.set(start + 2 * window);
        }
    }
    for algorithm in algorithms(10) {
        random_walk(store, clock, algorithm, window).await;
    }
}

async fn random_walk<S: Store>(store: &S, clock: &ManualClock, algorithm: Algorithm, window: u64) {
    let key = format!("walk-{}", algorithm.short_name());
    let mut model = State::new(&named(LIMITS[0], window, algorithm));
    let mut ledger = Ledger::default();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d ^ u64::from(algorithm.short_name().len() as u32);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut limit = LIMITS[0];
    for i in 0..400 {
        let r = next();
        if r % 8 == 0 {
            limit = LIMITS[((r >> 8) % LIMITS.len() as u64) as usize];
        }
        let cost = 1 + ((r >> 16) % 4) as u32;
        clock.advance(Duration::from_millis((r >> 24) % (window / 40)));
        let now = clock.now_ms();
        let rule = named(limit, window, algorithm);
        let got = ok(store, &rule, &key, cost).await;
        let want = model.check(&rule, now, cost);
        assert_eq!(got, want, "{rule}: step {i} (cost {cost}, t {now})");
        if algorithm == Algorithm::SlidingLog {
            let used = ledger.in_window(now, window);
            let fits = used + u64::from(cost) <= u64::from(limit);
            assert_eq!(got.allowed, fits, "{rule}: step {i}: {used} in the window, cost {cost}");
            if got.allowed {
                ledger.0.push((now, cost));
            }
        }
    }
    clock.advance(Duration::from_millis(2 * window));
}

/// A load source the test moves by hand.
#[derive(Debug, Clone, Default)]
struct Scripted(Arc<Mutex<Load>>);

impl Signals for Scripted {
    fn sample(&self) -> Load {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Adaptive limits halve a 150-per-minute log (75: across 128) and bring
/// it back within the window: the charges made at 150 still count at 75
/// and again at 150, decision by decision as the model decides at the
/// enforced limit. `store` is used up (a limiter owns its store).
pub async fn adaptive_scaling_keeps_every_charge<S: Store>(store: S, clock: &ManualClock) {
    let window = 60_000;
    let load = Scripted::default();
    let config = AdaptiveConfig::builder()
        .floor(0.5)
        .decrease(0.5)
        .increase(0.5)
        .interval(Duration::from_secs(1))
        .no_memory()
        .build()
        .unwrap_or_else(|e| panic!("adaptive config: {e}"));
    let limiter = Limiter::builder(store)
        .clock(clock.clone())
        .deadline(Duration::from_secs(10))
        .no_deny_cache()
        .adaptive(config)
        .adaptive_signals(load.clone())
        .build();
    let rule = rule(150, window, Algorithm::SlidingLog);
    let mut model = State::new(&rule);
    let set_cpu =
        |cpu: f64| *load.0.lock().unwrap_or_else(|p| p.into_inner()) = Load::default().with_cpu(cpu);
    // (ms after the start, CPU load, attempts): the factor moves once per
    // second, halved above 85 % and back up below 60 %; the first charges
    // leave the window at +60 s.
    let phases = [
        (0, 0.5, 100),
        (1000, 0.99, 30),
        (2000, 0.5, 60),
        (30_000, 0.99, 30),
        (61_000, 0.5, 100),
        (62_500, 0.99, 80),
        (64_000, 0.1, 100),
    ];
    let start = clock.now_ms();
    let mut limits = Vec::new();
    for (at, cpu, attempts) in phases {
        set_cpu(cpu);
        clock.set(start + at);
        for n in 0..attempts {
            let got = limiter.check(&rule, "scaled").await.unwrap_or_else(|e| panic!("check: {e}"));
            assert_ne!(got.state, DecisionState::Degraded, "the store answered");
            let enforced = Rule::new(got.limit, Duration::from_millis(window))
                .unwrap_or_else(|e| panic!("enforced rule: {e}"));
            let want = model.check(&enforced, clock.now_ms(), 1);
            assert_eq!(got, want, "at +{at} ms (limit {}), attempt {n}", got.limit);
            limits.push(got.limit);
        }
    }
    assert!(limits.contains(&75) && limits.contains(&150), "the limit crossed 128 both ways: {limits:?}");
    clock.set(start + 2 * window);
}
