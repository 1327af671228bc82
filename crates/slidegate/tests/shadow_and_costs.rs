//! Shadow rules, the `fail` failure policy and costs above a limit,
//! through the limiter's every entry point; the store double in `support`
//! stands in for a remote store (deny cache, breaker), the memory store for
//! a local one.

mod support;

use slidegate::{ErrorKind, FailurePolicy, Limiter, Source, State};
use support::{FAIL, rule, setup};

#[tokio::test]
async fn a_shadow_rule_admits_what_it_would_deny_and_charges_nothing() {
    let limiter = Limiter::in_memory();
    let trial = rule(2).in_shadow(true);
    for _ in 0..2 {
        assert_eq!(limiter.check(&trial, "k").await.unwrap().source, Source::Store);
    }
    let over = limiter.check(&trial, "k").await.unwrap();
    assert!(over.allowed, "{over:?}");
    assert_eq!((over.source, over.state, over.remaining), (Source::Shadow, State::Limited, 0));
    assert!(over.is_shadow_denial() && !over.retry_after.is_zero(), "the denial's numbers: {over:?}");
    // The same rule enforced shares the state: it was charged twice, not three times.
    let enforced = rule(2);
    assert!(!limiter.check(&enforced, "k").await.unwrap().allowed);
    assert_eq!(trial.in_shadow(false), enforced, "shadow is a switch on the same rule");
}

#[tokio::test]
async fn a_shadow_limiter_overrules_every_rule_and_counts_them() {
    let (store_limiter, remote, _) = setup(FailurePolicy::Fallback);
    drop(store_limiter);
    let limiter = Limiter::builder(remote.clone()).shadow(true).build();
    assert!(limiter.is_shadow());
    let r = rule(1);
    let decisions = [limiter.check(&r, "k").await.unwrap(), limiter.check(&r, "k").await.unwrap()];
    assert_eq!(decisions.map(|d| (d.allowed, d.source)), [(true, Source::Store), (true, Source::Shadow)]);
    let batch = limiter.check_batch(&[(&r, "k", 1), (&r, "other", 1)]).await;
    let sources: Vec<Source> = batch.into_iter().map(|d| d.unwrap().source).collect();
    assert_eq!(sources, [Source::Shadow, Source::Store]);
    assert!(remote.calls() >= 2, "the store decided");
}

#[tokio::test]
async fn a_request_denied_only_by_shadow_rules_is_charged_to_the_others() {
    for remote_store in [false, true] {
        let (remote_limiter, _, _) = setup(FailurePolicy::FailClosed);
        let local = Limiter::in_memory();
        let (shadow, enforced) = (rule(1).named("trial").unwrap().in_shadow(true), rule(5));
        let check = |dims: Vec<(&'static str, &'static str)>| {
            let (remote_limiter, local, shadow, enforced) =
                (remote_limiter.clone(), local.clone(), shadow.clone(), enforced.clone());
            async move {
                let rules: Vec<_> = dims
                    .iter()
                    .map(|(which, key)| {
                        (if *which == "shadow" { shadow.clone() } else { enforced.clone() }, *key)
                    })
                    .collect();
                let dims: Vec<_> = rules.iter().map(|(rule, key)| (rule, *key)).collect();
                if remote_store {
                    remote_limiter.check_all(&dims).await.unwrap()
                } else {
                    local.check_all(&dims).await.unwrap()
                }
            }
        };
        let first = check(vec![("shadow", "k"), ("enforced", "k")]).await;
        assert!(first.allowed && first.decisions[1].remaining == 4);
        // The shadow rule is spent: it is set aside, the enforced one charged.
        for expected in [3, 2] {
            let next = check(vec![("shadow", "k"), ("enforced", "k")]).await;
            assert!(next.allowed, "{next:?}");
            assert_eq!(next.decisions[0].source, Source::Shadow, "remote {remote_store}");
            assert_eq!(next.decisions[1].remaining, expected, "charged, remote {remote_store}");
        }
        // An enforced denial denies; the shadow rule's denial is reported as shadow.
        for _ in 0..2 {
            check(vec![("enforced", "k")]).await;
        }
        let denied = check(vec![("shadow", "k"), ("enforced", "k")]).await;
        assert!(!denied.allowed);
        assert_eq!(
            denied.decisions.iter().map(|d| d.source).collect::<Vec<_>>(),
            [Source::Shadow, Source::Store]
        );
    }
}

