//! The conformance suite: the semantics of design §1, checked against any
//! [`Store`]. Every store (memory, Redis standalone, later Cluster) runs this
//! same suite, so they cannot drift apart.
//!
//! A store under test must read time from the [`ManualClock`] it is built
//! with (the Redis store in client-clock mode), and stores built by separate
//! calls of the factory must not share state.

pub mod admissions;
pub mod apart;
pub mod budgets;
pub mod dimensions;
pub mod extremes;
mod helpers;
pub mod leases;
pub mod limit_changes;
pub mod peek;
pub mod penalties;
pub mod reservations;

use helpers::ok;
pub use helpers::{START_MS, algorithms, check, check_all, check_batch, nz, rule};

use std::future::Future;
use std::time::Duration;

use slidegate::algorithm::State;
use slidegate::store::{Request, Store};
use slidegate::{Algorithm, ErrorKind, ManualClock};

/// Runs every case, each on a fresh store from `make`.
pub async fn run_all<S, F, Fut>(make: F)
where
    S: Store,
    F: Fn(ManualClock) -> Fut,
    Fut: Future<Output = S>,
{
    let fresh = || {
        let clock = ManualClock::new(START_MS);
        let store = make(clock.clone());
        async move { (store.await, clock) }
    };
    let (s, c) = fresh().await;
    log_admits_exactly_limit(&s, &c).await;
    let (s, c) = fresh().await;
    denied_requests_consume_nothing(&s, &c).await;
    let (s, c) = fresh().await;
    no_boundary_burst(&s, &c).await;
    let (s, c) = fresh().await;
    weighted_costs(&s, &c).await;
    let (s, _) = fresh().await;
    bad_input_is_an_error(&s).await;
    let (s, _) = fresh().await;
    hostile_keys_work_and_stay_apart(&s).await;
    let (s, c) = fresh().await;
    retry_after_is_exact(&s, &c).await;
    let (s, c) = fresh().await;
    reset_after_frees_the_whole_quota(&s, &c).await;
    let (s, c) = fresh().await;
    fixed_window_resets_at_boundary(&s, &c).await;
    let (s, c) = fresh().await;
    gcra_spreads_requests(&s, &c).await;
    let (s, c) = fresh().await;
    matches_model_on_a_mixed_trace(&s, &c).await;
    let (s, c) = fresh().await;
    extremes::extreme_rules_match_the_model(&s, &c).await;
    let (s, c) = fresh().await;
    penalties::warns_then_bans(&s, &c).await;
    let (s, c) = fresh().await;
    penalties::violations_expire(&s, &c).await;
    let (s, c) = fresh().await;
    dimensions::all_or_nothing(&s, &c).await;
    let (s, c) = fresh().await;
    dimensions::weighted_dimensions(&s, &c).await;
    let (s, c) = fresh().await;
    dimensions::each_dimension_its_own_cost(&s, &c).await;
    let (s, _) = fresh().await;
    dimensions::bad_dimensions_are_errors(&s).await;
    let (s, c) = fresh().await;
    peek::peeks_charge_nothing(&s, &c).await;
    let (s, c) = fresh().await;
    peek::peeks_of_many_dimensions(&s, &c).await;
    let (s, c) = fresh().await;
    peek::peeks_count_no_violation(&s, &c).await;
    let (s, c) = fresh().await;
    peek::resets_forget_one_key(&s, &c).await;
    let (s, c) = fresh().await;
    dimensions::batch_in_order(&s, &c).await;
    let (s, c) = fresh().await;
    limit_changes::limit_changes_keep_every_charge(&s, &c).await;
    let (s, c) = fresh().await;
    limit_changes::adaptive_scaling_keeps_every_charge(s, &c).await;
    let (s, c) = fresh().await;
    apart::penalties_apart_by_algorithm(&s, &c).await;
    let (s, c) = fresh().await;
    apart::chosen_names_never_meet_derived_ones(&s, &c).await;
    let (s, c) = fresh().await;
    penalties::a_flood_is_counted_up_to_the_cap(&s, &c).await;
    let (s, c) = fresh().await;
    extremes::the_edges_of_time(&s, &c).await;
    let (s, c) = fresh().await;
    budgets::charges_land_past_the_limit(&s, &c).await;
    let (s, c) = fresh().await;
    budgets::debt_is_paid_off_when_retry_after_says(&s, &c).await;
    let (s, c) = fresh().await;
    budgets::budgets_among_dimensions(&s, &c).await;
    let (s, c) = fresh().await;
    leases::at_most_n_at_once(&s, &c).await;
    let (s, c) = fresh().await;
    reservations::reserve_commit_cancel(&s, &c).await;
    let (s, c) = fresh().await;
    reservations::ttl_commits_at_the_estimate(&s, &c).await;
    let (s, c) = fresh().await;
    reservations::settled_last_in_first_out(&s, &c).await;
    let (s, c) = fresh().await;
    admissions::all_or_nothing(s, &c).await;
}

