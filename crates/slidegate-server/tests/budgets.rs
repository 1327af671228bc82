//! Budgets through the service, with real clients: a rules file's
//! `budget: true` limit decided the same way over RLS (tonic) and the HTTP
//! API (`/v1/check`, `/v1/peek`), `POST /v1/charge` recording past any
//! limit, and bad input refused.

mod support;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use serde_json::{Value, json};
use slidegate_server::ServiceStore;
use slidegate_testkit::RedisServer;
use support::{OK, post_json, should_rate_limit, start, start_with};

const RULES: &str = r#"
domain: llm
descriptors:
  - key: tenant
    rate_limit:
      name: tokens
      unit: minute
      requests_per_unit: 1000
      budget: true
  - key: user
    rate_limit:
      name: requests
      unit: minute
      requests_per_unit: 2
"#;

/// One descriptor `(key, value)` with its own `hits_addend`, as RLS sends it.
fn rls(key: &str, value: &str, hits: u64) -> RateLimitRequest {
    let mut request = support::rls("llm", &[&[(key, value)]]);
    request.descriptors[0].hits_addend = Some(UInt64Value { value: hits });
    request
}

fn body(key: &str, value: &str, hits: u64) -> String {
    json!({"domain": "llm", "descriptors": [{"entries": [{"key": key, "value": value}], "hits_addend": hits}]})
        .to_string()
}

/// `(HTTP status, allowed, remaining, debt)` of the first limit of an answer.
async fn http(service: &support::Service, path: &str, body: &str) -> (u16, bool, u64, u64) {
    let (status, _, answer) = post_json(&service.url(path), body).await;
    let limit: &Value = &answer["descriptors"][0]["limits"][0];
    let allowed = answer["allowed"].as_bool().unwrap_or_else(|| panic!("{answer}"));
    (status, allowed, limit["remaining"].as_u64().expect("remaining"), limit["debt"].as_u64().expect("debt"))
}

/// The same budget decided over RLS and over the HTTP API, charge by
/// charge: admitted while anything is left, every weight recorded past the
/// limit, a check of 0 (a peek) records nothing.
async fn rls_and_http_agree(service: &support::Service) {
    let mut client = service.client().await;
    let mut rls_says = Vec::new();
    for hits in [700, 700, 0, 100] {
        let answer = should_rate_limit(&mut client, rls("tenant", "rls", hits)).await;
        let status = &answer.statuses[0];
        rls_says.push((answer.overall_code == OK, u64::from(status.limit_remaining)));
    }
    let mut http_says = Vec::new();
    for hits in [700, 700, 0, 100] {
        let (status, allowed, remaining, debt) =
            http(service, "/v1/check", &body("tenant", "http", hits)).await;
        assert_eq!(status, if allowed { 200 } else { 429 });
        http_says.push((allowed, remaining, debt));
    }
    assert_eq!(rls_says, [(true, 300), (true, 0), (false, 0), (false, 0)]);
    assert_eq!(http_says, [(true, 300, 0), (true, 0, 400), (false, 0, 400), (false, 0, 500)]);
    // Both identities hold the same: 1,500 recorded, also the denied 100.
    let (_, allowed, remaining, debt) = http(service, "/v1/peek", &body("tenant", "rls", 1)).await;
    assert_eq!((allowed, remaining, debt), (false, 0, 500));
    let (_, _, _, debt) = http(service, "/v1/peek", &body("tenant", "http", 1)).await;
    assert_eq!(debt, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_decide_alike_over_rls_and_http_on_memory() {
    let service = start(RULES).await;
    rls_and_http_agree(&service).await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_decide_alike_over_rls_and_http_on_redis() {
    let redis = RedisServer::start().expect("redis-server");
    let store = slidegate_redis::RedisStore::builder(redis.url())
        .prefix(support::unique_prefix("budgets"))
        .connect()
        .await
        .expect("connect");
    let service = start_with(RULES, ServiceStore::Redis(store), |_| {}).await;
    rls_and_http_agree(&service).await;
    service.stop().await;
}

/// `/v1/charge` records each weight whatever remains, on any limit (an
/// ordinary one too), answers 200 with `allowed` saying whether there was
/// room before; checks are then denied until the debt leaves the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charges_land_on_any_limit_and_answer_200() {
    let service = start(RULES).await;
    let (status, allowed, remaining, debt) = http(&service, "/v1/charge", &body("user", "alice", 5)).await;
    assert_eq!((status, allowed, remaining, debt), (200, true, 0, 3), "5 recorded against 2");
    let (status, allowed, _, debt) = http(&service, "/v1/charge", &body("user", "alice", 1)).await;
    assert_eq!((status, allowed, debt), (200, false, 4), "no room before: still recorded, still 200");
    let (status, allowed, _, _) = http(&service, "/v1/check", &body("user", "alice", 1)).await;
    assert_eq!((status, allowed), (429, false), "an ordinary check is denied while in debt");
    // A charge of 0 records nothing; the other user is untouched.
    let (_, _, _, debt) = http(&service, "/v1/charge", &body("user", "alice", 0)).await;
    assert_eq!(debt, 4);
    let (_, allowed, remaining, _) = http(&service, "/v1/check", &body("user", "bob", 1)).await;
    assert_eq!((allowed, remaining), (true, 1));
    // Bad input is refused and charges nothing.
    let (status, _, answer) =
        post_json(&service.url("/v1/charge"), r#"{"domain": "llm", "descriptors": 5}"#).await;
    assert_eq!(status, 400, "{answer}");
    let (status, _, answer) =
        post_json(&service.url("/v1/charge"), r#"{"domain": "llm", "descriptors": [{"entries": [{"key": "user", "value": "alice"}], "hits_addend": -1}]}"#).await;
    assert_eq!(status, 400, "a negative weight: {answer}");
    let (_, _, _, debt) = http(&service, "/v1/charge", &body("user", "alice", 0)).await;
    assert_eq!(debt, 4, "nothing charged by bad input");
    service.stop().await;
}

/// A budget among a request's limits records its weight even when another
/// limit denies; the other limits stay all or nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_records_its_weight_when_another_limit_denies() {
    let service = start(RULES).await;
    let both = |hits: u64| {
        json!({"domain": "llm", "hits_addend": hits, "descriptors": [
            {"entries": [{"key": "tenant", "value": "acme"}]},
            {"entries": [{"key": "user", "value": "alice"}], "hits_addend": 1},
        ]})
        .to_string()
    };
    for _ in 0..2 {
        assert_eq!(post_json(&service.url("/v1/check"), &both(100)).await.0, 200);
    }
    let (status, _, answer) = post_json(&service.url("/v1/check"), &both(100)).await;
    assert_eq!(status, 429, "the request limit denies: {answer}");
    let (_, allowed, remaining, _) = http(&service, "/v1/peek", &body("tenant", "acme", 1)).await;
    assert_eq!((allowed, remaining), (true, 700), "the budget recorded all three 100s");
    service.stop().await;
}
