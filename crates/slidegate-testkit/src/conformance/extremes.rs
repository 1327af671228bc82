//! Rules and requests at the edges of what is valid: the largest limit,
//! the longest window, the most buckets, GCRA at its precision bound,
//! costs of the whole limit, and the first and last times stores decide.
//! Every store decides them as the pure model does (the Redis store's Lua
//! computes in doubles: exact only while every intermediate stays below
//! 2^53).

use std::num::NonZeroU16;
use std::time::Duration;

use slidegate::algorithm::State;
use slidegate::limits::{GCRA_MAX_PRODUCT, MAX_BUCKETS, MAX_TIME_MS, MAX_WINDOW};
use slidegate::{Algorithm, Clock, ErrorKind, ManualClock, Rule, Store};

use super::helpers::{check, check_all, check_batch, ok, rule};

/// The valid extremes, each on a trace of costs from 1 to the whole limit
/// at steps from 1 ms to more than the window.
pub async fn extreme_rules_match_the_model<S: Store>(store: &S, clock: &ManualClock) {
    let longest = u64::try_from(MAX_WINDOW.as_millis()).unwrap_or(u64::MAX);
    let most_buckets =
        Algorithm::SlidingCounter { buckets: NonZeroU16::new(MAX_BUCKETS).unwrap_or(NonZeroU16::MIN) };
    // GCRA: the largest limit for an odd window that keeps limit × window
    // below 2^53 (a power of two would hide rounding in doubles).
    let gcra_window = 2_100_001;
    let gcra_limit = u32::try_from((GCRA_MAX_PRODUCT - 1) / gcra_window).unwrap_or(u32::MAX);
    let rules = [
        rule(u32::MAX, longest, Algorithm::SlidingLog),
        rule(u32::MAX, 1, Algorithm::SlidingLog),
        rule(1, longest, Algorithm::SlidingLog),
        rule(u32::MAX, longest, most_buckets),
        rule(1, longest, most_buckets),
        rule(u32::MAX, 1000, most_buckets),
        rule(u32::MAX, longest, Algorithm::FixedWindow),
        rule(gcra_limit, gcra_window, Algorithm::Gcra),
        rule(1, longest, Algorithm::Gcra),
    ];
    for (r, rule) in rules.iter().enumerate() {
        let (limit, window) = (rule.limit(), rule.window_ms());
        let mut model = State::new(rule);
        let key = format!("extreme-{r}");
        let steps = [0, 1, window / 2, 0, window - 1, 1, window, 3, window.saturating_mul(2) + 7];
        let costs = [1, limit / 2 + 1, limit, 1, limit - limit / 3, limit, 1, limit, limit / 2 + 1];
        for (i, (&step, &cost)) in steps.iter().zip(&costs).enumerate() {
            clock.advance(Duration::from_millis(step));
            let got = ok(store, rule, &key, cost).await;
            let want = model.check(rule, clock.now_ms(), cost);
            assert_eq!(got, want, "{rule}: request {i} (cost {cost}, {step} ms later)");
        }
        clock.advance(Duration::from_millis(1));
    }
}

/// The edges of time: from 0 (times before a window's length, where
/// `now - window` is negative) and up to [`MAX_TIME_MS`], the last time
/// every store decides exactly, each store decides as the model does;
/// one millisecond beyond, every kind of check is an
/// [`InvalidTime`](ErrorKind::InvalidTime) error, and nothing is charged.
pub async fn the_edges_of_time<S: Store>(store: &S, clock: &ManualClock) {
    let most_buckets =
        Algorithm::SlidingCounter { buckets: NonZeroU16::new(MAX_BUCKETS).unwrap_or(NonZeroU16::MIN) };
    let mut all = super::helpers::algorithms(7);
    all.push(most_buckets);
    for (a, &algorithm) in all.iter().enumerate() {
        for (window, limit) in [(7, 3), (1000, 5), (60_000, 200)] {
            let Ok(rule) =
                Rule::new(limit, Duration::from_millis(window)).and_then(|r| r.with_algorithm(algorithm))
            else {
                continue; // more buckets than a 7 ms window has milliseconds
            };
            let steps = [0, 1, 0, window / 2, 1, window - 1, 0, 1, window, 1];
            // The last request of the end's trace is at MAX_TIME_MS itself.
            let end = MAX_TIME_MS - steps.iter().sum::<u64>();
            for (edge, start) in [("start", 0), ("end", end)] {
                let key = format!("edge-{a}-{window}-{edge}");
                let mut model = State::new(&rule);
                clock.set(start);
                for (i, step) in steps.into_iter().enumerate() {
                    clock.advance(Duration::from_millis(step));
                    let cost = 1 + (i as u32 % limit);
                    let got = ok(store, &rule, &key, cost).await;
                    let want = model.check(&rule, clock.now_ms(), cost);
                    assert_eq!(
                        got,
                        want,
                        "{rule} near the {edge} of time: request {i} at {}",
                        clock.now_ms()
                    );
                }
            }
        }
    }
    // Beyond the last exact time: single, multi-dimension and batched checks.
    let rule = super::helpers::rule(3, 1000, Algorithm::SlidingLog);
    clock.set(MAX_TIME_MS);
    assert_eq!(ok(store, &rule, "beyond", 1).await.remaining, 2, "the last exact time");
    for beyond in [MAX_TIME_MS + 1, 1 << 52, u64::MAX] {
        clock.set(beyond);
        let err = check(store, &rule, "beyond", 1).await.expect_err("beyond the last exact time");
        assert_eq!(err.kind(), ErrorKind::InvalidTime, "{err}");
        assert!(!err.is_transient());
        let err = check_all(store, &[(&rule, "beyond"), (&rule, "other")], 1).await.expect_err("check_all");
        assert_eq!(err.kind(), ErrorKind::InvalidTime, "{err}");
        for result in check_batch(store, &[(&rule, "beyond", 1), (&rule, "other", 1)]).await {
            assert_eq!(result.expect_err("batch").kind(), ErrorKind::InvalidTime);
        }
    }
    clock.set(MAX_TIME_MS);
    assert_eq!(ok(store, &rule, "beyond", 1).await.remaining, 1, "nothing was charged beyond");
}