/// N requests pass, the N+1th is denied, keys are independent.
pub async fn log_admits_exactly_limit<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        let rule = rule(5, 1000, algorithm);
        for i in 0..5u32 {
            let d = ok(store, &rule, "a", 1).await;
            assert!(d.allowed, "{rule}: request {i} must pass");
            assert_eq!(d.remaining, 4 - i, "{rule}");
            assert_eq!(d.limit, 5);
        }
        let d = ok(store, &rule, "a", 1).await;
        assert!(!d.allowed, "{rule}: sixth must be denied");
        assert_eq!(d.remaining, 0);
        assert!(ok(store, &rule, "b", 1).await.allowed, "{rule}: other key independent");
        clock.advance(Duration::from_secs(10));
    }
}

/// A steady client at 10 req/s under 100/min gets ~500 in five minutes, not
/// 100 (the MULTI/EXEC defect: rejected traffic charged).
pub async fn denied_requests_consume_nothing<S: Store>(store: &S, clock: &ManualClock) {
    let rule = rule(100, 60_000, Algorithm::SlidingLog);
    let mut admitted = 0;
    for _ in 0..3000 {
        if ok(store, &rule, "steady", 1).await.allowed {
            admitted += 1;
        }
        clock.advance(Duration::from_millis(100));
    }
    assert_eq!(admitted, 500, "5 minutes at 100/min");
}

/// N just before a fixed boundary and N just after: the log admits only N.
pub async fn no_boundary_burst<S: Store>(store: &S, clock: &ManualClock) {
    let window = 60_000;
    let start = clock_at_boundary(clock, window);
    clock.set(start - 1000);
    let rule = rule(100, window, Algorithm::SlidingLog);
    let mut admitted = 0;
    for _ in 0..100 {
        admitted += u32::from(ok(store, &rule, "burst", 1).await.allowed);
    }
    clock.set(start + 1000);
    for _ in 0..100 {
        admitted += u32::from(ok(store, &rule, "burst", 1).await.allowed);
    }
    assert_eq!(admitted, 100, "sliding log must not let a boundary burst through");
}

fn clock_at_boundary(clock: &ManualClock, window: u64) -> u64 {
    use slidegate::Clock;
    (clock.now_ms() / window + 2) * window
}

/// Costs add up; a cost that no longer fits is denied without charge.
pub async fn weighted_costs<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        let rule = rule(10, 1000, algorithm);
        assert_eq!(ok(store, &rule, "w", 4).await.remaining, 6, "{rule}");
        assert_eq!(ok(store, &rule, "w", 6).await.remaining, 0, "{rule}");
        assert!(!ok(store, &rule, "w", 1).await.allowed, "{rule}");
        clock.advance(Duration::from_secs(5));
        assert_eq!(ok(store, &rule, "w", 10).await.remaining, 0, "{rule}: a cost of exactly N fits");
        clock.advance(Duration::from_secs(5));
    }
}

/// Cost 0, cost > N and an empty key are refused when the request is
/// built — a store never sees them — and charge nothing.
pub async fn bad_input_is_an_error<S: Store>(store: &S) {
    for algorithm in algorithms(10) {
        let rule = rule(3, 1000, algorithm);
        for (key, cost, kind) in [
            ("k", 0, ErrorKind::InvalidCost),
            ("k", 4, ErrorKind::InvalidCost),
            ("", 1, ErrorKind::InvalidKey),
        ] {
            let err = Request::new(&rule, key, cost).expect_err("must be refused");
            assert_eq!(err.kind(), kind, "{rule} key {key:?} cost {cost}: {err}");
            assert!(!err.is_transient());
        }
        assert_eq!(ok(store, &rule, "k", 3).await.remaining, 0, "{rule}: bad input charged nothing");
    }
}

/// Keys with braces, newlines, non-ASCII and 1 MiB of bytes are limited like
/// any other, each on its own budget.
pub async fn hostile_keys_work_and_stay_apart<S: Store>(store: &S) {
    let rule = rule(2, 60_000, Algorithm::SlidingLog);
    let huge = "x".repeat(1 << 20);
    let keys = ["{a}", "{b}", "line\nbreak", "用户-ü", "#00", huge.as_str(), "a}{b", "\u{0}"];
    for key in keys {
        assert!(ok(store, &rule, key, 2).await.allowed, "{:?}", &key[..key.len().min(10)]);
    }
    for key in keys {
        assert!(
            !ok(store, &rule, key, 1).await.allowed,
            "{:?} keeps its own count",
            &key[..key.len().min(10)]
        );
    }
}

