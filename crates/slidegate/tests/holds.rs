//! Reservations and leases through the limiter: what its failure policy,
//! shadow mode and switch answer when the store fails or is bypassed, and
//! that a held one is settled or given back where it is held (the store,
//! or the fallback store while the store fails).

mod support;

use std::time::Duration;

use slidegate::{ConcurrencyLimit, ErrorKind, FailurePolicy, Limiter, State};
use support::{ANSWER, FAIL, Remote, rule, setup};

fn streams() -> ConcurrencyLimit {
    ConcurrencyLimit::new("streams", 1, Duration::from_secs(30)).expect("limit")
}

#[tokio::test]
async fn held_in_the_store_settled_there() {
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    let tokens = rule(10);
    let held = limiter.reserve(&tokens, "acme", 8, Duration::from_secs(5)).await.expect("reserve");
    assert!(held.is_held() && held.is_admitted());
    assert_eq!(held.decision().remaining, 2);
    let refused = limiter.reserve(&tokens, "acme", 3, Duration::from_secs(5)).await.expect("reserve");
    assert!(!refused.is_admitted() && !refused.is_held());
    assert!(refused.commit(3).await.expect("commit").is_none(), "nothing held to commit");
    let id = held.detach();
    let after = limiter.commit(&tokens, "acme", &id, 5).await.expect("commit").expect("held");
    assert_eq!(after.remaining, 5, "3 given back");
    assert!(limiter.cancel(&tokens, "acme", &id).await.expect("cancel").is_none(), "settled once");

    let lease = limiter.acquire(&streams(), "acme").await.expect("acquire");
    assert!(lease.is_held());
    assert!(!limiter.acquire(&streams(), "acme").await.expect("acquire").is_admitted());
    drop(lease);
    // A dropped lease is given back in a task.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(limiter.acquire(&streams(), "acme").await.expect("acquire").is_held(), "given back on drop");
    assert!(remote.calls() > 0);
}

#[tokio::test]
async fn bad_reservations_are_errors() {
    let (limiter, _, _) = setup(FailurePolicy::FailClosed);
    let tokens = rule(10);
    let error = |e: slidegate::Error| e.kind();
    let ttl = Duration::from_secs(1);
    assert_eq!(
        limiter.reserve(&tokens, "a", 0, ttl).await.map(|_| ()).map_err(error),
        Err(ErrorKind::InvalidCost)
    );
    assert_eq!(
        limiter.reserve(&tokens, "a", 11, ttl).await.map(|_| ()).map_err(error),
        Err(ErrorKind::InvalidCost)
    );
    let zero = limiter.reserve(&tokens, "a", 1, Duration::ZERO).await;
    assert_eq!(zero.map(|_| ()).map_err(error), Err(ErrorKind::InvalidRule));
    assert_eq!(
        limiter.reserve(&tokens, "", 1, ttl).await.map(|_| ()).map_err(error),
        Err(ErrorKind::InvalidKey)
    );
    let penalty = slidegate::Penalty::new(Duration::from_secs(60))
        .and_then(|p| p.ban_after(3, Duration::from_secs(60)))
        .expect("penalty");
    let penalised = tokens.clone().with_penalty(penalty).expect("rule");
    let refused = limiter.reserve(&penalised, "a", 1, ttl).await;
    assert_eq!(refused.map(|_| ()).map_err(error), Err(ErrorKind::InvalidRule));
}

