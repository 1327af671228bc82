//! Property test: on random traces (client-clock mode, manual clock), the
//! Redis store agrees with the pure model decision by decision.

mod support;

use std::num::NonZeroU16;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use slidegate::algorithm::State;
use slidegate::store::{Dimensions, Request};
use slidegate::{Algorithm, ManualClock, Rule, Store};
use slidegate_testkit::conformance::START_MS;

/// `(key index, time step ms (negative: clock steps back), cost)`.
type Trace = Vec<(usize, i64, u32)>;

fn case() -> impl Strategy<Value = (Algorithm, u32, u64, Trace)> {
    let algorithm = prop_oneof![
        Just(Algorithm::SlidingLog),
        (1u16..=8).prop_map(|b| Algorithm::SlidingCounter { buckets: NonZeroU16::new(b).expect("b >= 1") }),
        Just(Algorithm::FixedWindow),
        Just(Algorithm::Gcra),
    ];
    // Small limits, and limits past 128, where the sliding log changes its
    // Redis layout (packed string, list).
    let limit = prop_oneof![3 => 1u32..=6, 1 => 129u32..=132];
    (algorithm, limit, 10u64..=300).prop_flat_map(|(algorithm, limit, window)| {
        let step = prop_oneof![9 => 0..=(window as i64 / 3), 1 => -(window as i64)..0];
        // Costs mostly small, sometimes up to the limit (one list item each).
        let cost = prop_oneof![4 => 1..=limit.min(40), 1 => 1..=limit];
        let trace = prop::collection::vec((0usize..2, step, cost), 1..60);
        (Just(algorithm), Just(limit), Just(window), trace)
    })
}

#[test]
fn redis_store_matches_the_model() {
    let server = support::server();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let config = ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/regressions/model.txt"))),
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |(algorithm, limit, window, trace)| {
        let Ok(rule) =
            Rule::new(limit, Duration::from_millis(window)).and_then(|r| r.with_algorithm(algorithm))
        else {
            return Ok(());
        };
        runtime.block_on(async {
            let clock = ManualClock::new(START_MS);
            let store = support::client_clock_store(&server, "model", clock.clone()).await;
            let mut models = [State::new(&rule), State::new(&rule)];
            let mut now = START_MS;
            for (i, &(key, step, cost)) in trace.iter().enumerate() {
                now = now.saturating_add_signed(step);
                clock.set(now);
                let got = store
                    .check(&Request::new(&rule, &format!("k{key}"), cost).expect("valid request"))
                    .await
                    .expect("check");
                let want = models[key].check(&rule, now, cost);
                prop_assert_eq!(got, want, "{}: request {} (key {}, cost {}, t {})", rule, i, key, cost, now);
            }
            Ok(())
        })
    });
    runtime.block_on(support::assert_every_key_has_ttl(&server));
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// One operation: single check on rule A or B, or a multi-dimension check
/// on both; key index; time step (ms); cost.
type Ops = Vec<(u8, usize, u64, u32)>;

fn any_algorithm() -> impl Strategy<Value = Algorithm> {
    prop_oneof![
        Just(Algorithm::SlidingLog),
        (1u16..=6).prop_map(|b| Algorithm::SlidingCounter { buckets: NonZeroU16::new(b).expect("b >= 1") }),
        Just(Algorithm::FixedWindow),
        Just(Algorithm::Gcra),
    ]
}

/// Two rules (A with a random penalty) and a trace of single and
/// multi-dimension checks.
fn penalty_case() -> impl Strategy<Value = (Rule, Rule, Ops)> {
    let rules = (any_algorithm(), 1u32..=5, 10u64..=200, any_algorithm(), 1u32..=5, 10u64..=200);
    let penalty = (20u64..=600, 0u32..=3, 1u32..=5, 1u64..=300);
    (rules, penalty)
        .prop_filter_map("valid rules", |((aa, al, aw, ba, bl, bw), (vw, warn, ban, ban_for))| {
            let mut p = slidegate::Penalty::new(Duration::from_millis(vw)).ok()?;
            if warn > 0 && warn < ban {
                p = p.warn_after(warn).ok()?;
            }
            p = p.ban_after(ban, Duration::from_millis(ban_for)).ok()?;
            let a = Rule::new(al, Duration::from_millis(aw))
                .and_then(|r| r.with_algorithm(aa))
                .and_then(|r| r.named("a"))
                .and_then(|r| r.with_penalty(p))
                .ok()?;
            let b = Rule::new(bl, Duration::from_millis(bw))
                .and_then(|r| r.with_algorithm(ba))
                .and_then(|r| r.named("b"))
                .ok()?;
            Some((a, b))
        })
        .prop_flat_map(|(a, b)| {
            let max_cost = a.limit().min(b.limit());
            let ops = prop::collection::vec((0u8..3, 0usize..2, 0u64..=40, 1..=max_cost), 1..80);
            (Just(a), Just(b), ops)
        })
}

