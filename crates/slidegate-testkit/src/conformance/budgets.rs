//! Budgets ([`Rule::budget`]): every cost recorded whatever remains, into
//! debt, and checks admitted again exactly when the debt has left the
//! window — the same in every store.

use std::time::Duration;

use slidegate::store::Dimensions;
use slidegate::{Algorithm, ManualClock, Rule, State, Store};

use super::helpers::{algorithms, check, check_weighted, rule};

fn budget(limit: u32, window_ms: u64, algorithm: Algorithm, name: &str) -> Rule {
    rule(limit, window_ms, algorithm).named(name).unwrap_or_else(|e| panic!("rule: {e}")).budget()
}

/// The issue's example on the exact log: a budget of 1,000 per window,
/// two responses of 700: both land (1,400 recorded, 400 in debt), the next
/// request is denied, and it is admitted exactly when the first 700 leave.
pub async fn charges_land_past_the_limit<S: Store>(store: &S, clock: &ManualClock) {
    let tokens = budget(1000, 60_000, Algorithm::SlidingLog, "tokens");
    let first = check(store, &tokens, "tenant", 700).await.expect("charge");
    assert_eq!((first.allowed, first.remaining, first.debt), (true, 300, 0));
    clock.advance(Duration::from_secs(10));
    let second = check(store, &tokens, "tenant", 700).await.expect("charge");
    assert_eq!((second.allowed, second.remaining, second.debt), (true, 0, 400), "1,400 recorded");
    assert_eq!(second.retry_after, Duration::from_secs(50), "until the first 700 leave");
    // A check of 0 and a peek record nothing and say the budget is exhausted.
    let zero = check(store, &tokens, "tenant", 0).await.expect("check of 0");
    assert_eq!((zero.allowed, zero.state, zero.debt), (false, State::Limited, 400));
    assert_eq!(zero.retry_after, Duration::from_secs(50));
    let dims = Dimensions::weighted(&[(&tokens, "tenant", 300)]).expect("dimensions");
    let peek = store.peek_all(&dims).await.expect("peek").decisions[0];
    assert_eq!(
        (peek.allowed, peek.remaining, peek.debt, peek.retry_after),
        (false, 0, 400, zero.retry_after)
    );
    // A denied budget request is recorded too: its cost was spent.
    let denied = check(store, &tokens, "tenant", 100).await.expect("charge");
    assert_eq!((denied.allowed, denied.debt), (false, 500));
    // The same state as an ordinary rule is in debt too.
    let plain = rule(1000, 60_000, Algorithm::SlidingLog).named("tokens").expect("rule");
    let ordinary = check(store, &plain, "tenant", 1).await.expect("check");
    assert_eq!((ordinary.allowed, ordinary.debt, ordinary.retry_after), (false, 0, Duration::from_secs(50)));
    clock.advance(Duration::from_millis(49_999));
    assert!(!check(store, &tokens, "tenant", 0).await.expect("peek").allowed, "not a millisecond sooner");
    clock.advance(Duration::from_millis(1));
    let again = check(store, &tokens, "tenant", 5000).await.expect("charge");
    assert!(again.allowed, "700 + 100 counted then: 200 remain, and a cost above the limit is taken");
    assert_eq!((again.remaining, again.debt), (0, 4800));
    clock.advance(Duration::from_secs(120));
}

/// Every algorithm: a charge past the limit denies until `retry_after`,
/// exactly, by the algorithm's own arithmetic; other keys are untouched.
pub async fn debt_is_paid_off_when_retry_after_says<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        let spend = budget(10, 1000, algorithm, "spend");
        let charged = check(store, &spend, "a", 25).await.expect("charge");
        assert_eq!((charged.allowed, charged.remaining, charged.debt), (true, 0, 15), "{algorithm:?}");
        assert!(charged.retry_after > Duration::ZERO, "{algorithm:?}");
        let wait = u64::try_from(charged.retry_after.as_millis()).expect("ms");
        clock.advance(Duration::from_millis(wait - 1));
        assert!(!check(store, &spend, "a", 0).await.expect("peek").allowed, "{algorithm:?}: not sooner");
        clock.advance(Duration::from_millis(1));
        assert!(check(store, &spend, "a", 1).await.expect("check").allowed, "{algorithm:?}: at retry_after");
        assert_eq!(check(store, &spend, "b", 0).await.expect("peek").remaining, 10, "{algorithm:?}: b apart");
        clock.advance(Duration::from_secs(30));
    }
}

/// In a multi-dimension request a budget admits while something remains
/// and records its cost whatever the others decide; ordinary dimensions
/// stay all or nothing (on a Cluster, a budget's charge is never released).
pub async fn budgets_among_dimensions<S: Store>(store: &S, clock: &ManualClock) {
    let tokens = budget(100, 1000, Algorithm::SlidingLog, "dim-tokens");
    let requests = rule(1, 1000, Algorithm::SlidingLog).named("dim-requests").expect("rule");
    let both = |cost| {
        let (tokens, requests) = (&tokens, &requests);
        async move {
            // Two identities: on a Cluster, two slots (reserved apart).
            check_weighted(store, &[(tokens, "t", cost), (requests, "r", 1)]).await.expect("check")
        }
    };
    let first = both(150).await;
    assert!(first.allowed);
    assert_eq!((first.decisions[0].debt, first.decisions[1].remaining), (50, 0));
    let second = both(10).await;
    assert_eq!(second.denied_by(), Some(0), "the budget is exhausted");
    assert_eq!(second.decisions[0].debt, 60, "and still records its cost");
    clock.advance(Duration::from_millis(1000));
    let third = both(20).await;
    assert!(third.allowed, "both windows passed");
    assert_eq!(third.decisions[0].remaining, 80);
    clock.advance(Duration::from_millis(500));
    let fourth = both(5).await;
    assert_eq!(fourth.denied_by(), Some(1), "the request rule denies");
    assert_eq!(fourth.decisions[0].remaining, 75, "the budget records its cost anyway");
    clock.advance(Duration::from_secs(10));
}
