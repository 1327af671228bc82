//! The limiter's local deny cache: answers repeated denials without the
//! store, exactly (property-tested request by request against the store
//! alone), and never hides a violation a penalty must count.

mod support;

use std::time::Duration;

use slidegate::store::{Dimensions, Request};
use slidegate::{FailurePolicy, Limiter, ManualClock, MemoryStore, Rule, Source, State};
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
async fn a_reset_forgets_the_cached_denial_too() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let r = rule(2);
    limiter.check_n(&r, "k", 2).await.expect("admit");
    assert!(!limiter.check(&r, "k").await.expect("deny").allowed);
    assert_eq!(limiter.check(&r, "k").await.expect("cached").source, Source::DenyCache);
    assert!(limiter.reset(&r, "k").await.expect("reset"), "the store kept charges");
    let calls = remote.calls();
    let fresh = limiter.check(&r, "k").await.expect("admit");
    assert!(fresh.allowed && fresh.source == Source::Store, "asked the store again");
    assert_eq!((remote.calls(), fresh.remaining), (calls + 1, 1));
    assert_eq!(limiter.reset(&r, "").await.unwrap_err().kind(), slidegate::ErrorKind::InvalidKey);
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

        /// The same through `check_all`, with a shared rule beside each
        /// key's own, mixed with single checks of either rule: the cache
        /// never changes whether a request is admitted; a cached denial's
        /// `retry_after` is the store's when one dimension denies, and never
        /// later than the store's when several do (the cache knows the
        /// dimension it holds).
        #[test]
        fn the_cache_never_changes_a_multi_dimension_decision(
            algorithm in any_algorithm(),
            limits in (1u32..=6, 1u32..=12),
            window in 8u64..=300,
            trace in prop::collection::vec((0u64..=60, 1u32..=6, 0usize..2, 0u8..4), 1..150),
        ) {
            let rule_of = |limit: u32, name: &str| Rule::new(limit, Duration::from_millis(window))
                .and_then(|r| r.with_algorithm(algorithm))
                .and_then(|r| r.named(name))
                .expect("valid rule");
            let (own, shared) = (rule_of(limits.0, "own"), rule_of(limits.1, "shared"));
            let clock = ManualClock::new(1_700_000_000_000);
            let cached = Limiter::builder(Remote::new(&clock)).clock(clock.clone()).build();
            let alone = MemoryStore::builder().clock(clock.clone()).build();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                for (step, cost, key, kind) in trace {
                    clock.advance(Duration::from_millis(step));
                    let cost = cost.min(limits.0).min(limits.1);
                    let key = ["a", "b"][key];
                    let dimensions = [(&own, key), (&shared, "all")];
                    let (got, want) = match kind {
                        0 => {
                            let got = cached.check_n(&own, key, cost).await.expect("check");
                            let want = alone.check_sync(&Request::new(&own, key, cost).expect("valid")).expect("check");
                            ((got.allowed, got.retry_after, got.source), (want.allowed, want.retry_after))
                        }
                        1 => {
                            let got = cached.check_n(&shared, "all", cost).await.expect("check");
                            let want = alone.check_sync(&Request::new(&shared, "all", cost).expect("valid")).expect("check");
                            ((got.allowed, got.retry_after, got.source), (want.allowed, want.retry_after))
                        }
                        _ => {
                            let got = cached.check_all_n(&dimensions, cost).await.expect("check_all");
                            let valid = Dimensions::new(&dimensions, cost).expect("valid");
                            let want = alone.check_all_sync(&valid).expect("check_all");
                            let source = got.binding().map_or(Source::Store, |d| d.source);
                            ((got.allowed, got.retry_after(), source), (want.allowed, want.retry_after()))
                        }
                    };
                    prop_assert_eq!(got.0, want.0, "admitted");
                    if got.2 == Source::DenyCache && kind >= 2 {
                        prop_assert!(got.1 <= want.1, "cached {:?} later than the store's {:?}", got.1, want.1);
                    } else {
                        prop_assert_eq!(got.1, want.1, "retry_after");
                    }
                }
                Ok(())
            })?;
        }
    }
}

