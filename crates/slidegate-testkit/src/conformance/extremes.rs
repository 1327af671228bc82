//! Rules and requests at the edges of what is valid: the largest limit,
//! the longest window, the most buckets, GCRA at its precision bound, and
//! costs of the whole limit. Every store decides them as the pure model
//! does (the Redis store's Lua computes in doubles: exact only while every
//! intermediate stays below 2^53).

use std::num::NonZeroU16;
use std::time::Duration;

use slidegate::algorithm::State;
use slidegate::{Algorithm, Clock, GCRA_MAX_PRODUCT, MAX_BUCKETS, MAX_WINDOW, ManualClock, Store};

use super::{ok, rule};

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
