//! `GET /v1/stats`, what the status page draws: per-limit rates, the most
//! limited identities (hostile ones kept as data), the store's health.

mod support;

use serde_json::Value;
use support::{http, post_json, start};

const RULES: &str = "
domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: tenant
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
";

fn body(key: &str, value: &str) -> String {
    serde_json::json!({"domain": "api", "descriptors": [{"entries": [{"key": key, "value": value}]}]})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_show_rates_top_limited_identities_and_the_store() {
    let service = start(RULES).await;
    let check = service.url("/v1/check");
    let hostile = "<script>alert(1)</script>\"'&";
    for _ in 0..5 {
        post_json(&check, &body("user", "alice")).await;
    }
    post_json(&check, &body("user", "bob")).await;
    for _ in 0..4 {
        post_json(&check, &body("user", hostile)).await;
    }
    for _ in 0..3 {
        assert_eq!(post_json(&check, &body("tenant", "t1")).await.0, 200, "shadow mode");
    }
    // A peek counts nothing.
    post_json(&service.url("/v1/peek"), &body("user", "carol")).await;

    let (status, _, text) = http("GET", &service.url("/v1/stats"), "", &[]).await;
    assert_eq!(status, 200, "{text}");
    let stats: Value = serde_json::from_str(&text).expect("JSON");
    let limits = stats["limits"].as_array().expect("limits");
    let sum = |limit: &Value, field: &str| {
        limit[field].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum::<u64>()
    };
    let user = limits.iter().find(|l| l["key"] == "api.user").expect("the user limit");
    assert_eq!(user["admitted"].as_array().unwrap().len(), 300, "five minutes of seconds");
    assert_eq!((sum(user, "admitted"), sum(user, "limited")), (3 + 1 + 3, 2 + 1), "{user}");
    let tenant = limits.iter().find(|l| l["key"] == "api.tenant").expect("the tenant limit");
    assert_eq!((sum(tenant, "admitted"), sum(tenant, "limited")), (1, 2), "shadow denials count as limited");
    assert_eq!(tenant["limit"]["shadow_mode"], true);

    let top = stats["top_limited"].as_array().expect("top");
    assert_eq!(top[0]["identity"], "api: user=alice");
    assert_eq!(top[0]["count"], 2);
    assert_eq!(top[1]["identity"], format!("api: user={hostile}"), "kept as data, escaped by JSON");
    assert!(top.iter().all(|h| h["identity"] != "api: tenant=t1"), "shadow denials are not limited requests");
    assert_eq!(stats["store"]["kind"], "memory");
    assert_eq!(stats["store"]["degraded_total"], 0);
    assert!(stats["store"]["latency_us"]["p99"].as_f64().is_some(), "{}", stats["store"]);
    assert_eq!(stats["config"]["last_reload"]["result"], "ok");
    service.stop().await;
}

fn series_sum(stats: &Value, key: &str, field: &str) -> u64 {
    let limits = stats["limits"].as_array().expect("limits");
    let limit = limits.iter().find(|l| l["key"] == key).unwrap_or_else(|| panic!("limit {key}: {stats}"));
    limit[field].as_array().expect("series").iter().map(|n| n.as_u64().expect("count")).sum()
}

async fn stats(service: &support::Service) -> Value {
    let (status, _, text) = http("GET", &service.url("/v1/stats"), "", &[]).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).expect("JSON")
}

/// A reload hands an unchanged limit's rates to its successor (the charts go
/// on), even when it moved in the file; a changed limit starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_survive_a_reload_for_unchanged_limits() {
    let service = start(RULES).await;
    let check = service.url("/v1/check");
    for _ in 0..5 {
        post_json(&check, &body("user", "dave")).await;
    }
    post_json(&check, &body("tenant", "t9")).await;
    let before = stats(&service).await;
    assert_eq!(series_sum(&before, "api.user", "admitted") + series_sum(&before, "api.user", "limited"), 5);

    // The user limit unchanged but further down the file; the tenant limit changed.
    let moved = "
# a comment that moves every line down

domain: api
descriptors:
  - key: tenant
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
";
    support::write(&service.rules, moved);
    support::eventually("the reload", async || {
        stats(&service).await["config"]["hash"] != before["config"]["hash"]
    })
    .await;
    let after = stats(&service).await;
    assert_eq!(
        (series_sum(&after, "api.user", "admitted"), series_sum(&after, "api.user", "limited")),
        (series_sum(&before, "api.user", "admitted"), series_sum(&before, "api.user", "limited")),
        "the unchanged limit keeps its rates"
    );
    assert_eq!(
        series_sum(&after, "api.tenant", "admitted") + series_sum(&after, "api.tenant", "limited"),
        0,
        "the changed limit starts afresh"
    );
    service.stop().await;
}

/// On Redis, the store's part of the page shows the servers' memory and
/// how many keys are slidegate's (sampled, never `KEYS`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_show_the_redis_servers_memory_and_keys() {
    let redis = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let store = slidegate_redis::RedisStore::builder(redis.url())
        .prefix(support::unique_prefix("stats"))
        .connect()
        .await
        .expect("connect");
    let service = support::start_with(RULES, slidegate_server::ServiceStore::Redis(store), |_| {}).await;
    for user in ["a", "b", "c"] {
        post_json(&service.url("/v1/check"), &body("user", user)).await;
    }
    let stats = stats(&service).await;
    let servers = &stats["store"]["servers"];
    assert_eq!(stats["store"]["kind"], "redis");
    assert!(servers["used_memory_bytes"].as_u64().is_some_and(|m| m > 0), "{servers}");
    assert_eq!(servers["keys"], 3, "one state key per user: {servers}");
    assert_eq!(servers["slidegate_keys"], 3, "{servers}");
    service.stop().await;
}
