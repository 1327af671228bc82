//! Criterion benches: the pure algorithms, identity encoding and the memory
//! store. Run with `cargo bench -p slidegate`.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use slidegate::algorithm::State;
use slidegate::store::Request;
use slidegate::store::encode_identity;
use slidegate::{Algorithm, ManualClock, MemoryStore, Rule};

fn rules() -> Vec<Rule> {
    let base = Rule::per_minute(NonZeroU32::new(100).expect("100 > 0"));
    [Algorithm::SlidingLog, Algorithm::SLIDING_COUNTER, Algorithm::FixedWindow, Algorithm::Gcra]
        .into_iter()
        .map(|a| base.clone().with_algorithm(a).expect("valid"))
        .collect()
}

/// One key, time advancing 1 ms per check: a steady mix of admits and denials.
fn algorithms(c: &mut Criterion) {
    let mut group = c.benchmark_group("algorithm");
    for rule in rules() {
        group.bench_function(rule.algorithm().short_name(), |b| {
            let mut state = State::new(&rule);
            let mut now = 1_700_000_000_000u64;
            b.iter(|| {
                now += 1;
                black_box(state.check(&rule, now, 1))
            });
        });
    }
    group.finish();
}

fn identity(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode_identity");
    group.bench_function("plain", |b| b.iter(|| black_box(encode_identity(black_box("user-1234567")))));
    let hostile = "{".repeat(200);
    group.bench_function("digest_200b", |b| b.iter(|| black_box(encode_identity(black_box(&hostile)))));
    group.finish();
}

/// Single-thread time per check over 10,000 keys.
fn memory_store(c: &mut Criterion) {
    let keys: Vec<String> = (0..10_000).map(|i| format!("user-{i}")).collect();
    let mut group = c.benchmark_group("memory_store_10k_keys");
    for rule in rules() {
        group.bench_function(rule.algorithm().short_name(), |b| {
            let clock = ManualClock::new(1_700_000_000_000);
            let store = MemoryStore::builder().clock(clock.clone()).build();
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % keys.len();
                if i == 0 {
                    clock.advance(Duration::from_millis(7));
                }
                black_box(store.check_sync(&Request::new(&rule, &keys[i], 1).expect("valid request")))
            });
        });
    }
    // The same with the default clock (`SystemClock`, a system call's
    // worth of time per check: ~30 ns here), as an application runs it.
    for rule in rules().into_iter().take(2) {
        group.bench_function(format!("{}_system_clock", rule.algorithm().short_name()), |b| {
            let store = MemoryStore::new();
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % keys.len();
                black_box(store.check_sync(&Request::new(&rule, &keys[i], 1).expect("valid request")))
            });
        });
    }
    // The in-process baseline: governor's keyed GCRA limiter (a sharded
    // concurrent map of its own), 100 per minute, the same keys.
    group.bench_function("governor_keyed", |b| {
        let quota = governor::Quota::per_minute(std::num::NonZeroU32::new(100).expect("non-zero"));
        let limiter = governor::RateLimiter::keyed(quota);
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(limiter.check_key(&keys[i]).is_ok())
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = algorithms, identity, memory_store
}
criterion_main!(benches);
