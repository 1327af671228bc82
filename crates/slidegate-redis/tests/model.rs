//! Property tests: on random traces, the Redis store agrees with the pure
//! model (and with the memory store) decision by decision — on the
//! client's clock (client-clock mode, a manual clock) and on the Redis
//! server's own clock (the server run on a clock the test sets, see
//! `slidegate_testkit::FakeClock`), so the fast paths of both clocks, the
//! batch script and the general script are all compared with the model.

mod support;

use std::num::NonZeroU16;
use std::time::Duration;

use proptest::prelude::*;
use slidegate::algorithm::State;
use slidegate::store::{Dimensions, Request};
use slidegate::{Algorithm, Decision, ManualClock, Rule, Store};
use slidegate_testkit::conformance::START_MS;
use support::model::{Setup, run, runtime};

/// One step of a trace: a time step (ms; negative: the clock steps back),
/// then one request or a batch of them, each `(key index, cost)`.
type Step = (i64, Vec<(usize, u32)>);

fn case() -> impl Strategy<Value = (Algorithm, u32, u64, Vec<Step>)> {
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
        // Mostly single checks; sometimes a batch (the multi script), whose
        // requests are decided in order at one time.
        let requests = prop_oneof![4 => prop::collection::vec((0usize..2, cost.clone()), 1..=1), 1 => prop::collection::vec((0usize..2, cost), 2..=5)];
        let trace = prop::collection::vec((step, requests), 1..60);
        (Just(algorithm), Just(limit), Just(window), trace)
    })
}

/// The Redis store decides every request of random traces as the model
/// does, one request at a time and in batches.
fn matches_the_model(server_clock: bool) {
    let setup = Setup::new(server_clock);
    let runtime = runtime();
    run(&setup, 64, "tests/regressions/model.txt", &case(), |(algorithm, limit, window, trace)| {
        let Ok(rule) =
            Rule::new(limit, Duration::from_millis(window)).and_then(|r| r.with_algorithm(algorithm))
        else {
            return Ok(());
        };
        runtime.block_on(async {
            setup.set(START_MS);
            let store = setup.store("model").await;
            let mut models = [State::new(&rule), State::new(&rule)];
            let mut now = START_MS;
            for (i, (step, requests)) in trace.iter().enumerate() {
                now = now.saturating_add_signed(*step);
                setup.set(now);
                let keys: Vec<String> = requests.iter().map(|&(key, _)| format!("k{key}")).collect();
                let batch: Vec<Request<'_>> = requests
                    .iter()
                    .zip(&keys)
                    .map(|(&(_, cost), key)| Request::new(&rule, key, cost).expect("valid request"))
                    .collect();
                let got: Vec<Decision> = if let [request] = batch.as_slice() {
                    vec![store.check(request).await.expect("check")]
                } else {
                    store.check_batch(&batch).await.into_iter().map(|r| r.expect("batch check")).collect()
                };
                for (j, (&(key, cost), got)) in requests.iter().zip(got).enumerate() {
                    let want = models[key].check(&rule, now, cost);
                    prop_assert_eq!(
                        got,
                        want,
                        "{}: step {} request {} of {} (key {}, cost {}, t {})",
                        rule,
                        i,
                        j,
                        requests.len(),
                        key,
                        cost,
                        now
                    );
                }
            }
            Ok(())
        })
    });
}

#[test]
fn redis_store_matches_the_model_on_the_client_clock() {
    matches_the_model(false);
}

#[test]
fn redis_store_matches_the_model_on_the_server_clock() {
    matches_the_model(true);
}

/// One operation: a single check on rule A or B (0, 1), a multi-dimension
/// check on both (2), or a batch of one check on each (3); key index; time
/// step (ms); cost.
type Ops = Vec<(u8, usize, u64, u32)>;

fn any_algorithm() -> impl Strategy<Value = Algorithm> {
    prop_oneof![
        Just(Algorithm::SlidingLog),
        (1u16..=6).prop_map(|b| Algorithm::SlidingCounter { buckets: NonZeroU16::new(b).expect("b >= 1") }),
        Just(Algorithm::FixedWindow),
        Just(Algorithm::Gcra),
    ]
}

/// Two rules (A with a random penalty) and a trace of single,
/// multi-dimension and batch checks.
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
            let ops = prop::collection::vec((0u8..4, 0usize..2, 0u64..=40, 1..=max_cost), 1..80);
            (Just(a), Just(b), ops)
        })
}

/// With penalties and several dimensions, the Redis store decides as the
/// memory store does (its penalties are the model's).
fn matches_memory_with_penalties(server_clock: bool) {
    let setup = Setup::new(server_clock);
    let runtime = runtime();
    run(&setup, 64, "tests/regressions/penalties.txt", &penalty_case(), |(a, b, ops)| {
        runtime.block_on(async {
            setup.set(START_MS);
            let clock = ManualClock::new(START_MS);
            let redis = setup.store("penalties").await;
            let memory = slidegate::MemoryStore::builder().clock(clock.clone()).build();
            let mut now = START_MS;
            for (i, &(op, key, step, cost)) in ops.iter().enumerate() {
                now += step;
                clock.set(now);
                setup.set(now);
                let key = format!("k{key}");
                match op {
                    0 | 1 => {
                        let rule = if op == 0 { &a } else { &b };
                        let request = Request::new(rule, &key, cost).expect("valid request");
                        let got = redis.check(&request).await.expect("redis");
                        let want = memory.check(&request).await.expect("memory");
                        prop_assert_eq!(got, want, "op {}: single {} key {} cost {}", i, rule, key, cost);
                    }
                    2 => {
                        let dims = [(&a, key.as_str()), (&b, key.as_str())];
                        let dims = Dimensions::new(&dims, cost).expect("valid dimensions");
                        let got = redis.check_all(&dims).await.expect("redis");
                        let want = memory.check_all(&dims).await.expect("memory");
                        prop_assert_eq!(got, want, "op {}: both, key {} cost {}", i, key, cost);
                    }
                    _ => {
                        let batch = [
                            Request::new(&a, &key, cost).expect("valid request"),
                            Request::new(&b, &key, cost).expect("valid request"),
                        ];
                        let got: Vec<Decision> =
                            redis.check_batch(&batch).await.into_iter().map(|r| r.expect("redis")).collect();
                        let want: Vec<Decision> = memory
                            .check_batch(&batch)
                            .await
                            .into_iter()
                            .map(|r| r.expect("memory"))
                            .collect();
                        prop_assert_eq!(got, want, "op {}: batch, key {} cost {}", i, key, cost);
                    }
                }
            }
            Ok(())
        })
    });
}

#[test]
fn redis_matches_memory_with_penalties_and_dimensions_on_the_client_clock() {
    matches_memory_with_penalties(false);
}

#[test]
fn redis_matches_memory_with_penalties_and_dimensions_on_the_server_clock() {
    matches_memory_with_penalties(true);
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
fn keeps_every_charge_while_the_limit_moves(server_clock: bool) {
    let setup = Setup::new(server_clock);
    let runtime = runtime();
    run(&setup, 48, "tests/regressions/model.txt", &moving_case(), |(algorithm, window, trace)| {
        runtime.block_on(async {
            setup.set(START_MS);
            let store = setup.store("moving").await;
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
                setup.set(now);
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
}

#[test]
fn redis_store_keeps_every_charge_while_the_limit_moves_on_the_client_clock() {
    keeps_every_charge_while_the_limit_moves(false);
}

#[test]
fn redis_store_keeps_every_charge_while_the_limit_moves_on_the_server_clock() {
    keeps_every_charge_while_the_limit_moves(true);
}
