//! Charges recorded whatever remains: the debt they leave, and checks
//! admitted again exactly when each algorithm says the debt is paid off.

use std::num::NonZeroU16;
use std::time::Duration;

use proptest::prelude::*;

use super::State;
use crate::{Algorithm, Rule};

fn rule(algorithm: Algorithm) -> Rule {
    Rule::new(1000, Duration::from_secs(60)).and_then(|r| r.with_algorithm(algorithm)).expect("a rule")
}

const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::SlidingLog,
    Algorithm::SlidingCounter { buckets: NonZeroU16::new(10).unwrap() },
    Algorithm::FixedWindow,
    Algorithm::Gcra,
];

/// Whether a request of weight 1 at `at` is admitted (on a copy: nothing
/// of `state` is charged).
fn admits(state: &State, rule: &Rule, at: u64) -> bool {
    state.clone().check(rule, at, 1).allowed
}

#[test]
fn a_budget_of_1000_charged_700_twice_is_400_in_debt_until_the_first_charge_leaves() {
    let rule = rule(Algorithm::SlidingLog);
    let mut state = State::new(&rule);
    let first = state.charge(&rule, 0, 700);
    assert_eq!(
        (first.allowed, first.remaining, first.debt, first.retry_after),
        (true, 300, 0, Duration::ZERO)
    );
    let second = state.charge(&rule, 10_000, 700);
    assert_eq!((second.allowed, second.remaining, second.debt), (true, 0, 400), "1,400 recorded");
    assert_eq!(second.retry_after, Duration::from_secs(50), "the first 700 leave at 60 s");
    assert!(!admits(&state, &rule, 59_999));
    assert!(admits(&state, &rule, 60_000), "700 counted then: 300 remain");
    let denied = state.check(&rule, 20_000, 1);
    assert_eq!((denied.allowed, denied.remaining, denied.debt), (false, 0, 0), "a check reports no debt");
}

#[test]
fn a_charge_takes_any_cost_and_zero_changes_nothing() {
    for algorithm in ALGORITHMS {
        let rule = rule(algorithm);
        let mut state = State::new(&rule);
        let nothing = state.charge(&rule, 5, 0);
        assert_eq!((nothing.remaining, nothing.debt), (1000, 0), "{algorithm:?}");
        assert!(admits(&state, &rule, 5), "{algorithm:?}");
        let huge = state.charge(&rule, 5, 5000);
        assert_eq!((huge.allowed, huge.remaining, huge.debt), (true, 0, 4000), "{algorithm:?}");
        assert!(!admits(&state, &rule, 5), "{algorithm:?}");
    }
}

#[test]
fn charges_past_what_one_entry_holds_leave_no_debt_behind_the_window() {
    for algorithm in [ALGORITHMS[0], ALGORITHMS[1]] {
        let rule = rule(algorithm);
        let mut state = State::new(&rule);
        state.charge(&rule, 0, u32::MAX);
        let again = state.charge(&rule, 0, u32::MAX);
        assert_eq!(again.debt, u32::MAX - 1000, "{algorithm:?}: one entry holds at most u32::MAX");
        assert!(admits(&state, &rule, 120_000), "{algorithm:?}: gone with the window");
    }
}

proptest! {
    /// After any charges, a request of weight 1 is admitted exactly
    /// `retry_after` after the last one, not a millisecond sooner, and the
    /// debt is what is counted beyond the limit; a charge is `allowed` when
    /// something was left before it.
    #[test]
    fn checks_are_admitted_again_exactly_when_the_charge_says(
        which in 0..4usize,
        charges in prop::collection::vec((0..20_000u64, 0..3000u32), 1..12),
    ) {
        let rule = rule(ALGORITHMS[which]);
        let mut state = State::new(&rule);
        let mut now = 0;
        for (gap, cost) in charges {
            now += gap;
            let had_room = admits(&state, &rule, now);
            let charged = state.charge(&rule, now, cost);
            prop_assert_eq!(charged.allowed, had_room, "allowed: something was left before");
            prop_assert!(charged.remaining == 0 || charged.debt == 0);
            let retry = u64::try_from(charged.retry_after.as_millis()).unwrap();
            prop_assert!(admits(&state, &rule, now + retry), "admitted at +{retry} ms: {charged:?}");
            if retry > 0 {
                prop_assert!(!admits(&state, &rule, now + retry - 1), "not sooner: {charged:?}");
                prop_assert_eq!(charged.remaining, 0);
            }
        }
    }
}
