//! Memory store behaviour beyond the conformance suite: capacity, reclaim,
//! concurrency.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

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
        assert!(store.check_sync(&rule, &format!("k{i}"), 1).expect("room").allowed);
    }
    let err = store.check_sync(&rule, "newcomer", 1).expect_err("full");
    assert_eq!(err.kind(), ErrorKind::CapacityExhausted);
    assert!(err.is_transient());
    assert!(err.to_string().contains("maximum of 8 keys"), "{err}");
    // Live state is never evicted: existing keys keep their counts.
    assert!(store.check_sync(&rule, "k0", 1).expect("existing").allowed);
    assert!(!store.check_sync(&rule, "k0", 1).expect("existing").allowed);
    // Once their windows pass, the space is reclaimed for new keys.
    clock.advance(Duration::from_secs(2));
    assert!(store.check_sync(&rule, "newcomer", 1).expect("reclaimed").allowed);
    assert_eq!(store.len(), 1, "expired keys were dropped");
}

#[test]
fn expired_state_is_reclaimed() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let rule = per_second(5);
    for i in 0..1000 {
        store.check_sync(&rule, &format!("user-{i}"), 1).expect("check");
    }
    assert_eq!(store.len(), 1000);
    clock.advance(Duration::from_millis(999));
    store.purge_expired();
    assert_eq!(store.len(), 1000, "still inside the window");
    clock.advance(Duration::from_millis(1));
    store.purge_expired();
    assert!(store.is_empty());
}

#[test]
fn threads_hammering_one_key_admit_exactly_the_limit() {
    let store = Arc::new(MemoryStore::builder().clock(ManualClock::new(5)).build());
    let rule = Rule::per_minute(NonZeroU32::new(1000).expect("1000 > 0"));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (store, rule) = (Arc::clone(&store), rule.clone());
            std::thread::spawn(move || {
                (0..500).filter(|_| store.check_sync(&rule, "hot", 1).expect("check").allowed).count()
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
    let err = limiter.check_n(&rule, "a", 4).await.expect_err("cost > limit");
    assert_eq!(err.kind(), ErrorKind::InvalidCost);
    assert_eq!(limiter.clone().store().len(), 1);
}
