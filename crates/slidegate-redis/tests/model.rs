//! Property test: on random traces (client-clock mode, manual clock), the
//! Redis store agrees with the pure model decision by decision.

mod support;

use std::num::NonZeroU16;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use slidegate::algorithm::State;
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
    (algorithm, 1u32..=6, 10u64..=300).prop_flat_map(|(algorithm, limit, window)| {
        let step = prop_oneof![9 => 0..=(window as i64 / 3), 1 => -(window as i64)..0];
        let trace = prop::collection::vec((0usize..2, step, 1..=limit), 1..60);
        (Just(algorithm), Just(limit), Just(window), trace)
    })
}

#[test]
fn redis_store_matches_the_model() {
    let server = support::server();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let config = ProptestConfig {
        cases: 48,
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
                let got = store.check(&rule, &format!("k{key}"), cost).await.expect("check");
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