/// After a denial, the request is denied 1 ms before `retry_after` and
/// admitted exactly at it.
pub async fn retry_after_is_exact<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(4) {
        let rule = rule(4, 1000, algorithm);
        let key = format!("retry-{}", algorithm.short_name());
        // Start on a window boundary so the fixed window sees one window.
        clock.set(clock_at_boundary(clock, 1000));
        for _ in 0..4 {
            assert!(ok(store, &rule, &key, 1).await.allowed);
            clock.advance(Duration::from_millis(130));
        }
        // GCRA refills meanwhile: ask until denied.
        let mut denied = ok(store, &rule, &key, 2).await;
        for _ in 0..4 {
            if !denied.allowed {
                break;
            }
            denied = ok(store, &rule, &key, 2).await;
        }
        assert!(!denied.allowed, "{rule}");
        let retry = denied.retry_after;
        assert!(retry > Duration::ZERO, "{rule}");
        clock.advance(retry - Duration::from_millis(1));
        assert!(!ok(store, &rule, &key, 2).await.allowed, "{rule}: 1ms before retry_after");
        clock.advance(Duration::from_millis(1));
        assert!(ok(store, &rule, &key, 2).await.allowed, "{rule}: at retry_after ({retry:?})");
        clock.advance(Duration::from_secs(10));
    }
}

/// After `reset_after` the whole quota is available again.
pub async fn reset_after_frees_the_whole_quota<S: Store>(store: &S, clock: &ManualClock) {
    for algorithm in algorithms(10) {
        let rule = rule(6, 1000, algorithm);
        let mut last = None;
        for _ in 0..6 {
            last = Some(ok(store, &rule, "reset", 1).await);
            clock.advance(Duration::from_millis(37));
        }
        let reset = last.map(|d| d.reset_after).unwrap_or_default();
        clock.advance(reset.saturating_sub(Duration::from_millis(37)));
        assert_eq!(ok(store, &rule, "reset", 6).await.remaining, 0, "{rule}: full quota after reset_after");
        clock.advance(Duration::from_secs(10));
    }
}

/// The fixed window admits a full quota again right after its boundary.
pub async fn fixed_window_resets_at_boundary<S: Store>(store: &S, clock: &ManualClock) {
    let window = 1000;
    let boundary = clock_at_boundary(clock, window);
    let rule = rule(3, window, Algorithm::FixedWindow);
    clock.set(boundary - 1);
    assert_eq!(ok(store, &rule, "fw", 3).await.remaining, 0);
    let denied = ok(store, &rule, "fw", 1).await;
    assert_eq!(denied.retry_after, Duration::from_millis(1));
    clock.set(boundary);
    assert!(ok(store, &rule, "fw", 3).await.allowed, "new window, new quota");
}

/// GCRA with 10 per second admits a burst of 10, then one every 100 ms.
pub async fn gcra_spreads_requests<S: Store>(store: &S, clock: &ManualClock) {
    let rule = rule(10, 1000, Algorithm::Gcra);
    for _ in 0..10 {
        assert!(ok(store, &rule, "g", 1).await.allowed);
    }
    let denied = ok(store, &rule, "g", 1).await;
    assert_eq!(denied.retry_after, Duration::from_millis(100));
    clock.advance(Duration::from_millis(100));
    assert!(ok(store, &rule, "g", 1).await.allowed);
    assert!(!ok(store, &rule, "g", 1).await.allowed);
}

/// Decision by decision, the store agrees with the pure model on a mixed
/// trace with costs, several keys, and a clock step backwards.
pub async fn matches_model_on_a_mixed_trace<S: Store>(store: &S, clock: &ManualClock) {
    use slidegate::Clock;
    for algorithm in algorithms(7) {
        let rule = rule(9, 700, algorithm);
        let mut models = [State::new(&rule), State::new(&rule), State::new(&rule)];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..600 {
            // xorshift: deterministic, no dependency.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 3) as usize;
            let cost = 1 + ((x >> 8) % 3) as u32;
            let step = (x >> 16) % 90;
            if i == 300 {
                clock.set(clock.now_ms() - 150);
            } else {
                clock.advance(Duration::from_millis(step));
            }
            let got = ok(store, &rule, &format!("model-{key}"), cost).await;
            let want = models[key].check(&rule, clock.now_ms(), cost);
            assert_eq!(got, want, "{rule}: request {i} (key {key}, cost {cost})");
        }
        clock.advance(Duration::from_secs(10));
    }
}
