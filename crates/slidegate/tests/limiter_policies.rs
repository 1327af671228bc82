//! The limiter's failure handling, deterministic: a store double that can
//! be told to fail or hang stands in for a remote store (the same behaviour
//! against real, killed and paused Redis processes is tested in
//! `slidegate-redis/tests/faults.rs`), time is a `ManualClock` and paused
//! Tokio time.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use slidegate::{
    BreakerConfig, BreakerState, Decision, Dimension, Error, ErrorKind, FailurePolicy, Limiter, ManualClock,
    MemoryStore, MultiDecision, Rule, State, Store,
};

const ANSWER: u8 = 0;
const FAIL: u8 = 1;
const HANG: u8 = 2;

/// A "remote" store: decides with a memory store, fails or hangs on demand,
/// and counts the calls that reach it.
#[derive(Debug, Clone)]
struct Remote {
    state: MemoryStore,
    mode: Arc<AtomicU8>,
    calls: Arc<AtomicU64>,
}

impl Remote {
    fn new(clock: &ManualClock) -> Remote {
        Remote {
            state: MemoryStore::builder().clock(clock.clone()).build(),
            mode: Arc::new(AtomicU8::new(ANSWER)),
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Remote {
    /// Fails or hangs as told, after counting the call.
    async fn reach(&self) -> Result<(), Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode.load(Ordering::SeqCst) {
            FAIL => Err(Error::new(ErrorKind::Unavailable, "connection refused")),
            HANG => std::future::pending().await,
            _ => Ok(()),
        }
    }
}

impl Store for Remote {
    async fn check(&self, rule: &Rule, key: &str, cost: u32) -> Result<Decision, Error> {
        self.reach().await?;
        self.state.check(rule, key, cost).await
    }

    async fn check_all(&self, dimensions: &[Dimension<'_>], cost: u32) -> Result<MultiDecision, Error> {
        self.reach().await?;
        self.state.check_all(dimensions, cost).await
    }
}

fn rule(limit: u32) -> Rule {
    Rule::per_second(NonZeroU32::new(limit).unwrap())
}

fn setup(policy: FailurePolicy) -> (Limiter<Remote>, Remote, ManualClock) {
    let clock = ManualClock::new(1_000_000);
    let remote = Remote::new(&clock);
    let limiter = Limiter::builder(remote.clone())
        .failure_policy(policy)
        .breaker(BreakerConfig::default().failure_threshold(3).open_for(Duration::from_millis(100)))
        .clock(clock.clone())
        .build();
    (limiter, remote, clock)
}

#[tokio::test]
async fn each_policy_answers_a_failed_store_as_degraded() {
    for policy in [FailurePolicy::FailOpen, FailurePolicy::FailClosed, FailurePolicy::Fallback] {
        let (limiter, remote, _) = setup(policy);
        remote.set(FAIL);
        let decision = limiter.check(&rule(2), "k").await.expect("a policy answers");
        assert_eq!(decision.state, State::Degraded, "{policy}");
        assert_eq!(decision.allowed, policy != FailurePolicy::FailClosed, "{policy}");
        if policy == FailurePolicy::FailClosed {
            assert!(decision.retry_after >= Duration::from_secs(1));
        }
    }
}

#[tokio::test]
async fn fallback_enforces_the_rule_locally() {
    let (limiter, remote, clock) = setup(FailurePolicy::Fallback);
    remote.set(FAIL);
    let outcomes: Vec<bool> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(limiter.check(&rule(3), "k").await.expect("degraded").allowed);
        }
        v
    };
    assert_eq!(outcomes, [true, true, true, false], "the local limiter admits exactly the limit");
    clock.advance(Duration::from_secs(1));
    assert!(limiter.check(&rule(3), "k").await.expect("degraded").allowed, "and frees it in time");
}

#[tokio::test]
async fn invalid_input_is_an_error_whatever_the_store_does() {
    let (limiter, remote, _) = setup(FailurePolicy::FailOpen);
    remote.set(FAIL);
    assert_eq!(limiter.check(&rule(2), "").await.unwrap_err().kind(), ErrorKind::InvalidKey);
    assert_eq!(limiter.check_n(&rule(2), "k", 3).await.unwrap_err().kind(), ErrorKind::InvalidCost);
    assert_eq!(limiter.check_n(&rule(2), "k", 0).await.unwrap_err().kind(), ErrorKind::InvalidCost);
    assert_eq!(remote.calls(), 0, "rejected before any store call");
}

#[tokio::test(start_paused = true)]
async fn a_hung_store_is_abandoned_at_the_deadline() {
    let clock = ManualClock::new(0);
    let remote = Remote::new(&clock);
    let limiter = Limiter::builder(remote.clone())
        .deadline(Duration::from_millis(40))
        .failure_policy(FailurePolicy::FailClosed)
        .clock(clock)
        .build();
    remote.set(HANG);
    let started = tokio::time::Instant::now();
    let decision = limiter.check(&rule(5), "k").await.expect("policy");
    assert_eq!(started.elapsed(), Duration::from_millis(40), "exactly the deadline (paused time)");
    assert_eq!((decision.allowed, decision.state), (false, State::Degraded));
}

#[tokio::test]
async fn breaker_opens_probes_and_closes_by_itself() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailOpen);
    remote.set(FAIL);
    for _ in 0..3 {
        limiter.check(&rule(100), "k").await.expect("degraded");
    }
    assert_eq!(limiter.breaker_state(), BreakerState::Open);
    assert_eq!(remote.calls(), 3);
    for _ in 0..100 {
        assert_eq!(limiter.check(&rule(100), "k").await.expect("degraded").state, State::Degraded);
    }
    assert_eq!(remote.calls(), 3, "an open breaker keeps calls off the store");

    clock.advance(Duration::from_millis(100));
    limiter.check(&rule(100), "k").await.expect("probe");
    assert_eq!(remote.calls(), 4, "one probe after the open period");
    assert_eq!(limiter.breaker_state(), BreakerState::Open, "the probe failed");
    clock.advance(Duration::from_millis(150));
    limiter.check(&rule(100), "k").await.expect("degraded");
    assert_eq!(remote.calls(), 4, "the next open period is twice as long");

    remote.set(ANSWER);
    clock.advance(Duration::from_millis(50));
    let decision = limiter.check(&rule(100), "k").await.expect("probe");
    assert_eq!(decision.state, State::Allowed, "the successful probe is a real decision");
    assert_eq!(limiter.breaker_state(), BreakerState::Closed);
    limiter.check(&rule(100), "k").await.expect("closed");
    assert_eq!(remote.calls(), 6);
}