#[tokio::test]
async fn peeks_overrule_shadow_denials_too() {
    let limiter = Limiter::in_memory();
    let trial = rule(1).in_shadow(true);
    limiter.check(&trial, "k").await.unwrap();
    let peeked = limiter.peek_all_weighted(&[(&trial, "k", 1)]).await.unwrap();
    assert!(peeked.allowed && peeked.decisions[0].source == Source::Shadow, "{peeked:?}");
    assert!(limiter.check_all_now(&[(&trial, "k")], 1).is_none(), "shadow rules are not answered at once");
}

#[tokio::test]
async fn a_cost_above_the_limit_is_a_denial_on_every_entry_point() {
    let (limiter, remote, _) = setup(FailurePolicy::FailOpen);
    let (small, big) = (rule(2).named("small").unwrap(), rule(10));
    let single = limiter.check_n(&small, "k", 3).await.unwrap();
    assert_eq!((single.allowed, single.source, single.remaining), (false, Source::CostAboveLimit, 0));
    assert_eq!((single.retry_after, single.reset_after), (small.window(), small.window()));

    let multi = limiter.check_all_weighted(&[(&small, "k", 3), (&big, "k", 3)]).await.unwrap();
    assert!(!multi.allowed);
    assert_eq!(multi.denied_by(), Some(0));
    assert_eq!(multi.decisions[1].source, Source::CostAboveLimit, "the other was not asked");
    let same_cost = limiter.check_all_n(&[(&small, "k"), (&big, "k")], 3).await.unwrap();
    assert_eq!(same_cost.decisions[0].source, Source::CostAboveLimit);
    let peeked = limiter.peek_all_weighted(&[(&small, "k", 3), (&big, "k", 3)]).await.unwrap();
    assert!(!peeked.allowed && peeked.decisions[1].allowed && peeked.decisions[1].remaining == 10);
    assert_eq!(remote.calls(), 1, "only the peek of the other dimension reached the store");
    assert!(limiter.check_all_now(&[(&small, "k")], 3).is_none(), "answered by check_all_n");
    assert_eq!(limiter.check(&big, "k").await.unwrap().remaining, 9, "nothing was charged");

    // Input errors stay errors.
    let empty_key = limiter.check_all_weighted(&[(&small, "", 3)]).await.unwrap_err();
    assert_eq!(empty_key.kind(), ErrorKind::InvalidKey);
    let zero = limiter.check_all_weighted(&[(&small, "k", 0), (&big, "k", 30)]).await.unwrap_err();
    assert_eq!(zero.kind(), ErrorKind::InvalidCost);

    // In shadow mode it is overruled like any denial, and the others are charged.
    let trial = small.clone().in_shadow(true);
    let admitted = limiter.check_all_weighted(&[(&trial, "k", 3), (&big, "k", 3)]).await.unwrap();
    assert!(admitted.allowed, "{admitted:?}");
    assert_eq!(admitted.decisions[0].source, Source::Shadow);
    assert_eq!(admitted.decisions[1].remaining, 6, "charged 3");

    // Switched off, everything passes.
    limiter.set_enabled(false);
    assert_eq!(limiter.check_n(&small, "k", 3).await.unwrap().state, State::Disabled);
}

#[tokio::test]
async fn the_fail_policy_fails_every_entry_point_while_the_store_does() {
    let (limiter, remote, _) = setup(FailurePolicy::Fail);
    remote.set(FAIL);
    let r = rule(2);
    let error = limiter.check(&r, "k").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.is_transient() && error.to_string().contains("`fail`"), "{error}");
    let error = limiter.check_all(&[(&r, "k"), (&rule(3), "k")]).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    let error = limiter.peek_all_weighted(&[(&r, "k", 1)]).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    for result in limiter.check_batch(&[(&r, "a", 1), (&r, "b", 1)]).await {
        assert_eq!(result.unwrap_err().kind(), ErrorKind::Unavailable);
    }
    // The breaker is open now: the store is not called, the check still fails.
    let calls = remote.calls();
    assert_eq!(limiter.check(&r, "k").await.unwrap_err().kind(), ErrorKind::Unavailable);
    assert_eq!(remote.calls(), calls, "not called while the breaker is open");
    // Shadow mode overrules denials, not failures.
    let error = limiter.check(&r.in_shadow(true), "k").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    // Bad input is still the caller's error, and a cost above the limit a denial.
    assert_eq!(limiter.check(&rule(2), "").await.unwrap_err().kind(), ErrorKind::InvalidKey);
    assert_eq!(limiter.check_n(&rule(2), "k", 5).await.unwrap().source, Source::CostAboveLimit);
}
