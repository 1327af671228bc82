//! Reservations ([`Store::reserve`], [`Store::settle`]): an estimate
//! admitted only if it fits, held, and settled at the real cost — less
//! given back, more recorded as debt — or left to its ttl, which commits
//! it at the estimate. The same in every store.

use std::time::Duration;

use slidegate::store::{ReservationRequest, Store};
use slidegate::{Algorithm, Clock, LeaseId, ManualClock};

use super::helpers::{algorithms, check, rule};

fn ids(n: usize) -> Vec<LeaseId> {
    (0..n).map(|_| LeaseId::random().expect("randomness")).collect()
}

/// Moves the clock to the start of the next minute: every algorithm's
/// case starts in a fresh fixed window of a minute.
fn next_minute(clock: &ManualClock) {
    clock.advance(Duration::from_millis(60_000 - clock.now_ms() % 60_000));
}

/// Two reservations fill the rule; a third does not fit; settling the
/// first below its estimate gives the rest back (GCRA only while nothing
/// else charged its bucket since), cancelling gives all back, settling
/// above records a debt; a reservation is settled once.
pub async fn reserve_commit_cancel<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        next_minute(clock);
        let tokens = rule(10, 60_000, algorithm).named("tokens").expect("rule");
        let ids = ids(4);
        let held = |i: usize| ReservationRequest::new(&tokens, "acme", &ids[i]).expect("reservation");
        let first = store.reserve(&held(0), 6, 30_000).await.expect("reserve");
        assert_eq!((first.allowed, first.remaining), (true, 4), "{algorithm:?}");
        let refused = store.reserve(&held(1), 6, 30_000).await.expect("reserve");
        assert_eq!((refused.allowed, refused.remaining), (false, 4), "{algorithm:?}: 6 do not fit in 4");
        let second = store.reserve(&held(2), 4, 30_000).await.expect("reserve");
        assert_eq!((second.allowed, second.remaining), (true, 0), "{algorithm:?}");
        assert!(store.settle(&held(1), 0).await.expect("settle").is_none(), "a refused one is not held");

        // The first at 2 of its 6: 4 come back — but GCRA's bucket was
        // charged since (the second reservation), so it keeps them.
        let committed = store.settle(&held(0), 2).await.expect("settle").expect("held");
        let given = if algorithm == Algorithm::Gcra { 0 } else { 4 };
        assert_eq!((committed.remaining, committed.debt), (given, 0), "{algorithm:?}");
        assert!(store.settle(&held(0), 2).await.expect("settle").is_none(), "settled once");
        // The second, cancelled: all 4 back (for GCRA too: the last charge).
        let cancelled = store.settle(&held(2), 0).await.expect("settle").expect("held");
        assert_eq!(cancelled.remaining, given + 4, "{algorithm:?}");
        // Above its estimate: the rest recorded whatever remains.
        let over = store.reserve(&held(3), 1, 30_000).await.expect("reserve");
        assert!(over.allowed, "{algorithm:?}");
        let debt = store.settle(&held(3), 20).await.expect("settle").expect("held");
        let used = 10 - given - 4 + 20;
        assert_eq!((debt.allowed, debt.remaining, debt.debt), (true, 0, used - 10), "{algorithm:?}");
        assert!(debt.retry_after > Duration::ZERO, "{algorithm:?}: in debt");
        let after = check(store, &tokens, "acme", 1).await.expect("check");
        assert!(!after.allowed, "{algorithm:?}: the debt denies");
    }
    next_minute(clock);
}

/// A reservation neither committed nor cancelled within its ttl is
/// committed at its estimate: the charge stays, and settling it finds
/// nothing held. One settled in time gives back exactly.
pub async fn ttl_commits_at_the_estimate<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in
        [Algorithm::SlidingLog, Algorithm::SlidingCounter { buckets: 60.try_into().expect("60") }]
    {
        next_minute(clock);
        let tokens = rule(100, 60_000, algorithm).named("tokens").expect("rule");
        let ids = ids(2);
        let held = |i: usize| ReservationRequest::new(&tokens, "acme", &ids[i]).expect("reservation");
        assert!(store.reserve(&held(0), 30, 2_000).await.expect("reserve").allowed);
        assert!(store.reserve(&held(1), 20, 5_000).await.expect("reserve").allowed);
        clock.advance(Duration::from_millis(1_999));
        let in_time = store.settle(&held(0), 10).await.expect("settle").expect("held 1 ms before its ttl");
        assert_eq!(in_time.remaining, 100 - 10 - 20, "{algorithm:?}");
        clock.advance(Duration::from_millis(3_001));
        assert!(store.settle(&held(1), 0).await.expect("settle").is_none(), "{algorithm:?}: its ttl passed");
        let now = check(store, &tokens, "acme", 1).await.expect("check");
        assert_eq!(now.remaining, 100 - 10 - 20 - 1, "{algorithm:?}: committed at its estimate");
        // Another identity's reservation is another's: its id does nothing here.
        let other = ReservationRequest::new(&tokens, "other", &ids[1]).expect("reservation");
        assert!(store.settle(&other, 0).await.expect("settle").is_none());
    }
    next_minute(clock);
}

/// Settled in the reverse order: the later reservation cancelled first
/// leaves the bucket as the earlier one's charge left it, so every
/// algorithm — GCRA too — gives the earlier one's rest back.
pub async fn settled_last_in_first_out<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        next_minute(clock);
        let tokens = rule(10, 60_000, algorithm).named("lifo").expect("rule");
        let ids = ids(2);
        let held = |i: usize| ReservationRequest::new(&tokens, "acme", &ids[i]).expect("reservation");
        assert!(store.reserve(&held(0), 6, 30_000).await.expect("reserve").allowed);
        assert!(store.reserve(&held(1), 4, 30_000).await.expect("reserve").allowed);
        let cancelled = store.settle(&held(1), 0).await.expect("settle").expect("held");
        assert_eq!(cancelled.remaining, 4, "{algorithm:?}");
        let committed = store.settle(&held(0), 2).await.expect("settle").expect("held");
        assert_eq!(committed.remaining, 8, "{algorithm:?}");
    }
    next_minute(clock);
}
