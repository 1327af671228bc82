//! Adaptive limits, deterministic: a scripted load source stands in for
//! `/proc`, time is a `ManualClock` (evaluation intervals, windows) and
//! paused Tokio time (store latency).

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slidegate::adaptive::{AdaptiveConfig, Load, Signals, SystemSignals};
use slidegate::store::{Dimensions, Request};
use slidegate::{
    Decision, Error, ErrorKind, Limiter, ManualClock, MemoryStore, MultiDecision, Rule, Source, State, Store,
};

const INTERVAL: Duration = Duration::from_secs(1);

/// A load source set by hand, counting how often it is sampled.
#[derive(Debug, Clone, Default)]
struct Scripted {
    load: Arc<Mutex<Load>>,
    samples: Arc<AtomicU64>,
}

impl Scripted {
    fn set(&self, load: Load) {
        *self.load.lock().unwrap() = load;
    }

    fn samples(&self) -> u64 {
        self.samples.load(Ordering::SeqCst)
    }
}

impl Signals for Scripted {
    fn sample(&self) -> Load {
        self.samples.fetch_add(1, Ordering::SeqCst);
        *self.load.lock().unwrap()
    }
}

fn hot() -> Load {
    Load::default().with_cpu(0.95).with_memory(0.5)
}

fn cool() -> Load {
    Load::default().with_cpu(0.1).with_memory(0.5)
}

fn per_minute(limit: u32) -> Rule {
    Rule::per_minute(NonZeroU32::new(limit).unwrap())
}

struct Setup<S> {
    limiter: Limiter<S>,
    signals: Scripted,
    clock: ManualClock,
}

fn memory(config: AdaptiveConfig) -> (Setup<MemoryStore>, MemoryStore) {
    let clock = ManualClock::new(1_000_000);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let signals = Scripted::default();
    let limiter = Limiter::builder(store.clone())
        .clock(clock.clone())
        .adaptive(config)
        .adaptive_signals(signals.clone())
        .build();
    (Setup { limiter, signals, clock }, store)
}

impl<S: Store> Setup<S> {
    /// The effective limit of `rule` one interval from now (a fresh key
    /// each time, so nothing else is in the way).
    async fn limit_next_interval(&self, rule: &Rule) -> u32 {
        self.clock.advance(INTERVAL);
        let key = format!("probe-{}", self.signals.samples());
        self.limiter.check(rule, &key).await.unwrap().limit
    }

    /// Admits requests for `key` until one is denied; returns how many passed.
    async fn admitted(&self, rule: &Rule, key: &str) -> u32 {
        let mut n = 0;
        while self.limiter.check(rule, key).await.unwrap().allowed {
            n += 1;
            assert!(n <= rule.limit(), "admitted more than the configured limit");
        }
        n
    }
}

#[tokio::test]
async fn overload_lowers_the_limit_step_by_step_to_the_floor_and_no_further() {
    let (s, _) = memory(AdaptiveConfig::default());
    let rule = per_minute(100);
    assert_eq!(s.limiter.adaptive_factor(), Some(1.0));
    s.signals.set(hot());
    let mut limits = Vec::new();
    for _ in 0..6 {
        limits.push(s.limit_next_interval(&rule).await);
    }
    assert_eq!(limits, [80, 64, 51, 50, 50, 50], "×0.8 per interval, floor 0.5");
    assert_eq!(s.limiter.adaptive_factor(), Some(0.5));
}

#[tokio::test]
async fn recovery_raises_the_limit_back_to_the_ceiling() {
    for (ceiling, top) in [(1.0, 100), (1.2, 120)] {
        let config = AdaptiveConfig::builder().decrease(0.5).ceiling(ceiling).build().unwrap();
        let (s, _) = memory(config);
        let rule = per_minute(100);
        s.signals.set(hot());
        assert_eq!(s.limit_next_interval(&rule).await, 50);
        s.signals.set(cool());
        let mut limits = Vec::new();
        for _ in 0..20 {
            limits.push(s.limit_next_interval(&rule).await);
        }
        assert!(limits.windows(2).all(|w| w[0] <= w[1]), "never down while cool: {limits:?}");
        assert_eq!(&limits[..3], [55, 60, 65], "+5% of the limit per interval");
        assert_eq!(limits.last(), Some(&top), "{limits:?}");
        assert_eq!(limits.iter().filter(|&&l| l > top).count(), 0, "never above the ceiling");
        assert_eq!(s.limiter.adaptive_factor(), Some(ceiling));
    }
}

