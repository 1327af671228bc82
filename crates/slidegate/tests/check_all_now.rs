//! The twin of [`Limiter::check_all_now`], the synchronous answer without
//! the store: whenever it answers, `check_all_n` answers the same for the
//! same request at the same moment.
//!
//! Random histories are fed to a limiter that asks `check_all_now` first
//! and calls `check_all_n` only when it answers `None` (as the tower layer
//! does): checks of one to three dimensions — rules with and without a
//! penalty, a shadow rule, costs of 0 to above every limit, invalid keys
//! and repeated dimensions — time passing on a manual clock, limiting
//! switched off and on, and (in half of the cases) adaptive limits scaled
//! down and up by the load. Its store is remote-like, so the deny cache
//! applies. Answers are compared whole: each dimension's decision
//! (allowed, state, limit, remaining, retry and reset times, source), or
//! the error's kind and message; a fast answer must have asked nothing of
//! the store.
//!
//! A second limiter, on a store of its own and the same load, gets the
//! same history through `check_all_n` alone, and every answer of the two
//! must be equal: `check_all_now` also changes nothing that a later answer
//! depends on — the deny cache, the charges, and the moments the adaptive
//! limits evaluate the load (an invalid request or a cost above a limit
//! takes no evaluation on either path).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use slidegate::adaptive::{AdaptiveConfig, Load, Signals};
use slidegate::{Error, Limiter, ManualClock, MultiDecision, Penalty, Rule, Source, State};
use support::Remote;

/// A load source set by hand.
#[derive(Debug, Clone, Default)]
struct Scripted(Arc<Mutex<Load>>);

impl Signals for Scripted {
    fn sample(&self) -> Load {
        *self.0.lock().unwrap()
    }
}

/// One event of a history.
#[derive(Debug, Clone)]
enum Step {
    /// A multi-dimension check: `(rule, key)` indices, and the cost.
    Check(Vec<(usize, usize)>, u32),
    /// Time passes (milliseconds).
    Advance(u64),
    /// Limiting switched on or off.
    Enable(bool),
    /// The machine is loaded (adaptive limits go down) or not (back up).
    Hot(bool),
}

const KEYS: [&str; 4] = ["a", "b", "c", ""];