#[test]
fn redis_matches_memory_with_penalties_and_dimensions() {
    let server = support::server();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let config = ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/regressions/penalties.txt",
        ))),
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&penalty_case(), |(a, b, ops)| {
        runtime.block_on(async {
            let clock = ManualClock::new(START_MS);
            let redis = support::client_clock_store(&server, "penalties", clock.clone()).await;
            let memory = slidegate::MemoryStore::builder().clock(clock.clone()).build();
            for (i, &(op, key, step, cost)) in ops.iter().enumerate() {
                clock.advance(Duration::from_millis(step));
                let key = format!("k{key}");
                match op {
                    0 | 1 => {
                        let rule = if op == 0 { &a } else { &b };
                        let got = redis
                            .check(&Request::new(rule, &key, cost).expect("valid request"))
                            .await
                            .expect("redis");
                        let want = memory
                            .check(&Request::new(rule, &key, cost).expect("valid request"))
                            .await
                            .expect("memory");
                        prop_assert_eq!(got, want, "op {}: single {} key {} cost {}", i, rule, key, cost);
                    }
                    _ => {
                        let dims = [(&a, key.as_str()), (&b, key.as_str())];
                        let got = redis
                            .check_all(&Dimensions::new(&dims, cost).expect("valid dimensions"))
                            .await
                            .expect("redis");
                        let want = memory
                            .check_all(&Dimensions::new(&dims, cost).expect("valid dimensions"))
                            .await
                            .expect("memory");
                        prop_assert_eq!(got, want, "op {}: both, key {} cost {}", i, key, cost);
                    }
                }
            }
            Ok(())
        })
    });
    runtime.block_on(support::assert_every_key_has_ttl(&server));
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// `(time step ms, limit, cost)`: a named rule's limit moving request by
/// request.
type MovingTrace = Vec<(u64, u32, u32)>;

fn moving_case() -> impl Strategy<Value = (Algorithm, u64, MovingTrace)> {
    // Limits on both sides of 128, where the log changes its Redis layout.
    let limit = prop::sample::select(vec![1u32, 3, 100, 127, 128, 129, 150, 200]);
    let trace = prop::collection::vec((0u64..=60, limit, 1u32..=4), 1..80);
    (any_algorithm(), 50u64..=2000, trace)
}

/// A named rule whose limit moves from request to request (an edited
/// rule, adaptive limits), across 128: the Redis store decides as the
/// model does, and the sliding log admits exactly when every charge still
/// in the window plus the cost fits the limit of that moment — no layout
/// change ever drops a charge.
#[test]
fn redis_store_keeps_every_charge_while_the_limit_moves() {
    let server = support::server();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/regressions/model.txt"))),
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&moving_case(), |(algorithm, window, trace)| {
        runtime.block_on(async {
            let clock = ManualClock::new(START_MS);
            let store = support::client_clock_store(&server, "moving", clock.clone()).await;
            let mut model: Option<State> = None;
            let mut admitted: Vec<(u64, u32)> = Vec::new();
            let mut now = START_MS;
            for (i, &(step, limit, cost)) in trace.iter().enumerate() {
                let Ok(rule) = Rule::new(limit, Duration::from_millis(window))
                    .and_then(|r| r.with_algorithm(algorithm))
                    .and_then(|r| r.named("moving"))
                else {
                    continue; // GCRA and buckets have their own bounds
                };
                let cost = cost.min(limit);
                now += step;
                clock.set(now);
                let got = store
                    .check(&Request::new(&rule, "k", cost).expect("valid request"))
                    .await
                    .expect("check");
                let want = model.get_or_insert_with(|| State::new(&rule)).check(&rule, now, cost);
                prop_assert_eq!(got, want, "{}: request {} (cost {}, t {})", rule, i, cost, now);
                if algorithm == Algorithm::SlidingLog {
                    let used: u64 =
                        admitted.iter().filter(|&&(t, _)| t + window > now).map(|&(_, c)| u64::from(c)).sum();
                    prop_assert_eq!(got.allowed, used + u64::from(cost) <= u64::from(limit), "request {}", i);
                    if got.allowed {
                        admitted.push((now, cost));
                    }
                }
            }
            Ok(())
        })
    });
    runtime.block_on(support::assert_every_key_has_ttl(&server));
    if let Err(e) = result {
        panic!("{e}");
    }
}
