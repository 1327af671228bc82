//! Reservations and leases through the service, with a real HTTP client:
//! `/v1/reserve`, `/v1/commit`, `/v1/cancel` against a rules file's budget,
//! `/v1/acquire`, `/v1/release`, `/v1/renew` against its `max_in_flight`
//! limit — on the memory store and on Redis — ids that only settle their
//! own reservation, checks (RLS, `/v1/check`) that do not meet a
//! `max_in_flight` limit, and bad input refused with what is wrong.

mod support;

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
  - key: exports
    rate_limit:
      name: exports
      max_in_flight: 2
      lease_ttl: 30s
"#;

fn descriptor(key: &str, value: &str) -> Value {
    json!([{"entries": [{"key": key, "value": value}]}])
}

async fn call(service: &support::Service, path: &str, body: Value) -> (u16, Value) {
    let (status, _, answer) = post_json(&service.url(path), &body.to_string()).await;
    (status, answer)
}

async fn reserve(service: &support::Service, tenant: &str, estimate: u32) -> (u16, Value) {
    let body = json!({"domain": "llm", "descriptors": descriptor("tenant", tenant), "estimate": estimate, "ttl_ms": 30_000});
    call(service, "/v1/reserve", body).await
}

async fn settle(
    service: &support::Service,
    path: &str,
    tenant: &str,
    id: &Value,
    actual: Option<u32>,
) -> (u16, Value) {
    let mut body = json!({"domain": "llm", "descriptors": descriptor("tenant", tenant), "id": id});
    if let Some(actual) = actual {
        body["actual"] = json!(actual);
    }
    call(service, path, body).await
}

async fn lease(service: &support::Service, path: &str, user: &str, id: Option<&Value>) -> (u16, Value) {
    let mut body = json!({"domain": "llm", "descriptors": descriptor("exports", user)});
    if let Some(id) = id {
        body["id"] = id.clone();
    }
    call(service, path, body).await
}