fn rules() -> Vec<Rule> {
    let penalty = Penalty::new(Duration::from_secs(5))
        .and_then(|p| p.warn_after(1))
        .and_then(|p| p.ban_after(2, Duration::from_secs(2)))
        .expect("a penalty");
    vec![
        support::rule(3),
        support::rule(1).named("one").expect("a name"),
        Rule::new(5, Duration::from_secs(2)).and_then(|r| r.with_penalty(penalty)).expect("a rule"),
        Rule::new(2, Duration::from_millis(500)).and_then(|r| r.named("short")).expect("a rule"),
        support::rule(4).named("trial").expect("a name").in_shadow(true),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    // Mostly valid requests for few keys, so that denials repeat.
    let rule = prop::sample::select(vec![0usize, 0, 1, 1, 1, 2, 3, 4]);
    let key = prop::sample::select(vec![0usize, 0, 0, 1, 1, 2, 3]);
    let cost = prop::sample::select(vec![0u32, 1, 1, 1, 1, 2, 3, 4, 6]);
    prop_oneof![
        10 => (prop::collection::vec((rule, key), 1..=3), cost)
            .prop_map(|(dimensions, cost)| Step::Check(dimensions, cost)),
        3 => (0u64..=400).prop_map(Step::Advance),
        1 => prop::bool::weighted(0.6).prop_map(Step::Enable),
        1 => any::<bool>().prop_map(Step::Hot),
    ]
}

/// A limiter on a store of its own, at `clock`'s time.
fn limiter(clock: &ManualClock, adaptive: Option<&Scripted>) -> (Limiter<Remote>, Remote) {
    let remote = Remote::new(clock);
    let builder = Limiter::builder(remote.clone()).clock(clock.clone());
    let builder = match adaptive {
        Some(signals) => {
            let config = AdaptiveConfig::builder()
                .decrease(0.5)
                .interval(Duration::from_millis(300))
                .build()
                .expect("an adaptive config");
            builder.adaptive(config).adaptive_signals(signals.clone())
        }
        None => builder,
    };
    (builder.build(), remote)
}

/// An answer in a form that compares whole (errors by kind and message).
fn whole(answer: Result<MultiDecision, Error>) -> Result<MultiDecision, String> {
    answer.map_err(|error| format!("{:?}: {error}", error.kind()))
}

/// Which fast answers the runs gave, so that the property is seen to have
/// been put to the test.
#[derive(Debug, Default)]
struct Seen {
    deny_cache: u64,
    disabled: u64,
    adaptive: u64,
    errors: u64,
}

impl Seen {
    fn count(&mut self, answer: &Result<MultiDecision, Error>) {
        match answer {
            Err(_) => self.errors += 1,
            Ok(multi) => {
                let has = |source| multi.decisions.iter().any(|d| d.source == source);
                self.deny_cache += u64::from(has(Source::DenyCache));
                self.adaptive += u64::from(has(Source::AdaptiveLimit));
                self.disabled += u64::from(multi.decisions.iter().any(|d| d.state == State::Disabled));
            }
        }
    }
}

async fn run(history: &[Step], adaptive: bool, seen: &Mutex<Seen>) -> Result<(), TestCaseError> {
    let rules = rules();
    let clock = ManualClock::new(1_000_000);
    let signals = Scripted::default();
    let signals = adaptive.then_some(&signals);
    let (fast, fast_store) = limiter(&clock, signals);
    let general = limiter(&clock, signals).0;
    for (i, step) in history.iter().enumerate() {
        let dimensions: Vec<(&Rule, &str)> = match step {
            Step::Check(dimensions, _) => dimensions.iter().map(|&(r, k)| (&rules[r], KEYS[k])).collect(),
            Step::Advance(ms) => {
                clock.advance(Duration::from_millis(*ms));
                continue;
            }
            Step::Enable(on) => {
                fast.set_enabled(*on);
                general.set_enabled(*on);
                continue;
            }
            Step::Hot(hot) => {
                let cpu = if *hot { 0.95 } else { 0.1 };
                if let Some(signals) = signals {
                    *signals.0.lock().unwrap() = Load::default().with_cpu(cpu).with_memory(0.5);
                }
                continue;
            }
        };
        let Step::Check(_, cost) = *step else { unreachable!("only checks get here") };
        let calls = fast_store.calls();
        let now = fast.check_all_now(&dimensions, cost);
        if let Some(answer) = &now {
            prop_assert_eq!(fast_store.calls(), calls, "step {}: a fast answer asked the store", i);
            seen.lock().unwrap().count(answer);
        }
        let answer = match now.map(whole) {
            Some(now) => now,
            None => whole(fast.check_all_n(&dimensions, cost).await),
        };
        let expected = whole(general.check_all_n(&dimensions, cost).await);
        prop_assert_eq!(answer, expected, "step {} of {:?}", i, history);
    }
    Ok(())
}

#[test]
fn check_all_now_answers_as_check_all_n() {
    let config = Config {
        cases: 256,
        // Run from the package root by cargo; checked in.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/regressions/check_all_now.txt",
        ))),
        ..Config::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let seen = Mutex::new(Seen::default());
    let history = (prop::collection::vec(step(), 1..120), any::<bool>());
    TestRunner::new(config)
        .run(&history, |(history, adaptive)| runtime.block_on(run(&history, adaptive, &seen)))
        .unwrap_or_else(|failure| panic!("{failure}"));
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.deny_cache > 0 && seen.disabled > 0 && seen.adaptive > 0 && seen.errors > 0,
        "every kind of fast answer was compared: {seen:?}"
    );
}
