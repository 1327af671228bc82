//! Budgets among other rules through the limiter's one pipeline: a budget
//! records its cost exactly once whatever the other dimensions decide —
//! a shadow rule denying (the rest decided again), a weight above another
//! rule's limit (answered without the store).

use std::num::NonZeroU32;

use slidegate::{Limiter, MemoryStore, Rule};

fn rule(limit: u32, name: &str) -> Rule {
    Rule::per_minute(NonZeroU32::new(limit).unwrap()).named(name).unwrap()
}

/// What is left of the budget `rule` for `key` (a peek).
async fn left(limiter: &Limiter<MemoryStore>, rule: &Rule, key: &str) -> u32 {
    limiter.peek_all_weighted(&[(rule, key, 1)]).await.unwrap().decisions[0].remaining
}

#[tokio::test]
async fn a_budget_beside_a_denying_shadow_rule_is_recorded_once() {
    let limiter = Limiter::builder(MemoryStore::new()).shadow(true).build();
    let (requests, tokens) = (rule(1, "requests"), rule(100, "tokens").budget());
    limiter.check(&requests, "k").await.unwrap();
    let multi = limiter.check_all_weighted(&[(&requests, "k", 1), (&tokens, "k", 5)]).await.unwrap();
    assert!(multi.allowed, "shadow mode admits");
    assert_eq!(left(&limiter, &tokens, "k").await, 95, "5 recorded once, not twice");

    let shadow_rule = rule(1, "trial").in_shadow(true);
    let plain = Limiter::in_memory();
    plain.check(&shadow_rule, "k").await.unwrap();
    plain.check_all_weighted(&[(&shadow_rule, "k", 1), (&tokens, "k", 7)]).await.unwrap();
    assert_eq!(left(&plain, &tokens, "k").await, 93, "a shadow rule's denial: 7 recorded once");
}

#[tokio::test]
async fn a_budget_beside_a_weight_above_a_limit_is_recorded() {
    let limiter = Limiter::in_memory();
    let (requests, tokens) = (rule(2, "requests"), rule(100, "tokens").budget());
    let multi = limiter.check_all_weighted(&[(&requests, "k", 5), (&tokens, "k", 30)]).await.unwrap();
    assert!(!multi.allowed, "5 can never fit a limit of 2");
    assert_eq!(left(&limiter, &tokens, "k").await, 70, "the budget's 30 recorded anyway");
    assert_eq!(left(&limiter, &requests, "k").await, 2, "the other rule charged nothing");
}
