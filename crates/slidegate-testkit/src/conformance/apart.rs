//! The state of different rules never meets: rules that differ only in
//! algorithm keep their own violations and bans, and a rule *named* like
//! an unnamed rule's derived state name keeps its own budget.

use std::time::Duration;

use slidegate::{ManualClock, Penalty, Rule, State, Store};

use super::helpers::{algorithms, ok, rule};

fn banning() -> Penalty {
    Penalty::new(Duration::from_secs(10))
        .and_then(|p| p.ban_after(2, Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("penalty: {e}"))
}

/// For every pair of algorithms, two unnamed 1-per-second rules with the
/// same penalty (and then two named alike): banning the identity under the
/// first leaves it free under the second.
pub async fn penalties_apart_by_algorithm<S: Store>(store: &S, clock: &ManualClock) {
    let all = algorithms(10);
    for (i, &first) in all.iter().enumerate() {
        for &second in all.iter().filter(|&&a| a != first) {
            for name in [None, Some("shared")] {
                let make = |algorithm| {
                    let rule = rule(1, 1000, algorithm).with_penalty(banning());
                    let rule = match name {
                        Some(name) => rule.and_then(|r| r.named(name)),
                        None => rule,
                    };
                    rule.unwrap_or_else(|e| panic!("rule: {e}"))
                };
                let (a, b) = (make(first), make(second));
                let key = format!("apart-{i}-{}-{}", second.short_name(), name.is_some());
                assert!(ok(store, &a, &key, 1).await.allowed, "{a}");
                assert_eq!(ok(store, &a, &key, 1).await.state, State::Limited, "{a}");
                assert_eq!(ok(store, &a, &key, 1).await.state, State::Banned, "{a}");
                let other = ok(store, &b, &key, 1).await;
                assert_eq!(
                    (other.allowed, other.state, other.violations),
                    (true, State::Allowed, 0),
                    "{b} after a ban under {a}"
                );
                assert_eq!(ok(store, &b, &key, 1).await.violations, 1, "{b}: its own first violation");
            }
        }
        clock.advance(Duration::from_secs(30));
    }
}

/// A rule named `2-60000` (what an unnamed rule of 2 per minute was once
/// keyed by) and the unnamed rule each get their own 2 per minute.
pub async fn chosen_names_never_meet_derived_ones<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        let unnamed = rule(2, 60_000, algorithm);
        let derived = unnamed.state_name().into_owned();
        let mut look_alikes: Vec<Rule> =
            vec![unnamed.clone().named("2-60000").unwrap_or_else(|e| panic!("{e}"))];
        // Whatever the derived name is, no chosen name can spell it.
        if let Ok(same) = unnamed.clone().named(&derived) {
            look_alikes.push(same);
        }
        assert_eq!(ok(store, &unnamed, "twin", 2).await.remaining, 0, "{unnamed}");
        for named in &look_alikes {
            let d = ok(store, named, "twin", 2).await;
            assert!(d.allowed, "{named} shares the state of {unnamed} ({derived})");
            assert_ne!(named.state_name(), derived);
        }
        clock.advance(Duration::from_secs(120));
    }
}
