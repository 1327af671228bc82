//! Multi-dimension checks and batches — the same in every store.

use std::time::Duration;

use slidegate::{Algorithm, ErrorKind, ManualClock, Rule, State, Store};

use super::helpers::{check, check_all, check_batch, check_weighted, rule};

fn named(limit: u32, window_ms: u64, algorithm: Algorithm, name: &str) -> Rule {
    rule(limit, window_ms, algorithm).named(name).unwrap_or_else(|e| panic!("rule: {e}"))
}

/// All or nothing: admitted only if every dimension admits, then all are
/// charged; a denial charges none, and says which dimension denied.
pub async fn all_or_nothing<S: Store>(store: &S, clock: &ManualClock) {
    let global = named(3, 1000, Algorithm::SlidingLog, "dim-global");
    let per_user = named(2, 1000, Algorithm::SLIDING_COUNTER, "dim-user");
    let check = |user: &'static str| {
        let (global, per_user) = (&global, &per_user);
        async move {
            check_all(store, &[(global, "api"), (per_user, user)], 1).await.unwrap_or_else(|e| panic!("{e}"))
        }
    };
    assert!(check("alice").await.allowed);
    let second = check("alice").await;
    assert!(second.allowed);
    assert_eq!((second.decisions[0].remaining, second.decisions[1].remaining), (1, 0));

    let third = check("alice").await;
    assert!(!third.allowed);
    assert_eq!(third.denied_by(), Some(1), "the per-user rule denied");
    assert_eq!(third.decisions[1].state, State::Limited);
    assert!(third.decisions[0].allowed, "the global rule had room");
    assert_eq!(third.decisions[0].remaining, 1, "and was not charged");

    assert!(check("bob").await.allowed, "bob takes the last global unit");
    let bob = check("bob").await;
    assert_eq!(bob.denied_by(), Some(0), "now the global rule denies");
    assert_eq!(bob.decisions[1].remaining, 1, "bob's own quota was not charged");
    assert!(bob.retry_after() > Duration::ZERO);

    clock.advance(Duration::from_millis(1000));
    assert!(check("bob").await.allowed, "the window passed");
    clock.advance(Duration::from_secs(10));
}

/// Weighted multi-dimension checks charge the cost to every dimension.
pub async fn weighted_dimensions<S: Store>(store: &S, clock: &ManualClock) {
    let a = named(10, 1000, Algorithm::Gcra, "dim-a");
    let b = named(6, 1000, Algorithm::FixedWindow, "dim-b");
    use slidegate::Clock;
    clock.set((clock.now_ms() / 1000 + 1) * 1000);
    let first = check_all(store, &[(&a, "k"), (&b, "k")], 4).await.expect("check");
    assert!(first.allowed);
    assert_eq!((first.decisions[0].remaining, first.decisions[1].remaining), (6, 2));
    let second = check_all(store, &[(&a, "k"), (&b, "k")], 4).await.expect("check");
    assert_eq!(second.denied_by(), Some(1));
    assert_eq!(check(store, &a, "k", 6).await.expect("check").remaining, 0, "a was charged 4, not 8");
    clock.advance(Duration::from_secs(10));
}

/// Each dimension charged its own cost (an Envoy request's descriptors
/// weigh what their `hits_addend` says): all or nothing, per dimension.
/// The keys differ, so in a Cluster the dimensions lie in several slots
/// and a denial takes the other slots' reservations back at their cost.
pub async fn each_dimension_its_own_cost<S: Store>(store: &S, clock: &ManualClock) {
    let a = named(10, 1000, Algorithm::SlidingLog, "own-a");
    let b = named(6, 1000, Algorithm::SLIDING_COUNTER, "own-b");
    let c = named(5, 1000, Algorithm::Gcra, "own-c");
    let remaining =
        |m: &slidegate::MultiDecision| m.decisions.iter().map(|d| d.remaining).collect::<Vec<_>>();
    let first = check_weighted(store, &[(&a, "k1", 3), (&b, "k2", 5), (&c, "k3", 1)]).await.expect("check");
    assert!(first.allowed);
    assert_eq!(remaining(&first), [7, 1, 4]);
    let second = check_weighted(store, &[(&a, "k1", 3), (&b, "k2", 2), (&c, "k3", 1)]).await.expect("check");
    assert_eq!(second.denied_by(), Some(1), "b has 1 left, the request weighs 2 there");
    assert_eq!((remaining(&second)[0], remaining(&second)[2]), (7, 4), "a and c were not charged");
    assert_eq!(check(store, &a, "k1", 7).await.expect("check").remaining, 0, "a was charged 3 in all");
    assert!(check(store, &c, "k3", 4).await.expect("check").allowed, "c was charged 1 in all");
    let err = check_weighted(store, &[(&a, "k1", 1), (&b, "k2", 7)]).await.expect_err("7 above b's limit");
    assert_eq!(err.kind(), ErrorKind::InvalidCost);
    clock.advance(Duration::from_secs(10));
}

/// Invalid multi-dimension input is refused when the dimensions are built
/// (a store never sees it), and charges nothing.
pub async fn bad_dimensions_are_errors<S: Store>(store: &S) {
    let a = named(1, 1000, Algorithm::SlidingLog, "dim-bad");
    let err = check_all(store, &[], 1).await.expect_err("no dimensions");
    assert_eq!(err.kind(), ErrorKind::InvalidKey);
    let err = check_all(store, &[(&a, "k"), (&a, "k")], 1).await.expect_err("repeated dimension");
    assert_eq!(err.kind(), ErrorKind::InvalidKey);
    let err = check_all(store, &[(&a, "k"), (&a, "")], 1).await.expect_err("empty key");
    assert_eq!(err.kind(), ErrorKind::InvalidKey);
    let err = check_all(store, &[(&a, "k")], 2).await.expect_err("cost above a limit");
    assert_eq!(err.kind(), ErrorKind::InvalidCost);
    assert!(check(store, &a, "k", 1).await.expect("check").allowed, "nothing was charged");
}

/// A batch answers in input order, as the same checks one by one would;
/// an invalid item gets its own error and the others are decided.
pub async fn batch_in_order<S: Store>(store: &S, clock: &ManualClock) {
    let r = named(2, 1000, Algorithm::SlidingLog, "batch");
    let requests =
        [(&r, "a", 1), (&r, "a", 1), (&r, "a", 1), (&r, "b", 2), (&r, "", 1), (&r, "b", 3), (&r, "a", 1)];
    let results = check_batch(store, &requests).await;
    assert_eq!(results.len(), requests.len());
    let summary: Vec<Result<bool, ErrorKind>> =
        results.iter().map(|r| r.as_ref().map(|d| d.allowed).map_err(|e| e.kind())).collect();
    assert_eq!(
        summary,
        [
            Ok(true),
            Ok(true),
            Ok(false),
            Ok(true),
            Err(ErrorKind::InvalidKey),
            Err(ErrorKind::InvalidCost),
            Ok(false)
        ]
    );
    assert_eq!(check_batch(store, &[]).await.len(), 0);
    clock.advance(Duration::from_secs(10));
}