#[tokio::test]
async fn switched_off_admits_without_the_store_and_charges_nothing() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let clone = limiter.clone();
    clone.set_enabled(false);
    assert!(!limiter.is_enabled(), "clones share the switch");
    for _ in 0..10 {
        let decision = limiter.check(&rule(1), "k").await.expect("disabled");
        assert_eq!((decision.allowed, decision.state), (true, State::Disabled));
    }
    assert_eq!(remote.calls(), 0);
    limiter.set_enabled(true);
    assert!(limiter.check(&rule(1), "k").await.expect("on").allowed, "nothing was charged while off");
    assert!(!limiter.check(&rule(1), "k").await.expect("on").allowed);
}

#[tokio::test]
async fn deny_cache_answers_repeated_denials_locally_and_exactly() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailClosed);
    let r = rule(3);
    limiter.check_n(&r, "k", 2).await.expect("admit");
    clock.advance(Duration::from_millis(400));
    limiter.check(&r, "k").await.expect("admit");
    let denied = limiter.check(&r, "k").await.expect("deny");
    assert_eq!(denied.retry_after, Duration::from_millis(600));
    let calls = remote.calls();

    clock.advance(Duration::from_millis(100));
    for _ in 0..50 {
        let cached = limiter.check(&r, "k").await.expect("cached");
        assert_eq!((cached.allowed, cached.state), (false, State::Limited));
        assert_eq!(cached.retry_after, Duration::from_millis(500), "counted down");
    }
    assert_eq!(remote.calls(), calls, "denials answered locally");
    assert!(limiter.check(&r, "other").await.expect("other key").allowed);
    assert_eq!(remote.calls(), calls + 1, "other keys still ask the store");

    // At exactly retry_after the store admits, and so does the limiter.
    clock.advance(Duration::from_millis(500));
    assert!(limiter.check(&r, "k").await.expect("free again").allowed);

    // A changed rule does not hit the old rule's entries.
    let bigger = rule(10);
    assert!(limiter.check(&bigger, "k").await.expect("new rule").allowed);

    // Without the cache, every denial is a store call.
    let plain = Limiter::builder(remote.clone()).no_deny_cache().clock(clock.clone()).build();
    let before = remote.calls();
    for _ in 0..5 {
        plain.check_n(&r, "k", 3).await.expect("deny");
    }
    assert_eq!(remote.calls(), before + 5);
}

#[tokio::test]
async fn a_memory_store_is_called_directly() {
    let clock = ManualClock::new(0);
    let limiter = Limiter::builder(MemoryStore::builder().clock(clock.clone()).max_keys(1).build())
        .failure_policy(FailurePolicy::FailClosed)
        .clock(clock)
        .build();
    assert!(limiter.check(&rule(1), "a").await.expect("first key").allowed);
    assert!(!limiter.check(&rule(1), "a").await.expect("limited").allowed);
    let full = limiter.check(&rule(1), "b").await.expect("policy answers a full store");
    assert_eq!((full.allowed, full.state), (false, State::Degraded));
}