#[tokio::test]
async fn the_factor_moves_at_most_once_per_interval() {
    let (s, _) = memory(AdaptiveConfig::default());
    let rule = per_minute(100);
    s.signals.set(hot());
    // Within the first interval nothing is sampled or changed.
    s.clock.advance(INTERVAL - Duration::from_millis(1));
    assert_eq!(s.limiter.check(&rule, "a").await.unwrap().limit, 100);
    assert_eq!(s.signals.samples(), 0);
    s.clock.advance(Duration::from_millis(1));
    for _ in 0..10 {
        assert_eq!(s.limiter.check(&rule, "a").await.unwrap().limit, 80);
    }
    assert_eq!(s.signals.samples(), 1, "one caller evaluates");
    s.clock.advance(INTERVAL - Duration::from_millis(1));
    assert_eq!(s.limiter.check(&rule, "b").await.unwrap().limit, 80);
    assert_eq!(s.signals.samples(), 1);
}

#[tokio::test]
async fn between_the_watermarks_or_unmeasured_the_limit_holds() {
    let (s, _) = memory(AdaptiveConfig::builder().decrease(0.5).build().unwrap());
    let rule = per_minute(100);
    s.signals.set(hot());
    assert_eq!(s.limit_next_interval(&rule).await, 50);
    s.signals.set(Load::default().with_cpu(0.7));
    assert_eq!(s.limit_next_interval(&rule).await, 50, "CPU between 0.60 and 0.85");
    s.signals.set(Load::default());
    assert_eq!(s.limit_next_interval(&rule).await, 50, "no signal at all");
    s.signals.set(Load::default().with_cpu(0.1).with_memory(0.8));
    assert_eq!(s.limit_next_interval(&rule).await, 50, "memory not below 0.75");
}

/// Scales the limiter of `s` to factor 0.5 (one step of decrease 0.5).
async fn halve<S: Store>(s: &Setup<S>) {
    s.signals.set(hot());
    s.clock.advance(INTERVAL);
    s.limiter.check(&per_minute(1), "scale-probe").await.unwrap();
    assert_eq!(s.limiter.adaptive_factor(), Some(0.5));
    s.signals.set(Load::default().with_cpu(0.7));
}

fn halving() -> AdaptiveConfig {
    AdaptiveConfig::builder().decrease(0.5).build().unwrap()
}

#[tokio::test]
async fn the_store_enforces_the_effective_limit() {
    let (s, _) = memory(halving());
    let rule = per_minute(100);
    halve(&s).await;
    for i in 0..50 {
        let d = s.limiter.check(&rule, "alice").await.unwrap();
        assert!(d.allowed && d.limit == 50 && d.remaining == 49 - i, "{d:?}");
    }
    let denied = s.limiter.check(&rule, "alice").await.unwrap();
    assert!(!denied.allowed, "the 51st request in the window");
    assert_eq!((denied.state, denied.limit), (State::Limited, 50));
    assert_eq!(denied.retry_after, Duration::from_secs(60), "exact, as for a configured 50/min");
}

#[tokio::test]
async fn scaled_rules_share_the_configured_rules_state() {
    for rule in [per_minute(100), per_minute(100).named("api").unwrap()] {
        let (s, store) = memory(halving());
        for _ in 0..30 {
            assert!(s.limiter.check(&rule, "alice").await.unwrap().allowed);
        }
        halve(&s).await;
        assert_eq!(s.admitted(&rule, "alice").await, 20, "{rule}: 30 charged unscaled count toward 50");
        // Back up one step: 55 in the same state, so 5 more.
        s.signals.set(cool());
        s.clock.advance(INTERVAL);
        assert_eq!(s.admitted(&rule, "alice").await, 5, "{rule}");
        // One key for alice's state (and one for the probe), whatever the limit.
        assert_eq!(store.len(), 2, "{rule}");
    }
}