#[tokio::test]
async fn a_failed_store_answers_by_the_policy() {
    let tokens = rule(10);
    let ttl = Duration::from_secs(5);

    // Fallback: held in the fallback store, settled there.
    let (limiter, remote, _) = setup(FailurePolicy::Fallback);
    remote.set(FAIL);
    let held = limiter.reserve(&tokens, "acme", 8, ttl).await.expect("reserve");
    assert!(held.is_held());
    assert_eq!(held.decision().state, State::Degraded);
    let again = limiter.reserve(&tokens, "acme", 3, ttl).await.expect("reserve");
    assert!(!again.is_admitted(), "the fallback store holds the first");
    remote.set(ANSWER);
    let after = held.cancel().await.expect("cancel").expect("held in the fallback store");
    assert_eq!(after.remaining, 10);
    remote.set(FAIL);
    let lease = limiter.acquire(&streams(), "acme").await.expect("acquire");
    assert!(lease.is_held() && lease.decision().state == State::Degraded);
    remote.set(ANSWER);
    assert!(lease.release().await.expect("release"), "given back to the fallback store");

    // Fail open: admitted, nothing held.
    let (limiter, remote, _) = setup(FailurePolicy::FailOpen);
    remote.set(FAIL);
    let open = limiter.reserve(&tokens, "acme", 8, ttl).await.expect("reserve");
    assert!(open.is_admitted() && !open.is_held());
    assert!(open.commit(8).await.expect("commit").is_none());
    let lease = limiter.acquire(&streams(), "acme").await.expect("acquire");
    assert!(lease.is_admitted() && !lease.is_held());

    // Fail closed: refused; Fail: the store's error.
    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    remote.set(FAIL);
    assert!(!limiter.reserve(&tokens, "acme", 1, ttl).await.expect("reserve").is_admitted());
    assert!(!limiter.acquire(&streams(), "acme").await.expect("acquire").is_admitted());
    let (limiter, remote, _) = setup(FailurePolicy::Fail);
    remote.set(FAIL);
    assert!(limiter.reserve(&tokens, "acme", 1, ttl).await.expect_err("fails").is_store_failure());
    assert!(limiter.acquire(&streams(), "acme").await.expect_err("fails").is_store_failure());
}

#[tokio::test]
async fn shadow_mode_and_the_switch_admit_without_holding() {
    let tokens = rule(10);
    let ttl = Duration::from_secs(5);
    let shadow = Limiter::builder(Remote::new(&slidegate::ManualClock::new(0))).shadow(true).build();
    assert!(shadow.reserve(&tokens, "acme", 10, ttl).await.expect("reserve").is_held());
    let over = shadow.reserve(&tokens, "acme", 1, ttl).await.expect("reserve");
    assert!(over.is_admitted() && !over.is_held(), "shadow mode admits the refusal, holding nothing");
    assert_eq!(over.decision().source, slidegate::Source::Shadow);

    let (limiter, remote, _) = setup(FailurePolicy::FailClosed);
    limiter.set_enabled(false);
    let calls = remote.calls();
    let off = limiter.reserve(&tokens, "acme", 10, ttl).await.expect("reserve");
    assert!(off.is_admitted() && !off.is_held());
    assert_eq!(off.decision().state, State::Disabled);
    assert!(limiter.acquire(&streams(), "acme").await.expect("acquire").is_admitted());
    assert_eq!(remote.calls(), calls, "switched off: the store is not asked");
}

#[tokio::test]
async fn ids_settle_where_they_are_held_and_shadow_rules_admit() {
    let tokens = rule(10);
    let ttl = Duration::from_secs(5);
    // Made in the fallback store while the store failed: settled there by
    // id, after the store came back, as a lease is given back.
    let (limiter, remote, _) = setup(FailurePolicy::Fallback);
    remote.set(FAIL);
    let id = limiter.reserve(&tokens, "acme", 8, ttl).await.expect("reserve").detach();
    let lease = limiter.acquire(&streams(), "acme").await.expect("acquire").detach();
    remote.set(ANSWER);
    let settled =
        limiter.commit(&tokens, "acme", &id, 1).await.expect("commit").expect("held in the fallback");
    assert_eq!(settled.remaining, 9);
    assert!(limiter.cancel(&tokens, "acme", &id).await.expect("cancel").is_none(), "settled once");
    assert!(limiter.release(&streams(), "acme", &lease).await.expect("release"));
    assert!(!limiter.release(&streams(), "acme", &lease).await.expect("release"));
    // Neither holds it and the store fails: the store's error.
    remote.set(FAIL);
    let unknown = slidegate::LeaseId::random().expect("id");
    assert!(limiter.commit(&tokens, "acme", &unknown, 1).await.is_err());

    // A shadow rule's refusal is admitted, holding nothing.
    let (limiter, _, _) = setup(FailurePolicy::FailClosed);
    let shadow = rule(10).in_shadow(true);
    assert!(limiter.reserve(&shadow, "acme", 10, ttl).await.expect("reserve").is_held());
    let over = limiter.reserve(&shadow, "acme", 1, ttl).await.expect("reserve");
    assert!(over.is_admitted() && !over.is_held());
}