#[tokio::test]
async fn multi_dimension_checks_degrade_all_or_nothing() {
    let (limiter, remote, _) = setup(FailurePolicy::Fallback);
    let (global, user) = (rule(3).named("g").unwrap(), rule(1).named("u").unwrap());
    let healthy = limiter.check_all(&[(&global, "api"), (&user, "alice")]).await.expect("check");
    assert!(healthy.allowed && healthy.decisions.iter().all(|d| d.state == State::Allowed));
    remote.set(FAIL);
    let first = limiter.check_all(&[(&global, "api"), (&user, "bob")]).await.expect("degraded");
    assert!(first.allowed && first.decisions.iter().all(|d| d.state == State::Degraded));
    let second = limiter.check_all(&[(&global, "api"), (&user, "bob")]).await.expect("degraded");
    assert_eq!(second.denied_by(), Some(1), "the local fallback is all-or-nothing too");
    assert_eq!(second.decisions[0].remaining, 2, "and charges nothing on a denial");
    let err = limiter.check_all(&[(&user, "x"), (&user, "x")]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKey, "bad input stays an error during an outage");
}

#[tokio::test]
async fn batches_use_the_deny_cache_and_degrade_item_by_item() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let r = rule(1);
    assert!(limiter.check(&r, "hot").await.expect("admit").allowed);
    assert!(!limiter.check(&r, "hot").await.expect("deny").allowed);
    let calls = remote.calls();
    let results = limiter.check_batch(&[(&r, "hot", 1), (&r, "cold", 1), (&r, "", 1), (&r, "hot", 2)]).await;
    assert_eq!(remote.calls(), calls + 1, "one store call for the whole batch");
    assert!(matches!(&results[0], Ok(d) if !d.allowed && d.state == State::Limited), "{:?}", results[0]);
    assert!(matches!(&results[1], Ok(d) if d.allowed));
    assert_eq!(results[2].as_ref().unwrap_err().kind(), ErrorKind::InvalidKey);
    assert_eq!(results[3].as_ref().unwrap_err().kind(), ErrorKind::InvalidCost);

    remote.set(FAIL);
    let results = limiter.check_batch(&[(&r, "a", 1), (&r, "b", 1)]).await;
    for result in results {
        let decision = result.expect("a policy answers");
        assert_eq!((decision.allowed, decision.state), (false, State::Degraded));
    }
}

#[tokio::test]
async fn with_a_penalty_only_bans_are_cached() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let penalty = slidegate::Penalty::new(Duration::from_secs(60))
        .and_then(|p| p.ban_after(3, Duration::from_secs(30)))
        .unwrap();
    let r = rule(1).with_penalty(penalty).unwrap();
    assert!(limiter.check(&r, "m").await.expect("admit").allowed);
    let before = remote.calls();
    for violations in 1..=2 {
        let d = limiter.check(&r, "m").await.expect("deny");
        assert_eq!((d.state, d.violations), (State::Limited, violations), "each denial reaches the store");
    }
    let banned = limiter.check(&r, "m").await.expect("ban");
    assert_eq!(banned.state, State::Banned);
    assert_eq!(remote.calls(), before + 3);
    for _ in 0..10 {
        assert_eq!(limiter.check(&r, "m").await.expect("cached ban").state, State::Banned);
    }
    assert_eq!(remote.calls(), before + 3, "the ban is answered locally");
}

mod deny_cache_exactness {
    use proptest::prelude::*;
    use proptest::test_runner::FileFailurePersistence;

    use super::*;

    fn any_algorithm() -> impl Strategy<Value = slidegate::Algorithm> {
        use slidegate::Algorithm;
        prop_oneof![
            Just(Algorithm::SlidingLog),
            (1u16..=8).prop_map(|b| Algorithm::SlidingCounter {
                buckets: std::num::NonZeroU16::new(b).expect("b >= 1")
            }),
            Just(Algorithm::FixedWindow),
            Just(Algorithm::Gcra),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 128,
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/regressions/deny_cache.txt"))),
            ..ProptestConfig::default()
        })]

        /// With the deny cache, a limiter gives exactly the decisions of the
        /// store alone, request by request: it never denies what the store
        /// would admit, and its cached `retry_after` is the store's.
        #[test]
        fn the_cache_never_changes_a_decision(
            algorithm in any_algorithm(),
            limit in 1u32..=6,
            window in 8u64..=300,
            trace in prop::collection::vec((0u64..=60, 1u32..=6, 0usize..2), 1..150),
        ) {
            let rule = Rule::new(limit, Duration::from_millis(window))
                .and_then(|r| r.with_algorithm(algorithm))
                .expect("valid rule");
            let clock = ManualClock::new(1_700_000_000_000);
            let cached = Limiter::builder(Remote::new(&clock)).clock(clock.clone()).build();
            let alone = MemoryStore::builder().clock(clock.clone()).build();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                for (step, cost, key) in trace {
                    clock.advance(Duration::from_millis(step));
                    let cost = cost.min(limit);
                    let key = ["a", "b"][key];
                    let got = cached.check_n(&rule, key, cost).await.expect("check");
                    let want = alone.check_sync(&rule, key, cost).expect("check");
                    prop_assert_eq!(got.allowed, want.allowed);
                    prop_assert_eq!(got.retry_after, want.retry_after);
                }
                Ok(())
            })?;
        }
    }
}
