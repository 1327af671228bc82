//! Property tests of budgets: on random traces mixing a rule's ordinary
//! checks with charges to the same state as a budget (any cost, 0 and past
//! the limit, into debt), the Redis store decides as the memory store (the
//! model, `slidegate::algorithm`, under a lock) does — single calls,
//! batches (the general script), two dimensions with a penalty and peeks — on the
//! client's clock and on the server's.

mod support;

use std::num::NonZeroU16;
use std::time::Duration;

use proptest::prelude::*;
use slidegate::store::{Dimensions, Request};
use slidegate::{Algorithm, Decision, ManualClock, MemoryStore, Penalty, Rule, Store};
use slidegate_testkit::conformance::START_MS;
use support::model::{Setup, run, runtime};

/// One operation: kind (0 an ordinary check, 1 a budget's charge, 2 a
/// batch of both, 3 the budget and a penalised rule as two dimensions, 4
/// a peek at the budget),
/// key index, time step (ms; negative: the clock steps back), cost.
type Ops = Vec<(u8, usize, i64, u32)>;

fn case() -> impl Strategy<Value = (Algorithm, u32, u64, Ops)> {
    let algorithm = prop_oneof![
        Just(Algorithm::SlidingLog),
        (1u16..=8).prop_map(|b| Algorithm::SlidingCounter { buckets: NonZeroU16::new(b).expect("b >= 1") }),
        Just(Algorithm::FixedWindow),
        Just(Algorithm::Gcra),
    ];
    // Limits on both sides of the sliding log's packed layout (128).
    let limit = prop_oneof![3 => 1u32..=8, 1 => 126u32..=132];
    (algorithm, limit, 10u64..=300).prop_flat_map(|(algorithm, limit, window)| {
        let step = prop_oneof![9 => 0..=(window as i64 / 3), 1 => -(window as i64)..0];
        // A charge's cost: 0, within the limit, or well past it.
        let cost = prop_oneof![1 => Just(0u32), 4 => 1..=limit, 2 => limit..=limit.saturating_mul(4)];
        let ops = prop::collection::vec((0u8..5, 0usize..2, step, cost), 1..60);
        (Just(algorithm), Just(limit), Just(window), ops)
    })
}

fn penalised(window: u64) -> Rule {
    let penalty = Penalty::new(Duration::from_millis(window * 2))
        .and_then(|p| p.ban_after(3, Duration::from_millis(window)))
        .expect("penalty");
    Rule::new(2, Duration::from_millis(window))
        .and_then(|r| r.named("other"))
        .and_then(|r| r.with_penalty(penalty))
        .expect("rule")
}

fn budgets_match(server_clock: bool) {
    let setup = Setup::new(server_clock);
    let runtime = runtime();
    run(&setup, 64, "tests/regressions/budget_model.txt", &case(), |(algorithm, limit, window, ops)| {
        let Ok(rule) = Rule::new(limit, Duration::from_millis(window))
            .and_then(|r| r.with_algorithm(algorithm))
            .and_then(|r| r.named("spend"))
        else {
            return Ok(());
        };
        let budget = rule.clone().budget();
        let other = penalised(window);
        runtime.block_on(async {
            setup.set(START_MS);
            let clock = ManualClock::new(START_MS);
            let redis = setup.store("budget").await;
            let memory = MemoryStore::builder().clock(clock.clone()).build();
            let mut now = START_MS;
            for (i, &(op, key, step, cost)) in ops.iter().enumerate() {
                now = now.saturating_add_signed(step);
                clock.set(now);
                setup.set(now);
                let name = format!("k{key}");
                // An ordinary check's cost is one the rule can admit.
                let light = cost.clamp(1, limit);
                match op {
                    0 | 1 => {
                        let (rule, cost) = if op == 0 { (&rule, light) } else { (&budget, cost) };
                        let request = Request::new(rule, &name, cost).expect("valid");
                        let got = redis.check(&request).await.expect("redis");
                        let want = memory.check(&request).await.expect("memory");
                        prop_assert_eq!(got, want, "op {}: {} key {} cost {} t {}", i, op, key, cost, now);
                    }
                    2 => {
                        let batch = [
                            Request::new(&budget, &name, cost).expect("valid"),
                            Request::new(&rule, &name, light).expect("valid"),
                        ];
                        let got: Vec<Decision> =
                            redis.check_batch(&batch).await.into_iter().map(|r| r.expect("redis")).collect();
                        let want: Vec<Decision> = memory
                            .check_batch(&batch)
                            .await
                            .into_iter()
                            .map(|r| r.expect("memory"))
                            .collect();
                        prop_assert_eq!(got, want, "op {}: batch cost {} t {}", i, cost, now);
                    }
                    4 => {
                        let dims = Dimensions::weighted(&[(&budget, name.as_str(), cost)]).expect("valid");
                        let got = redis.peek_all(&dims).await.expect("redis");
                        let want = memory.peek_all(&dims).await.expect("memory");
                        prop_assert_eq!(got, want, "op {}: peek cost {} t {}", i, cost, now);
                    }
                    _ => {
                        let dims = [(&budget, name.as_str(), cost), (&other, name.as_str(), 1)];
                        let dims = Dimensions::weighted(&dims).expect("valid");
                        let got = redis.check_all(&dims).await.expect("redis");
                        let want = memory.check_all(&dims).await.expect("memory");
                        prop_assert_eq!(got, want, "op {}: two dimensions cost {} t {}", i, cost, now);
                    }
                }
            }
            Ok(())
        })
    });
}

#[test]
fn redis_records_budgets_as_the_model_on_the_client_clock() {
    budgets_match(false);
}

#[test]
fn redis_records_budgets_as_the_model_on_the_server_clock() {
    budgets_match(true);
}
