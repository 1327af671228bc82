//! Memory store behaviour beyond the conformance suite: capacity, reclaim,
//! concurrency.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use slidegate::store::{Dimensions, Request};
use slidegate::{ErrorKind, Limiter, ManualClock, MemoryStore, Rule};

fn per_second(n: u32) -> Rule {
    Rule::per_second(NonZeroU32::new(n).expect("n > 0"))
}

#[test]
fn full_store_refuses_new_keys_but_serves_existing_ones() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).max_keys(8).shards(1).build();
    let rule = per_second(2);
    for i in 0..8 {
        assert!(
            store
                .check_sync(&Request::new(&rule, &format!("k{i}"), 1).expect("valid request"))
                .expect("room")
                .allowed
        );
    }
    let err =
        store.check_sync(&Request::new(&rule, "newcomer", 1).expect("valid request")).expect_err("full");
    assert_eq!(err.kind(), ErrorKind::CapacityExhausted);
    assert!(err.is_transient());
    assert!(err.to_string().contains("maximum of 8 keys"), "{err}");
    // Live state is never evicted: existing keys keep their counts.
    assert!(
        store.check_sync(&Request::new(&rule, "k0", 1).expect("valid request")).expect("existing").allowed
    );
    assert!(
        !store.check_sync(&Request::new(&rule, "k0", 1).expect("valid request")).expect("existing").allowed
    );
    // Once their windows pass, the space is reclaimed for new keys.
    clock.advance(Duration::from_secs(2));
    assert!(
        store
            .check_sync(&Request::new(&rule, "newcomer", 1).expect("valid request"))
            .expect("reclaimed")
            .allowed
    );
    assert_eq!(store.len(), 1, "expired keys were dropped");
}

/// A full store sweeps for expired keys at most once a second: a flood of
/// new keys is refused without scanning the whole shard every time, and
/// the space expired keys leave is reclaimed at the next sweep.
#[test]
fn a_full_store_sweeps_at_most_once_a_second() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).max_keys(8).shards(1).build();
    let short = Rule::new(5, Duration::from_millis(100)).expect("rule");
    let long = per_second(5);
    for i in 0..8 {
        let rule = if i < 4 { &short } else { &long };
        store.check_sync(&Request::new(rule, &format!("k{i}"), 1).expect("valid request")).expect("room");
    }
    let newcomer = |name: &str| store.check_sync(&Request::new(&long, name, 1).expect("valid request"));
    assert_eq!(newcomer("n0").expect_err("full").kind(), ErrorKind::CapacityExhausted);
    // The short keys have expired, but the last sweep was under a second ago.
    clock.advance(Duration::from_millis(150));
    assert_eq!(newcomer("n1").expect_err("not swept yet").kind(), ErrorKind::CapacityExhausted);
    assert_eq!(store.len(), 8);
    clock.advance(Duration::from_millis(850));
    assert!(newcomer("n2").expect("swept: room again").allowed);
}

#[test]
fn expired_state_is_reclaimed() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let rule = per_second(5);
    for i in 0..1000 {
        store
            .check_sync(&Request::new(&rule, &format!("user-{i}"), 1).expect("valid request"))
            .expect("check");
    }
    assert_eq!(store.len(), 1000);
    clock.advance(Duration::from_millis(999));
    store.purge_expired();
    assert_eq!(store.len(), 1000, "still inside the window");
    clock.advance(Duration::from_millis(1));
    store.purge_expired();
    assert!(store.is_empty());
}

/// A clock at the very end of time (a user's own `Clock`, a hand-set
/// `ManualClock`) never makes the store panic or wrap around: every
/// algorithm, with and without a penalty, decides without overflow.
/// A clock at the end of `u64` (past [`slidegate::limits::MAX_TIME_MS`]) is refused
/// with `InvalidTime`, never a panic or a decision; the pure algorithms,
/// public on their own, saturate there instead of overflowing.
#[test]
fn times_at_the_end_of_the_clock_are_errors_not_panics() {
    let penalty = slidegate::Penalty::new(Duration::from_secs(60))
        .and_then(|p| p.ban_after(2, Duration::from_secs(3600)))
        .expect("penalty");
    for end in [u64::MAX - 1000, u64::MAX - 1, u64::MAX] {
        let clock = ManualClock::new(end - 10);
        let store = MemoryStore::builder().clock(clock.clone()).build();
        for algorithm in every_algorithm() {
            let rule = Rule::new(3, slidegate::limits::MAX_WINDOW)
                .and_then(|r| r.with_algorithm(algorithm))
                .and_then(|r| r.with_penalty(penalty))
                .expect("rule");
            clock.set(end - 10);
            let mut state = slidegate::algorithm::State::new(&rule);
            for step in [0, 1, 5, 4] {
                clock.advance(Duration::from_millis(step));
                for cost in [1, 3] {
                    let err = store
                        .check_sync(&Request::new(&rule, "late", cost).expect("valid request"))
                        .expect_err("no decision so late");
                    assert_eq!(err.kind(), slidegate::ErrorKind::InvalidTime, "{rule}: {err}");
                    let err = store
                        .check_all_sync(&Dimensions::new(&[(&rule, "late")], cost).expect("valid dimensions"))
                        .expect_err("no decision so late");
                    assert_eq!(err.kind(), slidegate::ErrorKind::InvalidTime, "{rule}: {err}");
                    let d = state.check(&rule, slidegate::Clock::now_ms(&clock), cost);
                    assert!(d.remaining <= 3, "{rule}: {d:?}");
                }
            }
        }
    }
}

fn every_algorithm() -> [slidegate::Algorithm; 4] {
    [
        slidegate::Algorithm::SlidingLog,
        slidegate::Algorithm::SLIDING_COUNTER,
        slidegate::Algorithm::FixedWindow,
        slidegate::Algorithm::Gcra,
    ]
}

#[test]
fn threads_hammering_one_key_admit_exactly_the_limit() {
    let store = Arc::new(MemoryStore::builder().clock(ManualClock::new(5)).build());
    let rule = Rule::per_minute(NonZeroU32::new(1000).expect("1000 > 0"));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (store, rule) = (Arc::clone(&store), rule.clone());
            std::thread::spawn(move || {
                (0..500)
                    .filter(|_| {
                        store
                            .check_sync(&Request::new(&rule, "hot", 1).expect("valid request"))
                            .expect("check")
                            .allowed
                    })
                    .count()
            })
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().expect("thread")).sum();
    assert_eq!(admitted, 1000);
}

#[tokio::test]
async fn limiter_facade_checks_and_weights() {
    let limiter = Limiter::new(MemoryStore::builder().clock(ManualClock::new(0)).build());
    let rule = per_second(3);
    assert_eq!(limiter.check_n(&rule, "a", 2).await.expect("ok").remaining, 1);
    assert_eq!(limiter.check(&rule, "a").await.expect("ok").remaining, 0);
    let denied = limiter.check(&rule, "a").await.expect("ok");
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Duration::from_secs(1));
    let never = limiter.check_n(&rule, "a", 4).await.expect("cost > limit: a denial");
    assert_eq!((never.allowed, never.source), (false, slidegate::Source::CostAboveLimit));
    let err = limiter.check_n(&rule, "a", 0).await.expect_err("cost 0");
    assert_eq!(err.kind(), ErrorKind::InvalidCost);
    assert_eq!(limiter.clone().store().len(), 1);
}
