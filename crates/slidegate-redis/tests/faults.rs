//! Fault tests against real `redis-server` processes that the tests kill,
//! freeze (SIGSTOP) and bring back, under concurrent load. Each asserts
//! outcomes: no call outlives the deadline by more than a scheduling
//! margin, every answer during the outage is a degraded decision of the
//! configured policy (never an `Err`, never a panic) — single checks,
//! multi-dimension checks and batches alike — and the store is used again
//! by itself once it is back.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use slidegate::{BreakerState, Decision, Error, FailurePolicy, Limiter, Rule, State};
use slidegate_redis::RedisStore;
use slidegate_testkit::conformance::rule;

const DEADLINE: Duration = Duration::from_millis(100);
/// Scheduling slack on a loaded 2-core machine; the deadline is the claim.
const MARGIN: Duration = Duration::from_millis(400);
/// How long a recovered store may take to be used again: ~2 s promised
/// (the breaker's longest open period is 1 s, plus reconnecting; measured
/// ~1 s), with a margin for a loaded machine.
const RECOVERY_BOUND: Duration = Duration::from_secs(3);
const TASKS: usize = 16;

#[derive(Debug, Default)]
struct Tally {
    calls: u64,
    allowed: u64,
    degraded: u64,
    errors: Vec<String>,
    slowest: Duration,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.calls += other.calls;
        self.allowed += other.allowed;
        self.degraded += other.degraded;
        self.errors.extend(other.errors);
        self.slowest = self.slowest.max(other.slowest);
    }
}

/// The decisions of one call: most are single checks, every 8th a
/// two-dimension check, every 16th a batch of two — every path the
/// limiter guards.
async fn ask(limiter: &Limiter<RedisStore>, rule: &Rule, key: &str, i: u64) -> Vec<Result<Decision, Error>> {
    let other = format!("{key}-b");
    match i % 16 {
        0 => limiter.check_batch(&[(rule, key, 1), (rule, &other, 1)]).await,
        8 => match limiter.check_all(&[(rule, key), (rule, &other)]).await {
            Ok(multi) => multi.decisions.into_iter().map(Ok).collect(),
            Err(error) => vec![Err(error)],
        },
        _ => vec![limiter.check(rule, key).await],
    }
}

/// `TASKS` tasks checking distinct keys as fast as they can for `period`.
async fn load(limiter: &Limiter<RedisStore>, rule: &Rule, period: Duration) -> Tally {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (limiter, rule, stop) = (limiter.clone(), rule.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let key = format!("user-{t}-{}", i % 50);
                    let started = Instant::now();
                    let results = ask(&limiter, &rule, &key, i).await;
                    tally.slowest = tally.slowest.max(started.elapsed());
                    for result in results {
                        tally.calls += 1;
                        match result {
                            Ok(d) => {
                                tally.allowed += u64::from(d.allowed);
                                tally.degraded += u64::from(d.state == State::Degraded);
                            }
                            Err(e) => tally.errors.push(e.to_string()),
                        }
                    }
                    // Keep the loop from spinning a core when answers are local.
                    if i.is_multiple_of(32) {
                        tokio::task::yield_now().await;
                    }
                }
                tally
            })
        })
        .collect();
    tokio::time::sleep(period).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    for task in tasks {
        total.add(task.await.expect("task"));
    }
    total
}

