//! Unit tests of the parent module.

use std::sync::atomic::AtomicU64;

use slidegate::store::Request;
use slidegate::{BreakerState, Decision, Error, ErrorKind, FailurePolicy, Rule};

use crate::cli::{Entry, KeyOrder};

use super::*;

fn plan(bound: Bound, key_order: KeyOrder) -> BenchPlan {
    BenchPlan {
        rule: Rule::new(10, Duration::from_secs(60)).unwrap(),
        cost: 1,
        keys: 7,
        concurrency: 4,
        bound,
        key_order,
        rate: None,
        seed: 1,
        time_limit: MAX_BENCH_DURATION,
        limiter: LimiterSettings::default(),
        entry: Entry::Check,
    }
}

/// A remote store that is down.
#[derive(Debug, Clone)]
struct DownStore;

impl Store for DownStore {
    async fn check(&self, _: &Request<'_>) -> Result<Decision, Error> {
        Err(Error::new(ErrorKind::Unavailable, "connection refused"))
    }
}

/// A remote store that denies everything for a minute and counts calls.
#[derive(Debug, Clone, Default)]
struct DenyingStore {
    calls: Arc<AtomicU64>,
}

impl Store for DenyingStore {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        let rule = request.rule();
        self.calls.fetch_add(1, Relaxed);
        let minute = Duration::from_secs(60);
        Ok(Decision::limited(rule.limit(), 0, minute, minute))
    }
}

#[tokio::test]
async fn open_loop_offers_the_rate_and_counts_from_when_due() {
    // 200 per second for 0.5 s: about 100 decisions, however fast the store.
    let mut plan = plan(Bound::Duration(Duration::from_millis(500)), KeyOrder::RoundRobin);
    plan.rate = Some(200.0);
    let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
    let decided = outcome.allowed + outcome.denied;
    assert_eq!(decided, 100, "ticket n is due at n / rate: 0 ..= 99 fall before 0.5 s");
    assert!(outcome.elapsed >= Duration::from_millis(490), "{:?}", outcome.elapsed);
    let report = report(&StoreSpec::Memory, &plan, &outcome);
    assert_eq!(report.offered_per_sec, Some(200.0));
    assert!(report.render().contains("open loop at 200 decisions/s"), "{}", report.render());

    // With `--requests` the schedule ends with the last ticket.
    let mut plan = self::plan(Bound::Requests(50), KeyOrder::RoundRobin);
    plan.rate = Some(1000.0);
    let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
    assert_eq!(outcome.allowed + outcome.denied, 50);
    assert!(outcome.elapsed >= Duration::from_millis(45), "ticket 49 is due at 49 ms: {:?}", outcome.elapsed);
}

/// A task waiting for the open loop's next ticket stops at the run's end:
/// 50 tasks at one decision per second are not held for 50 s.
#[tokio::test]
async fn a_slow_open_loop_ends_with_its_duration() {
    let mut plan = plan(Bound::Duration(Duration::from_millis(300)), KeyOrder::RoundRobin);
    plan.rate = Some(1.0);
    plan.concurrency = 50;
    let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
    assert_eq!(outcome.allowed + outcome.denied, 1, "only ticket 0 falls due in 0.3 s");
    assert!(!outcome.time_limited);
    assert!(
        outcome.elapsed < Duration::from_secs(10),
        "stopped at the end, not at ticket 50: {:?}",
        outcome.elapsed
    );
}

/// A `--requests` run that cannot finish in the time limit stops there,
/// and the report says so.
#[tokio::test]
async fn requests_stop_at_the_time_limit() {
    for rate in [None, Some(100.0)] {
        let mut plan = plan(Bound::Requests(1_000_000_000), KeyOrder::RoundRobin);
        plan.time_limit = Duration::from_millis(200);
        plan.rate = rate;
        let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
        assert!(outcome.time_limited, "{rate:?}");
        assert!(outcome.allowed + outcome.denied < 1_000_000_000);
        assert!(outcome.elapsed < Duration::from_secs(10), "{:?}", outcome.elapsed);
        let report = report(&StoreSpec::Memory, &plan, &outcome);
        assert!(report.stopped_at_time_limit);
        assert!(report.render().contains("stopped at the time limit"), "{}", report.render());
    }
    // A run that finishes in time is not flagged.
    let mut plan = plan(Bound::Requests(100), KeyOrder::RoundRobin);
    plan.time_limit = Duration::from_secs(60);
    assert!(!execute(MemoryStore::new(), &plan, false).await.unwrap().time_limited);
}