/// An estimate held, a second refused, commits that give back and that
/// go into debt, a cancel, ids bound to their identity; leases up to the
/// limit, released and renewed by id.
async fn holds_over_http(service: &support::Service) {
    let (status, first) = reserve(service, "acme", 800).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((first["allowed"].as_bool(), first["limit"]["remaining"].as_u64()), (Some(true), Some(200)));
    let id = first["id"].clone();
    assert_eq!(id.as_str().map(str::len), Some(32), "{first}");
    let (status, refused) = reserve(service, "acme", 300).await;
    assert_eq!((status, &refused["id"]), (429, &Value::Null), "{refused}");
    assert_eq!(refused["limit"]["remaining"], 200);

    // Another tenant's descriptor with acme's id touches nothing.
    let (status, answer) = settle(service, "/v1/cancel", "globex", &id, None).await;
    assert_eq!((status, &answer["held"]), (404, &json!(false)), "{answer}");
    // Committed at 300: 500 come back.
    let (status, answer) = settle(service, "/v1/commit", "acme", &id, Some(300)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!((answer["held"].as_bool(), answer["limit"]["remaining"].as_u64()), (Some(true), Some(700)));
    let (status, _) = settle(service, "/v1/commit", "acme", &id, Some(300)).await;
    assert_eq!(status, 404, "settled once");

    // A second reservation committed above its estimate: the rest is debt.
    let (_, second) = reserve(service, "acme", 500).await;
    let (status, answer) = settle(service, "/v1/commit", "acme", &second["id"], Some(1_200)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["limit"]["remaining"].as_u64(), answer["limit"]["debt"].as_u64()),
        (Some(0), Some(500))
    );
    let (status, _) = reserve(service, "acme", 1).await;
    assert_eq!(status, 429, "in debt");
    // A cancel gives everything back.
    let (_, third) = reserve(service, "globex", 1000).await;
    let (status, answer) = settle(service, "/v1/cancel", "globex", &third["id"], None).await;
    assert_eq!((status, answer["limit"]["remaining"].as_u64()), (200, Some(1000)), "{answer}");

    // Leases: two at once, released and renewed by id.
    let (status, one) = lease(service, "/v1/acquire", "alice", None).await;
    assert_eq!((status, one["limit"]["remaining"].as_u64()), (200, Some(1)), "{one}");
    assert_eq!(one["limit"]["algorithm"], "in_flight");
    let (status, _) = lease(service, "/v1/acquire", "alice", None).await;
    assert_eq!(status, 200);
    let (status, third) = lease(service, "/v1/acquire", "alice", None).await;
    assert_eq!((status, &third["id"]), (429, &Value::Null), "{third}");
    assert!(lease(service, "/v1/acquire", "bob", None).await.0 == 200, "bob has his own");
    let (status, _) = lease(service, "/v1/renew", "alice", Some(&one["id"])).await;
    assert_eq!(status, 200);
    let (status, _) = lease(service, "/v1/release", "bob", Some(&one["id"])).await;
    assert_eq!(status, 404, "alice's lease is not bob's to give back");
    let (status, _) = lease(service, "/v1/release", "alice", Some(&one["id"])).await;
    assert_eq!(status, 200);
    let (status, _) = lease(service, "/v1/release", "alice", Some(&one["id"])).await;
    assert_eq!(status, 404, "given back once");
    assert_eq!(lease(service, "/v1/acquire", "alice", None).await.0, 200, "its place is free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_and_leases_over_http_on_memory() {
    let service = start(RULES).await;
    holds_over_http(&service).await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_and_leases_over_http_on_redis() {
    let redis = RedisServer::start().expect("redis-server");
    let store = slidegate_redis::RedisStore::builder(redis.url())
        .prefix(support::unique_prefix("holds"))
        .connect()
        .await
        .expect("connect");
    let service = start_with(RULES, ServiceStore::Redis(store), |_| {}).await;
    holds_over_http(&service).await;
    service.stop().await;
}

/// Checks do not meet a `max_in_flight` limit (nothing could give its
/// leases back): over RLS and `/v1/check` its descriptor is within limits
/// whatever is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_do_not_meet_in_flight_limits() {
    let service = start(RULES).await;
    for _ in 0..2 {
        assert_eq!(lease(&service, "/v1/acquire", "carol", None).await.0, 200);
    }
    let mut client = service.client().await;
    let answer = should_rate_limit(&mut client, support::rls("llm", &[&[("exports", "carol")]])).await;
    assert_eq!(answer.overall_code, OK);
    let body = json!({"domain": "llm", "descriptors": descriptor("exports", "carol")});
    let (status, answer) = call(&service, "/v1/check", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(lease(&service, "/v1/acquire", "carol", None).await.0, 429, "still two held");
    service.stop().await;
}

/// Bad bodies get a 400 naming what is wrong, and hold nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_holds_are_refused_with_what_is_wrong() {
    let service = start(RULES).await;
    let tenant = descriptor("tenant", "acme");
    let cases = [
        ("/v1/reserve", json!({"domain": "llm", "descriptors": tenant}), "estimate"),
        ("/v1/reserve", json!({"domain": "llm", "descriptors": tenant, "estimate": 0}), "estimate"),
        ("/v1/reserve", json!({"domain": "llm", "descriptors": tenant, "estimate": 1001}), "limit"),
        ("/v1/reserve", json!({"domain": "llm", "descriptors": tenant, "estimate": 1, "ttl_ms": 0}), "ttl"),
        ("/v1/reserve", json!({"domain": "llm", "descriptors": tenant, "estimate": 1, "id": "00"}), "`id`"),
        (
            "/v1/reserve",
            json!({"domain": "llm", "descriptors": descriptor("exports", "a"), "estimate": 1}),
            "rate limit or budget",
        ),
        ("/v1/acquire", json!({"domain": "llm", "descriptors": tenant}), "max_in_flight"),
        (
            "/v1/commit",
            json!({"domain": "llm", "descriptors": tenant, "id": "0123456789abcdef0123456789abcdef"}),
            "actual",
        ),
        ("/v1/cancel", json!({"domain": "llm", "descriptors": tenant}), "`id`"),
        (
            "/v1/cancel",
            json!({"domain": "llm", "descriptors": tenant, "id": "../../etc"}),
            "32 lowercase hex",
        ),
        (
            "/v1/release",
            json!({"domain": "llm", "descriptors": tenant, "id": "Z".repeat(32)}),
            "32 lowercase hex",
        ),
        ("/v1/reserve", json!({"domain": "nope", "descriptors": tenant, "estimate": 1}), "no domain"),
        ("/v1/reserve", json!({"domain": "llm", "descriptors": [], "estimate": 1}), "descriptors"),
        (
            "/v1/reserve",
            json!({"domain": "llm", "descriptors": [tenant[0], tenant[0]], "estimate": 1}),
            "one descriptor",
        ),
        (
            "/v1/reserve",
            json!({"domain": "llm", "descriptors": descriptor("user", "x"), "estimate": 1}),
            "meets no limit",
        ),
    ];
    for (path, body, says) in cases {
        let (status, answer) = call(&service, path, body.clone()).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{path} {body}: {error:?} should say {says:?}");
    }
    let (status, answer) = reserve(&service, "acme", 1000).await;
    assert_eq!(status, 200, "nothing was held by bad input: {answer}");
    service.stop().await;
}

/// A rules file's `max_in_flight` limit takes a `lease_ttl` and nothing a
/// rate limit takes; a `lease_ttl` belongs to it alone.
#[test]
fn in_flight_limits_in_a_rules_file_say_what_is_wrong() {
    let errors = |limit: &str| {
        let rules = format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {limit}\n");
        slidegate_server::config::Config::from_texts(&[(std::path::PathBuf::from("rules.yaml"), rules)])
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string())
    };
    let cases = [
        ("{ max_in_flight: 2, requests_per_unit: 5 }", "it takes no `requests_per_unit`"),
        ("{ max_in_flight: 2, unit: minute }", "it takes no `unit`"),
        ("{ max_in_flight: 2, budget: true }", "it takes no `budget`"),
        ("{ max_in_flight: 0 }", "must be at least 1"),
        ("{ max_in_flight: 2, lease_ttl: soon }", "`lease_ttl: soon`"),
        ("{ max_in_flight: 2, lease_ttl: 0s }", "must be 1ms to 366 days"),
        (
            "{ unit: minute, requests_per_unit: 5, lease_ttl: 5s }",
            "`lease_ttl` is a `max_in_flight` limit's field",
        ),
    ];
    for (limit, says) in cases {
        let found = errors(limit);
        assert!(found.contains(says), "{limit}: {found:?} should say {says:?}");
    }
    assert_eq!(errors("{ max_in_flight: 3, lease_ttl: 2m }"), "", "a valid one loads");
}