#[tokio::test]
async fn a_cost_above_the_effective_limit_waits_for_the_next_evaluation() {
    let (s, _) = memory(halving());
    let rule = per_minute(100);
    halve(&s).await;
    s.clock.advance(Duration::from_millis(300));
    let denied = s.limiter.check_n(&rule, "alice", 60).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!((denied.state, denied.limit, denied.remaining), (State::Limited, 50, 0));
    assert_eq!(denied.retry_after, Duration::from_millis(700), "until the limit may next change");
    let never = s.limiter.check_n(&rule, "alice", 101).await.unwrap();
    assert_eq!((never.allowed, never.source), (false, Source::CostAboveLimit), "above the configured limit");
    assert_eq!(never.retry_after, Duration::from_secs(60), "one window: no wait admits it");
    // Nothing was charged: after two steps up (60) it fits.
    s.signals.set(cool());
    s.clock.advance(Duration::from_millis(700));
    assert!(!s.limiter.check_n(&rule, "alice", 60).await.unwrap().allowed, "55 is not enough");
    s.clock.advance(INTERVAL);
    let admitted = s.limiter.check_n(&rule, "alice", 60).await.unwrap();
    assert!(admitted.allowed && admitted.limit == 60 && admitted.remaining == 0, "{admitted:?}");
}

#[tokio::test]
async fn check_all_and_check_batch_use_effective_limits() {
    let (s, _) = memory(halving());
    let global = per_minute(100).named("global").unwrap();
    let user = per_minute(10);
    halve(&s).await;
    for _ in 0..5 {
        let multi = s.limiter.check_all(&[(&global, "api"), (&user, "alice")]).await.unwrap();
        assert!(multi.allowed);
        assert_eq!((multi.decisions[0].limit, multi.decisions[1].limit), (50, 5));
    }
    let multi = s.limiter.check_all(&[(&global, "api"), (&user, "alice")]).await.unwrap();
    assert_eq!(multi.denied_by(), Some(1), "the user's 5 are used up");
    let over = s.limiter.check_all_n(&[(&global, "api"), (&user, "bob")], 6).await.unwrap();
    assert_eq!(over.denied_by(), Some(1), "a cost of 6 is above the user's effective 5");
    assert_eq!(over.decisions[1].retry_after, INTERVAL);

    let batch = s.limiter.check_batch(&[(&user, "carol", 5), (&user, "carol", 1), (&user, "dave", 6)]).await;
    let outcomes: Vec<(bool, u32)> =
        batch.iter().map(|r| r.as_ref().map(|d| (d.allowed, d.limit)).unwrap()).collect();
    assert_eq!(outcomes, [(true, 5), (false, 5), (false, 5)]);
    // The global rule saw the 5 admitted multi-dimension requests only.
    assert_eq!(s.limiter.check(&global, "api").await.unwrap().remaining, 44);
}

#[tokio::test]
async fn without_adaptive_limits_nothing_is_scaled() {
    let limiter = Limiter::in_memory();
    assert_eq!(limiter.adaptive_factor(), None);
    assert_eq!(limiter.check(&per_minute(100), "a").await.unwrap().limit, 100);
}

#[tokio::test]
async fn system_signals_are_the_default_source() {
    let clock = ManualClock::new(0);
    let limiter = Limiter::builder(MemoryStore::builder().clock(clock.clone()).build())
        .clock(clock.clone())
        .adaptive(AdaptiveConfig::default())
        .build();
    assert_eq!(limiter.adaptive_factor(), Some(1.0));
    clock.advance(INTERVAL);
    let decision = limiter.check(&per_minute(100), "a").await.unwrap();
    // Whatever this machine's load, the limit stays within floor and ceiling.
    assert!((50..=100).contains(&decision.limit), "{decision:?}");
}

#[test]
fn system_signals_sample_fractions() {
    let signals = SystemSignals::new();
    let samples = [signals.sample(), signals.sample()];
    for load in samples {
        assert!(load.cpu.is_none_or(|cpu| (0.0..=1.0).contains(&cpu)), "{load:?}");
        assert!(load.memory.is_none_or(|memory| (0.0..=1.0).contains(&memory)), "{load:?}");
        if cfg!(target_os = "linux") {
            assert!(load.memory.is_some(), "/proc/meminfo is readable on Linux: {load:?}");
        }
    }
}