#[tokio::test]
async fn requests_bound_is_exact() {
    let plan = plan(Bound::Requests(1000), KeyOrder::RoundRobin);
    let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
    // 7 keys × 10 allowed each within the minute; the rest denied.
    assert_eq!((outcome.allowed, outcome.denied, outcome.errors), (70, 930, 0));
    assert_eq!((outcome.degraded, outcome.deny_cache_hits), (0, 0));
    assert_eq!(outcome.breaker, BreakerWatch::new(BreakerState::Closed));
    assert_eq!(outcome.latency.len(), 1000);
    let report = report(&StoreSpec::Memory, &plan, &outcome);
    assert_eq!(report.requests, 1000);
    assert_eq!(report.key_order, "round-robin");
    assert_eq!((report.policy.as_str(), report.breaker_state.as_str()), ("fallback", "closed"));
}

#[tokio::test]
async fn cost_charges_each_decision() {
    let mut plan = plan(Bound::Requests(100), KeyOrder::RoundRobin);
    plan.cost = 3;
    let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
    // 3 of cost 3 fit in a limit of 10, for each of the 7 keys.
    assert_eq!((outcome.allowed, outcome.denied), (21, 79));
}

#[tokio::test]
async fn store_failures_are_degraded_not_errors() {
    let store = MemoryStore::builder().max_keys(1).shards(1).build();
    let outcome = execute(store, &plan(Bound::Requests(50), KeyOrder::Random), false).await.unwrap();
    assert_eq!(outcome.allowed + outcome.denied, 50);
    assert_eq!(outcome.errors, 0);
    assert!(outcome.degraded > 0 && outcome.first_error.is_none());
}

#[tokio::test]
async fn invalid_input_is_counted_with_the_first_message() {
    // `run` rejects such a cost up front; `execute` counts what it gets.
    let mut plan = plan(Bound::Requests(50), KeyOrder::Random);
    plan.cost = 0;
    let outcome = execute(MemoryStore::new(), &plan, false).await.unwrap();
    assert_eq!((outcome.allowed, outcome.denied, outcome.errors), (0, 0, 50));
    assert!(outcome.first_error.unwrap().contains("at least 1"));
}

#[tokio::test]
async fn a_dead_store_opens_the_breaker() {
    let mut plan = plan(Bound::Requests(200), KeyOrder::Random);
    plan.limiter.policy = FailurePolicy::FailClosed;
    let outcome = execute(DownStore, &plan, false).await.unwrap();
    assert_eq!((outcome.denied, outcome.degraded, outcome.errors), (200, 200, 0));
    // Its probes fail too, so it is not closed at the end, and leaving
    // `closed` was seen at least once.
    assert_ne!(outcome.breaker.last, BreakerState::Closed);
    assert!(outcome.breaker.transitions >= 1, "{:?}", outcome.breaker);

    plan.limiter.breaker = false;
    let outcome = execute(DownStore, &plan, false).await.unwrap();
    assert_eq!(outcome.breaker, BreakerWatch::new(BreakerState::Closed));
    assert_eq!(report(&StoreSpec::Memory, &plan, &outcome).breaker_state, "off");
}

#[tokio::test]
async fn deny_cache_hits_are_the_denials_the_store_did_not_make() {
    let plan = plan(Bound::Requests(300), KeyOrder::Random);
    let store = DenyingStore::default();
    let outcome = execute(store.clone(), &plan, false).await.unwrap();
    let calls = store.calls.load(Relaxed);
    assert_eq!(outcome.denied, 300);
    assert_eq!(outcome.deny_cache_hits, 300 - calls);
    assert!(outcome.deny_cache_hits > 0);

    let mut plan = plan;
    plan.limiter.deny_cache = false;
    let store = DenyingStore::default();
    let outcome = execute(store.clone(), &plan, false).await.unwrap();
    assert_eq!((outcome.deny_cache_hits, store.calls.load(Relaxed)), (0, 300));
}
