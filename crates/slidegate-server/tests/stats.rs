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