#[test]
fn invalid_configs_say_what_is_wrong() {
    let cases = [
        (AdaptiveConfig::builder().floor(0.0).build(), "floor must be in (0, 1]"),
        (AdaptiveConfig::builder().ceiling(0.5).build(), "ceiling must be at least 1"),
        (AdaptiveConfig::builder().decrease(1.5).build(), "decrease must be in (0, 1)"),
        (AdaptiveConfig::builder().cpu_low(0.9).build(), "cpu_low must be in [0, cpu_high)"),
        (AdaptiveConfig::builder().interval(Duration::ZERO).build(), "interval must be at least 1ms"),
    ];
    for (result, needle) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidRule);
        assert!(err.to_string().contains(needle), "{err} should contain {needle}");
    }
}

/// A remote store whose calls take `delay` of (paused) Tokio time.
#[derive(Debug, Clone)]
struct Slow {
    state: MemoryStore,
    delay_ms: Arc<AtomicU64>,
}

impl Slow {
    fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    async fn wait(&self) {
        tokio::time::sleep(Duration::from_millis(self.delay_ms.load(Ordering::SeqCst))).await;
    }
}

impl Store for Slow {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        self.wait().await;
        self.state.check(request).await
    }

    async fn check_all(&self, dimensions: &Dimensions<'_>) -> Result<MultiDecision, Error> {
        self.wait().await;
        self.state.check_all(dimensions).await
    }
}

fn remote(config: AdaptiveConfig) -> (Setup<Slow>, Slow) {
    let clock = ManualClock::new(1_000_000);
    let store = Slow { state: MemoryStore::builder().clock(clock.clone()).build(), delay_ms: Arc::default() };
    let signals = Scripted::default();
    let limiter = Limiter::builder(store.clone())
        .clock(clock.clone())
        .adaptive(config)
        .adaptive_signals(signals.clone())
        .build();
    (Setup { limiter, signals, clock }, store)
}

fn latency_only() -> AdaptiveConfig {
    AdaptiveConfig::builder().no_cpu().no_memory().latency_high(Duration::from_millis(20)).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_lowers_the_limit_and_a_fast_one_raises_it() {
    let (s, store) = remote(latency_only());
    let rule = per_minute(100);
    store.set_delay(Duration::from_millis(30));
    assert_eq!(s.limiter.check(&rule, "a").await.unwrap().limit, 100);
    assert_eq!(s.limit_next_interval(&rule).await, 80, "30 ms is above the 20 ms watermark");
    store.set_delay(Duration::from_millis(15));
    for _ in 0..30 {
        s.limiter.check(&rule, "b").await.unwrap();
    }
    assert_eq!(s.limit_next_interval(&rule).await, 80, "15 ms is between the watermarks");
    store.set_delay(Duration::from_millis(1));
    for _ in 0..30 {
        s.limiter.check(&rule, "c").await.unwrap();
    }
    assert_eq!(s.limiter.check(&rule, "c").await.unwrap().limit, 80, "not before the interval");
    assert_eq!(s.limit_next_interval(&rule).await, 85, "1 ms is below the 10 ms watermark");
}

#[tokio::test(start_paused = true)]
async fn a_store_past_its_deadline_counts_as_slow() {
    let (s, store) = remote(latency_only());
    let rule = per_minute(100);
    store.set_delay(Duration::from_secs(5));
    let degraded = s.limiter.check(&rule, "a").await.unwrap();
    assert_eq!(degraded.state, State::Degraded, "answered by the fallback after the deadline");
    assert_eq!(s.limit_next_interval(&rule).await, 80, "a timeout is the slowest answer of all");
}

#[tokio::test(start_paused = true)]
async fn the_deny_cache_never_outlives_a_raised_limit() {
    let (s, _) = remote(halving());
    let rule = per_minute(100);
    halve(&s).await;
    assert_eq!(s.admitted(&rule, "alice").await, 50);
    assert!(!s.limiter.check(&rule, "alice").await.unwrap().allowed, "denied (and cached) under 50");
    s.signals.set(cool());
    s.clock.advance(INTERVAL);
    let admitted = s.limiter.check(&rule, "alice").await.unwrap();
    assert!(admitted.allowed && admitted.limit == 55, "asked the store under the new limit: {admitted:?}");
}
