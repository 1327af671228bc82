//! The limiter's local deny cache: answers repeated denials without the
//! store, exactly (property-tested request by request against the store
//! alone), and never hides a violation a penalty must count.

mod support;

use std::time::Duration;

use slidegate::store::Request;
use slidegate::{FailurePolicy, Limiter, ManualClock, MemoryStore, Rule, State};
use support::{Remote, rule, setup};

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
                    let want = alone.check_sync(&Request::new(&rule, key, cost).expect("valid request")).expect("check");
                    prop_assert_eq!(got.allowed, want.allowed);
                    prop_assert_eq!(got.retry_after, want.retry_after);
                }
                Ok(())
            })?;
        }
    }
}

/// A store that releases charges (a Redis Cluster's cross-slot checks) can
/// lift a denial before its time: its denials always ask it again; its
/// bans, which nothing shortens, are still cached.
#[tokio::test]
async fn a_store_that_releases_charges_gets_only_bans_cached() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    remote.releases.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = rule(1);
    assert!(limiter.check(&r, "k").await.expect("admit").allowed);
    let before = remote.calls();
    for _ in 0..5 {
        assert!(!limiter.check(&r, "k").await.expect("deny").allowed);
    }
    assert_eq!(remote.calls(), before + 5, "every denial asked the store");

    let penalty = slidegate::Penalty::new(Duration::from_secs(60))
        .and_then(|p| p.ban_after(1, Duration::from_secs(30)))
        .unwrap();
    let banned = rule(1).with_penalty(penalty).unwrap();
    assert!(limiter.check(&banned, "m").await.expect("admit").allowed);
    assert_eq!(limiter.check(&banned, "m").await.expect("ban").state, State::Banned);
    let before = remote.calls();
    assert_eq!(limiter.check(&banned, "m").await.expect("cached ban").state, State::Banned);
    assert_eq!(remote.calls(), before, "the ban came from the cache");
}
