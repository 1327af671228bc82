//! Servers that are down when the store connects — they and their
//! clients restarted together. Without `lazy`, `connect` fails; with it,
//! `connect` returns a store that fails its calls at once (the limiter's
//! failure policy answers, degraded) and uses the servers within seconds
//! of their coming up: standalone, Sentinel and Cluster.

mod support;

use std::time::{Duration, Instant};

use slidegate::{ErrorKind, FailurePolicy, Limiter, State};
use slidegate_redis::RedisStore;
use slidegate_testkit::conformance::rule;
use slidegate_testkit::{RedisCluster, RedisSentinel};

/// How soon after the servers are back the store must use them (promised:
/// within about a second of waiting between attempts, plus connecting).
const SERVED_WITHIN: Duration = Duration::from_secs(5);

/// Longer than connecting to nothing may take: a lazy `connect` returns
/// long before (a hang guard).
const CONNECT_GUARD: Duration = Duration::from_secs(10);

/// A lazy store of `url`, returned although nothing answers there yet.
async fn lazy_store(url: String, test: &str) -> RedisStore {
    let strict = tokio::time::timeout(CONNECT_GUARD, RedisStore::builder(url.clone()).connect())
        .await
        .expect("a strict connect ends");
    assert!(strict.expect_err("nothing answers").is_transient());
    let store = tokio::time::timeout(
        CONNECT_GUARD,
        RedisStore::builder(url).prefix(support::unique_prefix(test)).lazy(true).connect(),
    )
    .await
    .expect("a lazy connect returns")
    .expect("a lazy store, although nothing answers");
    assert!(!store.is_connected());
    assert!(store.waiting_for().is_some(), "it says what it waits for");
    store
}

/// Asserts the store is not used yet (its calls fail at once, the policy
/// answers); returns the limiter.
async fn degraded_meanwhile(store: &RedisStore) -> Limiter<RedisStore> {
    let limiter = Limiter::builder(store.clone())
        .deadline(Duration::from_millis(100))
        .failure_policy(FailurePolicy::Fallback)
        .build();
    let rule = rule(5, 60_000, slidegate::Algorithm::SlidingLog);
    for _ in 0..3 {
        let started = Instant::now();
        let decision = limiter.check(&rule, "meanwhile").await.expect("the policy answers");
        assert_eq!(decision.state, State::Degraded);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "not waiting on anything: {:?}",
            started.elapsed()
        );
    }
    let request = slidegate::store::Request::new(&rule, "direct", 1).expect("valid");
    let error = slidegate::store::Store::check(store, &request).await.expect_err("not connected");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains("not connected"), "{error}");
    limiter
}

/// Waits until a check is answered by the store; asserts it was within
/// [`SERVED_WITHIN`] of `back`.
async fn served_soon_after(limiter: &Limiter<RedisStore>, back: Instant) {
    let rule = rule(1_000_000, 60_000, slidegate::Algorithm::SlidingLog);
    loop {
        let decision = limiter.check(&rule, "after").await.expect("the policy answers");
        if decision.state == State::Allowed {
            break;
        }
        assert!(back.elapsed() < SERVED_WITHIN, "not used {SERVED_WITHIN:?} after the servers came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("used {:?} after the servers came back", back.elapsed());
    assert!(limiter.store().is_connected());
    assert_eq!(limiter.store().waiting_for(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_store_uses_a_server_that_comes_up_later() {
    let mut server = support::server();
    server.kill();
    let store = lazy_store(server.url(), "lazy-standalone").await;
    let limiter = degraded_meanwhile(&store).await;
    server.restart().expect("restart");
    served_soon_after(&limiter, Instant::now()).await;
    support::assert_every_key_has_ttl(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_store_uses_a_sentinel_setup_that_comes_up_later() {
    let mut setup = RedisSentinel::start(1).expect("start sentinels (apt-get install redis-server)");
    let url = setup.url();
    setup.stop_all();
    let store = lazy_store(url, "lazy-sentinel").await;
    let limiter = degraded_meanwhile(&store).await;
    setup.restart_all().expect("restart the setup");
    served_soon_after(&limiter, Instant::now()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_store_uses_a_cluster_that_comes_up_later() {
    let mut cluster =
        RedisCluster::start(3, 0).expect("start a cluster (apt-get install redis-server redis-tools)");
    let url = cluster.url();
    cluster.stop_all();
    let store = lazy_store(url, "lazy-cluster").await;
    assert!(store.is_cluster(), "known from the URL");
    let limiter = degraded_meanwhile(&store).await;
    cluster.restart_all().expect("restart the cluster");
    served_soon_after(&limiter, Instant::now()).await;
}
