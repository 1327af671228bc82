//! Against real sentinels: the store finds the primary through them and
//! follows a failover under load — the primary is killed, the sentinels
//! promote a replica, and checks are answered by the new primary again.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use slidegate::{Algorithm, FailurePolicy, Limiter, State};
use slidegate_redis::RedisStore;
use slidegate_testkit::RedisSentinel;
use slidegate_testkit::conformance::rule;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_sentinel_failover_under_load() {
    let mut setup = RedisSentinel::start(2).expect("start sentinels (apt-get install redis-server)");
    let store = RedisStore::builder(setup.url())
        .prefix(support::unique_prefix("sentinel"))
        .connect()
        .await
        .expect("connect through the sentinels");
    let limiter = Limiter::builder(store)
        .deadline(Duration::from_millis(200))
        .failure_policy(FailurePolicy::Fallback)
        .build();

    // Exact through the sentinel-found primary.
    let exact = rule(5, 60_000, Algorithm::SlidingLog);
    let admitted = join_all((0..20).map(|_| limiter.check(&exact, "exact"))).await;
    assert_eq!(admitted.iter().filter(|d| d.as_ref().expect("check").allowed).count(), 5);

    let load_rule = rule(1_000_000, 60_000, Algorithm::SLIDING_COUNTER);
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, errors, slowest) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tasks: Vec<_> = (0..32)
        .map(|t| {
            let (limiter, rule, stop, calls, errors, slowest) = (
                limiter.clone(),
                load_rule.clone(),
                Arc::clone(&stop),
                Arc::clone(&calls),
                Arc::clone(&errors),
                Arc::clone(&slowest),
            );
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let started = Instant::now();
                    if limiter.check(&rule, &format!("k{t}-{}", i % 50)).await.is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    slowest.fetch_max(
                        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        Ordering::Relaxed,
                    );
                    calls.fetch_add(1, Ordering::Relaxed);
                    if i.is_multiple_of(16) {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let old = tokio::task::block_in_place(|| setup.kill_primary()).expect("kill the primary");
    let new =
        tokio::task::block_in_place(|| setup.wait_failover(old)).expect("the sentinels promote a replica");
    println!("primary {old} killed; sentinels promoted {new}");

    let started = Instant::now();
    let mut clean = 0;
    while clean < 20 {
        let decision = limiter
            .check(&load_rule, &format!("probe-{}", started.elapsed().as_micros()))
            .await
            .expect("no Err");
        clean = if decision.state == State::Degraded { 0 } else { clean + 1 };
        assert!(started.elapsed() < Duration::from_secs(15), "the new primary is not used within 15s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("answered by the new primary {:?} after the sentinels named it", started.elapsed());

    stop.store(true, Ordering::Relaxed);
    for task in join_all(tasks).await {
        task.expect("task");
    }
    assert_eq!(errors.load(Ordering::Relaxed), 0, "the policy answered during the failover");
    let slowest = slowest.load(Ordering::Relaxed);
    assert!(slowest <= 200 + 600, "the deadline held: {slowest} ms");
    assert!(calls.load(Ordering::Relaxed) > 0);
}

/// A primary that hangs (SIGSTOP) fails no call before the limiter's
/// deadline drops it; the store asks the sentinels again when calls are
/// abandoned, and follows them to the replica they promote. Light traffic
/// (one check at a time), so no call waits long enough to fail by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_failover_away_from_a_frozen_primary() {
    let setup = RedisSentinel::start(2).expect("start sentinels (apt-get install redis-server)");
    let store = RedisStore::builder(setup.url())
        .prefix(support::unique_prefix("sentinel-frozen"))
        .response_timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect through the sentinels");
    let limiter = Limiter::builder(store)
        .deadline(Duration::from_millis(100))
        .failure_policy(FailurePolicy::Fallback)
        .build();
    let rule = rule(1_000_000, 60_000, Algorithm::SlidingLog);
    assert_eq!(limiter.check(&rule, "before").await.expect("check").state, State::Allowed);

    let old = setup.primary_port().expect("primary");
    let frozen = setup.servers().iter().find(|s| s.port() == old).expect("the primary is ours");
    frozen.pause().expect("SIGSTOP");
    let started = Instant::now();
    let mut clean = 0;
    let mut i = 0;
    while clean < 20 {
        i += 1;
        let checked = Instant::now();
        let decision = limiter.check(&rule, &format!("probe-{i}")).await.expect("no Err");
        assert!(checked.elapsed() < Duration::from_millis(100 + 400), "the deadline held");
        clean = if decision.state == State::Degraded { 0 } else { clean + 1 };
        assert!(started.elapsed() < Duration::from_secs(20), "the promoted replica is not used within 20s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let new = setup.primary_port().expect("primary");
    assert_ne!(new, old, "answered by the promoted replica");
    println!("frozen primary {old}; answered by {new} after {:?}", started.elapsed());
    frozen.resume().expect("SIGCONT");
}

#[tokio::test]
async fn bad_sentinel_urls_are_clear_errors() {
    let err = RedisStore::connect("redis+sentinel://127.0.0.1:1/").await.expect_err("no primary name");
    assert!(err.to_string().contains("primary name"), "{err}");
    let err = RedisStore::connect("redis+sentinel://127.0.0.1:1/mymaster").await.expect_err("nobody there");
    assert!(err.is_transient(), "{err}");
}
