//! The service and a store that is down: at start (the service and its
//! Redis restarted together) the service starts anyway, answers by its
//! policy — degraded, or 503 / `UNAVAILABLE` with `--on-store-failure
//! unavailable` — says the store is disconnected, and uses Redis within
//! seconds of its coming up (standalone, Sentinel, Cluster). And while a
//! store is frozen, `/readyz` stays 503 in `unavailable` mode, also while
//! the breaker lets one probe through.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use slidegate_redis::RedisStore;
use slidegate_server::{OnStoreFailure, ServiceStore};
use slidegate_testkit::{RedisCluster, RedisSentinel, RedisServer};
use support::{Service, http, post_json, rls, start_with, unique_prefix};

const RULES: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1000\n";

/// How soon after Redis is back the service must use it.
const USED_WITHIN: Duration = Duration::from_secs(5);

/// A store of `url`, connected in the background (as `slidegate serve`'s).
async fn lazy(url: String) -> ServiceStore {
    let store = RedisStore::builder(url).prefix(unique_prefix("down")).lazy(true).connect().await;
    ServiceStore::Redis(store.expect("a lazy store, whatever answers"))
}

/// `/v1/check` for user `who`: the status and answer.
async fn check(service: &Service, who: &str) -> (u16, Value) {
    let body = json!({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": who}]}]});
    let (status, _, answer) = post_json(&service.url("/v1/check"), &body.to_string()).await;
    (status, answer)
}

async fn status(service: &Service) -> Value {
    let (code, _, text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    assert_eq!(code, 200, "{text}");
    serde_json::from_str(&text).expect("JSON")
}

async fn readyz(service: &Service) -> u16 {
    http("GET", &service.url("/readyz"), Vec::new(), &[]).await.0
}

/// Asserts the service answers at once, degraded, and says why.
async fn answers_degraded(service: &Service) {
    let started = Instant::now();
    let (code, answer) = check(service, "early").await;
    assert_eq!(
        (code, &answer["degraded"], &answer["allowed"]),
        (200, &json!(true), &json!(true)),
        "{answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "answered after {:?}", started.elapsed());
    let status = status(service).await;
    assert_eq!(status["store"]["connected"], false, "{status}");
    assert!(status["store"]["waiting_for"].as_str().is_some_and(|w| !w.is_empty()), "{status}");
    assert_eq!(status["ready"], true, "the policy answers: ready");
    assert_eq!(readyz(service).await, 200);
}

/// Waits until a check is decided by Redis; asserts it was within
/// [`USED_WITHIN`] of `back`.
async fn used_soon_after(service: &Service, back: Instant) {
    loop {
        let (code, answer) = check(service, "later").await;
        if code == 200 && answer["degraded"] == false {
            break;
        }
        assert!(back.elapsed() < USED_WITHIN, "Redis not used {USED_WITHIN:?} after it came back: {answer}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("Redis used {:?} after it came back", back.elapsed());
    let status = status(service).await;
    assert_eq!(
        (&status["store"]["connected"], &status["store"]["waiting_for"]),
        (&json!(true), &Value::Null)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_starts_without_its_redis_and_uses_it_once_up() {
    let mut redis = RedisServer::start().expect("redis-server (apt-get install redis-server)");
    redis.kill();
    let service = start_with(RULES, lazy(redis.url()).await, |_| {}).await;
    answers_degraded(&service).await;
    // RLS too: OK, from the failure policy.
    let mut client = service.client().await;
    let answer = support::should_rate_limit(&mut client, rls("api", &[&[("user", "rls")]])).await;
    assert_eq!(answer.overall_code, support::OK);
    redis.restart().expect("restart");
    used_soon_after(&service, Instant::now()).await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_store_failure_unavailable_it_starts_unready_and_says_so() {
    let mut redis = RedisServer::start().expect("redis-server");
    redis.kill();
    let service =
        start_with(RULES, lazy(redis.url()).await, |c| c.on_store_failure = OnStoreFailure::Unavailable)
            .await;
    let (code, answer) = check(&service, "early").await;
    assert_eq!(code, 503, "{answer}");
    let mut client = service.client().await;
    let status = client.should_rate_limit(rls("api", &[&[("user", "rls")]])).await.expect_err("unavailable");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(readyz(&service).await, 503, "not ready before the store is connected");
    let status = self::status(&service).await;
    assert_eq!((&status["ready"], &status["store"]["connected"]), (&json!(false), &json!(false)));
    redis.restart().expect("restart");
    let back = Instant::now();
    support::eventually("ready once Redis is up", async || readyz(&service).await == 200).await;
    assert!(back.elapsed() < USED_WITHIN, "ready {:?} after Redis came back", back.elapsed());
    assert_eq!(check(&service, "later").await.0, 200);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_starts_without_its_sentinel_setup_and_uses_it_once_up() {
    let mut setup = RedisSentinel::start(0).expect("sentinels");
    let url = setup.url();
    setup.stop_all();
    let service = start_with(RULES, lazy(url).await, |_| {}).await;
    answers_degraded(&service).await;
    setup.restart_all().expect("restart the setup");
    used_soon_after(&service, Instant::now()).await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_starts_without_its_cluster_and_uses_it_once_up() {
    let mut cluster = RedisCluster::start(3, 0).expect("cluster (apt-get install redis-server redis-tools)");
    let url = cluster.url();
    cluster.stop_all();
    let service = start_with(RULES, lazy(url).await, |_| {}).await;
    answers_degraded(&service).await;
    cluster.restart_all().expect("restart the cluster");
    used_soon_after(&service, Instant::now()).await;
    service.stop().await;
}

/// `--on-store-failure unavailable` and a frozen Redis: while checks keep
/// coming (and the breaker lets a probe through now and then), every
/// `/readyz` is 503 until Redis answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_store_not_a_probe() {
    let redis = RedisServer::start().expect("redis-server");
    let store =
        RedisStore::builder(redis.url()).prefix(unique_prefix("frozen")).connect().await.expect("connect");
    let service =
        start_with(RULES, ServiceStore::Redis(store), |c| c.on_store_failure = OnStoreFailure::Unavailable)
            .await;
    assert_eq!(readyz(&service).await, 200);
    redis.pause().expect("SIGSTOP");
    support::eventually("503 once the store fails", async || check(&service, "frozen").await.0 == 503).await;
    support::eventually("the breaker open", async || {
        check(&service, "frozen").await;
        status(&service).await["store"]["breaker"] != "closed"
    })
    .await;
    let started = Instant::now();
    let mut samples = 0;
    while started.elapsed() < Duration::from_secs(3) {
        // Checks keep the breaker probing; readiness is asked while one
        // is in flight (a probe waits out the 50 ms deadline).
        let asked_meanwhile = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            readyz(&service).await
        };
        let (probe, ready) = tokio::join!(check(&service, "probe"), asked_meanwhile);
        assert_eq!(probe.0, 503, "{}", probe.1);
        assert_eq!(ready, 503, "ready while the store is frozen (sample {samples})");
        samples += 1;
    }
    redis.resume().expect("SIGCONT");
    support::eventually("ready once Redis answers", async || readyz(&service).await == 200).await;
    println!("{samples} samples while frozen");
    service.stop().await;
}