/// `check_all` reads the deny cache too: a request one of whose dimensions
/// is cached as denied at its cost is denied without the store, charging
/// nothing, and single checks and multi-dimension checks share entries.
#[tokio::test]
async fn check_all_is_denied_from_the_cache() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailClosed);
    let global = rule(100).named("global").unwrap();
    let per_user = rule(2).named("user").unwrap();
    let both = [(&global, "api"), (&per_user, "alice")];
    for _ in 0..2 {
        assert!(limiter.check_all(&both).await.expect("admit").allowed);
    }
    let denied = limiter.check_all(&both).await.expect("deny");
    assert_eq!(denied.denied_by(), Some(1));
    let calls = remote.calls();

    clock.advance(Duration::from_millis(100));
    for _ in 0..20 {
        let cached = limiter.check_all(&both).await.expect("cached");
        assert!(!cached.allowed);
        let binding = cached.binding().expect("a denial");
        assert_eq!((binding.state, binding.source), (State::Limited, Source::DenyCache));
        assert_eq!(binding.retry_after, denied.retry_after() - Duration::from_millis(100), "counted down");
        // The dimension not asked about promises nothing.
        assert_eq!((cached.decisions[0].allowed, cached.decisions[0].remaining), (true, 0));
    }
    // One dimension alone, through either entry point, hits the same entry.
    assert_eq!(limiter.check(&per_user, "alice").await.expect("cached").source, Source::DenyCache);
    assert!(!limiter.check_all(&[(&per_user, "alice")]).await.expect("cached").allowed);
    assert_eq!(remote.calls(), calls, "every denial above was local");
    // The global rule was charged by the two admitted requests only.
    let global_left = limiter.check(&global, "api").await.expect("global");
    assert_eq!((global_left.source, global_left.remaining), (Source::Store, 97));

    // A batch reads the same entries.
    let batch = limiter.check_batch(&[(&per_user, "alice", 1), (&per_user, "bob", 1)]).await;
    assert_eq!(batch[0].as_ref().expect("cached").source, Source::DenyCache);
    assert_eq!(batch[1].as_ref().expect("asked").source, Source::Store);

    // At retry_after, the store is asked again and admits.
    clock.advance(denied.retry_after());
    let again = limiter.check_all(&both).await.expect("admit");
    assert!(again.allowed && again.decisions.iter().all(|d| d.source == Source::Store));
}

/// A penalty on another dimension keeps the request going to the store:
/// only the store counts that dimension's violation.
#[tokio::test]
async fn check_all_asks_the_store_when_another_dimension_counts_violations() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let penalty = slidegate::Penalty::new(Duration::from_secs(60))
        .and_then(|p| p.ban_after(3, Duration::from_secs(30)))
        .unwrap();
    let watched = rule(1).named("watched").unwrap().with_penalty(penalty).unwrap();
    let plain = rule(1).named("plain").unwrap();
    assert!(limiter.check(&plain, "k").await.expect("admit").allowed);
    assert!(!limiter.check(&plain, "k").await.expect("deny, cached").allowed);
    assert!(limiter.check(&watched, "k").await.expect("admit").allowed);
    let before = remote.calls();
    let both = [(&plain, "k"), (&watched, "k")];
    for violations in 1..=2 {
        let denied = limiter.check_all(&both).await.expect("deny");
        assert_eq!(denied.decisions[1].violations, violations, "the store counted the violation");
    }
    assert_eq!(limiter.check_all(&both).await.expect("ban").decisions[1].state, State::Banned);
    assert_eq!(remote.calls(), before + 3);
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

/// `check_all_now` gives `check_all_n`'s answer when it needs no store
/// call, synchronously, and charges nothing: a denial the cache holds, the
/// switch; `None` for everything only the store can answer.
#[tokio::test]
async fn check_all_now_answers_only_without_the_store() {
    let (limiter, remote, clock) = setup(FailurePolicy::FailClosed);
    let global = rule(100).named("global").unwrap();
    let per_user = rule(1).named("user").unwrap();
    let per_team = rule(1).named("team").unwrap();
    let all = [(&global, "api"), (&per_user, "alice"), (&per_team, "red")];
    assert!(limiter.check_all_now(&all, 1).is_none(), "nothing cached yet");
    assert_eq!(remote.calls(), 0, "and nothing asked");
    assert!(limiter.check_all(&all).await.expect("admit").allowed);
    assert!(limiter.check(&per_user, "alice").await.expect("deny").state == State::Limited);
    assert!(limiter.check(&per_team, "red").await.expect("deny").state == State::Limited);
    let calls = remote.calls();

    clock.advance(Duration::from_millis(100));
    let now = limiter.check_all_now(&all, 1).expect("cached").expect("valid");
    assert!(!now.allowed);
    let sources: Vec<Source> = now.decisions.iter().map(|d| d.source).collect();
    assert_eq!(sources, [Source::DenyCache; 3], "both cached dimensions answer, the other is unknown");
    assert_eq!((now.decisions[0].allowed, now.decisions[0].remaining), (true, 0));
    assert_eq!(now.decisions[2].retry_after, Duration::from_millis(900), "counted down");
    assert_eq!(now, limiter.check_all(&all).await.expect("cached"), "what check_all answers");
    assert_eq!(remote.calls(), calls, "no store call");
    assert!(limiter.check_all_now(&[(&global, "api")], 1).is_none(), "not cached: the store's");
    let empty = limiter.check_all_now(&[(&global, "")], 1).expect("validated");
    assert_eq!(empty.unwrap_err().kind(), slidegate::ErrorKind::InvalidKey);
    assert_eq!(limiter.check(&global, "api").await.expect("global").remaining, 98, "charged once");

    // The switch answers without a cache; without one, nothing else does.
    let plain = Limiter::builder(remote.clone()).no_deny_cache().clock(clock.clone()).build();
    assert!(plain.check_all_now(&all, 1).is_none());
    plain.set_enabled(false);
    let off = plain.check_all_now(&all, 1).expect("switched off").expect("valid");
    assert!(off.allowed && off.decisions.iter().all(|d| d.state == State::Disabled));
    assert!(Limiter::in_memory().check_all_now(&all, 1).is_none(), "a local store is simply asked");
}