/// Time until a check is answered by the store again (not degraded).
async fn time_to_recover(limiter: &Limiter<RedisStore>, rule: &Rule) -> Duration {
    let started = Instant::now();
    loop {
        let decision = limiter.check(rule, "recovery-probe").await.expect("no Err while recovering");
        if decision.state != State::Degraded {
            return started.elapsed();
        }
        assert!(started.elapsed() < RECOVERY_BOUND, "store not used again within {RECOVERY_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn limiter(server: &slidegate_testkit::RedisServer, policy: FailurePolicy) -> Limiter<RedisStore> {
    let store = support::server_clock_store(server, "faults").await;
    Limiter::builder(store).deadline(DEADLINE).failure_policy(policy).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_redis_is_answered_by_the_fallback_and_used_again_after_restart() {
    let mut server = support::server();
    let limiter = limiter(&server, FailurePolicy::Fallback).await;
    let rule = rule(1_000_000, 60_000, slidegate::Algorithm::SlidingLog);

    let healthy = load(&limiter, &rule, Duration::from_millis(300)).await;
    assert!(healthy.calls > 0 && healthy.errors.is_empty(), "{healthy:?}");
    assert_eq!(healthy.degraded, 0, "a healthy store is asked every time");

    server.kill();
    let dead = load(&limiter, &rule, Duration::from_secs(1)).await;
    assert!(dead.errors.is_empty(), "a dead store is never an Err: {:?}", &dead.errors[..1]);
    assert_eq!(dead.degraded, dead.calls, "every answer during the outage is degraded");
    assert_eq!(dead.allowed, dead.calls, "the local fallback admits within its limit");
    assert!(dead.slowest <= DEADLINE + MARGIN, "a call took {:?}", dead.slowest);
    assert_ne!(limiter.breaker_state(), BreakerState::Closed, "the breaker opened");

    server.restart().expect("restart");
    let recovered_in = time_to_recover(&limiter, &rule).await;
    println!("store used again {recovered_in:?} after the restart");
    let after = load(&limiter, &rule, Duration::from_millis(300)).await;
    assert!(after.errors.is_empty() && after.degraded == 0, "{after:?}");
    assert_eq!(limiter.breaker_state(), BreakerState::Closed);
    support::assert_every_key_has_ttl(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_redis_never_holds_a_caller_past_the_deadline() {
    let server = support::server();
    let limiter = limiter(&server, FailurePolicy::FailClosed).await;
    let rule = rule(1_000_000, 60_000, slidegate::Algorithm::SLIDING_COUNTER);
    let healthy = load(&limiter, &rule, Duration::from_millis(200)).await;
    assert_eq!((healthy.degraded, healthy.errors.len()), (0, 0), "{healthy:?}");

    server.pause().expect("SIGSTOP");
    let frozen = load(&limiter, &rule, Duration::from_secs(1)).await;
    server.resume().expect("SIGCONT");
    assert!(frozen.errors.is_empty(), "{:?}", &frozen.errors[..1]);
    assert!(frozen.calls > 0);
    assert_eq!(frozen.degraded, frozen.calls, "every answer while frozen is degraded");
    assert_eq!(frozen.allowed, 0, "fail-closed denies");
    assert!(frozen.slowest <= DEADLINE + MARGIN, "a call took {:?}", frozen.slowest);

    let recovered_in = time_to_recover(&limiter, &rule).await;
    println!("store used again {recovered_in:?} after SIGCONT");
    let after = load(&limiter, &rule, Duration::from_millis(300)).await;
    assert!(after.errors.is_empty() && after.degraded == 0, "{after:?}");
    support::assert_every_key_has_ttl(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_admits_during_an_outage_and_says_so() {
    let mut server = support::server();
    let limiter = limiter(&server, FailurePolicy::FailOpen).await;
    // A limit of 1: after the first request, only an outage lets more through.
    let rule = rule(1, 60_000, slidegate::Algorithm::SlidingLog);
    assert!(limiter.check(&rule, "k").await.expect("first").allowed);
    assert!(!limiter.check(&rule, "k").await.expect("second").allowed);
    assert!(limiter.check(&rule, "other").await.expect("first").allowed);
    server.kill();
    for _ in 0..20 {
        let decision = limiter.check(&rule, "other").await.expect("policy");
        assert_eq!((decision.allowed, decision.state), (true, State::Degraded));
    }
    // A denial still in the deny cache is exact, outage or not.
    let cached = limiter.check(&rule, "k").await.expect("cached");
    assert_eq!((cached.allowed, cached.state), (false, State::Limited));
    server.restart().expect("restart");
    time_to_recover(&limiter, &rule).await;
}
