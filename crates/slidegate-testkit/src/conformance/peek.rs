//! Peeks — the verdict a check would give, charging nothing and counting no
//! violation — and resets, which forget one key: the operator's tools, the
//! same in every store and algorithm.

use std::time::Duration;

use slidegate::store::Dimensions;
use slidegate::{Clock, ManualClock, MultiDecision, State, Store, WeightedDimension};

use super::helpers::{algorithms, ok, rule};
use super::penalties::escalating;

async fn peek<S: Store>(store: &S, dimensions: &[WeightedDimension<'_>]) -> MultiDecision {
    let dimensions = Dimensions::weighted(dimensions).unwrap_or_else(|e| panic!("dimensions: {e}"));
    store.peek_all(&dimensions).await.unwrap_or_else(|e| panic!("peek: {e}"))
}

/// A peek says what a check would, and changes nothing: the checks after
/// it see exactly what they would have seen without it.
pub async fn peeks_charge_nothing<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        clock.set((clock.now_ms() / 1000 + 1) * 1000);
        let r = rule(3, 1000, algorithm).named(&format!("peek-{}", algorithm.short_name())).expect("name");
        let fresh = peek(store, &[(&r, "k", 3)]).await;
        assert!(fresh.allowed, "{r}: an unknown key has its whole quota");
        assert_eq!(fresh.decisions[0].remaining, 3, "{r}");
        assert!(ok(store, &r, "k", 2).await.allowed, "{r}");
        for _ in 0..3 {
            let one = peek(store, &[(&r, "k", 1)]).await;
            assert!(one.allowed, "{r}");
            assert_eq!(one.decisions[0].remaining, 1, "{r}: what it admits now");
            let two = peek(store, &[(&r, "k", 2)]).await;
            assert!(!two.allowed, "{r}: 2 do not fit in 1");
            assert_eq!(two.decisions[0].state, State::Limited, "{r}");
        }
        let last = ok(store, &r, "k", 1).await;
        assert!(last.allowed && last.remaining == 0, "{r}: the peeks charged nothing");
        let denied = peek(store, &[(&r, "k", 1)]).await;
        let checked = ok(store, &r, "k", 1).await;
        assert!(!denied.allowed && !checked.allowed, "{r}");
        assert_eq!(denied.decisions[0].retry_after, checked.retry_after, "{r}: the same wait");
        clock.advance(Duration::from_secs(10));
    }
}

/// A peek over several dimensions (several Cluster slots) answers each,
/// and charges none even when all admit.
pub async fn peeks_of_many_dimensions<S: Store>(store: &S, clock: &ManualClock) {
    let a = rule(2, 1000, slidegate::Algorithm::SlidingLog).named("peek-many-a").expect("name");
    let b = rule(5, 1000, slidegate::Algorithm::Gcra).named("peek-many-b").expect("name");
    assert!(ok(store, &a, "k1", 2).await.allowed);
    let both = peek(store, &[(&a, "k1", 1), (&b, "k2", 5)]).await;
    assert_eq!(both.denied_by(), Some(0));
    assert!(both.decisions[1].allowed);
    assert_eq!(both.decisions[1].remaining, 5);
    let fits = peek(store, &[(&b, "k2", 5), (&b, "k3", 5)]).await;
    assert!(fits.allowed);
    assert_eq!(ok(store, &b, "k2", 5).await.remaining, 0, "nothing was charged to b");
    clock.advance(Duration::from_secs(10));
}

/// A peek at a penalised identity counts no violation: it reports the
/// violations so far, the warning they give and a ban in force.
pub async fn peeks_count_no_violation<S: Store>(store: &S, clock: &ManualClock) {
    let r = escalating(slidegate::Algorithm::SlidingLog);
    clock.set((clock.now_ms() / 1000 + 1) * 1000);
    for _ in 0..2 {
        assert!(ok(store, &r, "eve", 1).await.allowed);
    }
    let first = ok(store, &r, "eve", 1).await;
    assert_eq!((first.state, first.violations), (State::Limited, 1));
    for _ in 0..5 {
        let peeked = peek(store, &[(&r, "eve", 1)]).await;
        assert_eq!((peeked.decisions[0].state, peeked.decisions[0].violations), (State::Limited, 1));
    }
    assert_eq!(ok(store, &r, "eve", 1).await.violations, 2, "the peeks were no violations");
    clock.advance(Duration::from_secs(2));
    let warned = peek(store, &[(&r, "eve", 1)]).await;
    assert_eq!((warned.decisions[0].state, warned.decisions[0].violations), (State::Warned, 2));
    clock.advance(Duration::from_secs(20));
}

/// A reset forgets the charges, violations and ban of one rule and
/// identity, and nothing else.
pub async fn resets_forget_one_key<S: Store>(store: &S, clock: &ManualClock) {
    use slidegate::store::Request;
    for algorithm in algorithms(10) {
        clock.set((clock.now_ms() / 1000 + 1) * 1000);
        let r = rule(2, 1000, algorithm).named(&format!("reset-{}", algorithm.short_name())).expect("name");
        let request = |key| Request::new(&r, key, 1).expect("request");
        assert!(!store.reset(&request("k")).await.expect("reset"), "{r}: nothing kept yet");
        for key in ["k", "other"] {
            assert!(ok(store, &r, key, 2).await.allowed, "{r}");
        }
        assert!(store.reset(&request("k")).await.expect("reset"), "{r}");
        assert_eq!(ok(store, &r, "k", 2).await.remaining, 0, "{r}: a full quota again");
        assert!(!ok(store, &r, "other", 1).await.allowed, "{r}: other keys keep theirs");
    }
    let banned = escalating(slidegate::Algorithm::SlidingLog);
    clock.set((clock.now_ms() / 1000 + 1) * 1000);
    while ok(store, &banned, "mallory", 1).await.state != State::Banned {}
    assert!(store.reset(&Request::new(&banned, "mallory", 1).expect("request")).await.expect("reset"));
    let free = ok(store, &banned, "mallory", 1).await;
    assert_eq!(
        (free.allowed, free.state, free.violations),
        (true, State::Allowed, 0),
        "ban and violations gone"
    );
    clock.advance(Duration::from_secs(20));
}
