//! The HTTP API through a real HTTP client over a socket: `/v1/check`,
//! `/v1/peek`, envoy ratelimit's `/json`, bad input, `/v1/status`,
//! `/v1/rules`, `/healthz`, `/readyz`, `/metrics` and the admin reload.

mod support;

use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::{HeaderFamilies, MAX_BODY_BYTES, ServiceStore};
use support::{Service, http, post_json, start, start_with};

const RULES: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 3
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: region
    rate_limit:
      requests_per_unit: 5
      window: 90s
      algorithm: gcra
"#;

const ADMIN_TOKEN: &str = "a-long-enough-admin-token";

/// The quota headers the tower layer writes.
const QUOTA_HEADERS: [&str; 6] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit",
    "ratelimit-policy",
    "retry-after",
];

/// A `/v1/check` body of one descriptor with `entries`.
fn check_body(entries: &[(&str, &str)]) -> String {
    let entries: Vec<Value> = entries.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
    json!({"domain": "api", "descriptors": [{"entries": entries}]}).to_string()
}

async fn with_headers(rules: &str) -> Service {
    start_with(rules, ServiceStore::Memory(MemoryStore::new()), |config| {
        config.headers = HeaderFamilies::new(true, true, false);
    })
    .await
}

fn header<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).map(|v| v.to_str().expect("ASCII header"))
}

/// The `{"error": ...}` of a 400 answer to `body` on `url`.
#[track_caller]
fn assert_names(status: u16, body: &Value, code: u16, needle: &str) {
    assert_eq!(status, code, "{body}");
    let message = body["error"].as_str().unwrap_or_else(|| panic!("an `error` string: {body}"));
    assert!(message.contains(needle), "`{needle}` missing from {message:?}");
}

/// Sends raw bytes as a POST body and expects a JSON error.
async fn post_bytes(url: &str, body: Vec<u8>) -> (u16, Value) {
    let (status, _, text) = http("POST", url, body, &[("content-type", "application/json")]).await;
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("JSON error body: {e}: {text:?}"));
    (status, json)
}

// ---------------------------------------------------------------------------
// POST /v1/check

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_admits_exactly_the_limit_then_429_with_quota_headers() {
    let service = with_headers(RULES).await;
    let url = service.url("/v1/check");
    let body = check_body(&[("user", "alice")]);
    for left in (0..3).rev() {
        let (status, headers, answer) = post_json(&url, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["allowed"], true);
        assert_eq!(answer["degraded"], false);
        let descriptors = answer["descriptors"].as_array().expect("descriptors");
        assert_eq!(descriptors.len(), 1);
        let d = &descriptors[0];
        assert_eq!(d["allowed"], true);
        assert_eq!(
            d["limit"],
            json!({
                "name": "per_user",
                "descriptor": "api.user",
                "requests_per_unit": 3,
                "window_ms": 60_000,
                "unit": "minute",
                "algorithm": "log",
                "shadow_mode": false,
                "budget": false,
            })
        );
        assert_eq!(d["remaining"], left);
        assert_eq!(d["retry_after_ms"], 0);
        let reset = d["reset_after_ms"].as_u64().expect("reset_after_ms");
        assert!(reset > 0 && reset <= 60_000, "{d}");
        assert_eq!(d["state"], "allowed");
        assert_eq!(d["shadow_over_limit"], false);
        let limits = d["limits"].as_array().expect("limits");
        assert_eq!(limits.len(), 1);
        assert_eq!(limits[0]["name"], "per_user");
        assert_eq!(limits[0]["requests_per_unit"], 3);
        assert_eq!(limits[0]["allowed"], true);
        assert_eq!(limits[0]["remaining"], left);
        assert_eq!(limits[0]["state"], "allowed");

        assert_eq!(header(&headers, "x-ratelimit-limit"), Some("3"));
        assert_eq!(header(&headers, "x-ratelimit-remaining"), Some(left.to_string().as_str()));
        let reset: u64 = header(&headers, "x-ratelimit-reset").expect("x-ratelimit-reset").parse().unwrap();
        assert!(reset > 0 && reset <= 60, "{reset}");
        assert!(header(&headers, "ratelimit-policy").expect("ratelimit-policy").contains(";q=3;w=60"));
        let current = header(&headers, "ratelimit").expect("ratelimit");
        assert!(current.contains(&format!(";r={left};t=")), "{current}");
        assert_eq!(header(&headers, "retry-after"), None, "admitted: no retry-after");
    }

    for _ in 0..2 {
        let (status, headers, answer) = post_json(&url, &body).await;
        assert_eq!(status, 429, "{answer}");
        assert_eq!(answer["allowed"], false);
        let d = &answer["descriptors"][0];
        assert_eq!(d["allowed"], false);
        assert_eq!(d["limit"]["name"], "per_user");
        assert_eq!(d["remaining"], 0);
        let retry = d["retry_after_ms"].as_u64().expect("retry_after_ms");
        assert!(retry > 0 && retry <= 60_000, "{d}");
        assert!(d["reset_after_ms"].as_u64().expect("reset_after_ms") > 0);
        assert_eq!(d["state"], "limited");
        assert_eq!(d["limits"][0]["allowed"], false);
        assert_eq!(d["limits"][0]["state"], "limited");

        let retry_after: u64 = header(&headers, "retry-after").expect("retry-after").parse().unwrap();
        assert!((1..=60).contains(&retry_after), "{retry_after}");
        assert_eq!(header(&headers, "x-ratelimit-limit"), Some("3"));
        assert_eq!(header(&headers, "x-ratelimit-remaining"), Some("0"));
        assert!(header(&headers, "x-ratelimit-reset").is_some());
        assert!(header(&headers, "ratelimit-policy").unwrap().contains(";q=3;w=60"));
        assert!(header(&headers, "ratelimit").unwrap().contains(";r=0;t="));
    }

    // Another user has a counter of its own.
    let (status, _, answer) = post_json(&url, &check_body(&[("user", "bob")])).await;
    assert_eq!((status, &answer["descriptors"][0]["remaining"]), (200, &json!(2)));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_header_families_no_quota_headers_are_sent() {
    let service = start(RULES).await;
    let url = service.url("/v1/check");
    let body = check_body(&[("user", "quiet")]);
    for expected in [200, 200, 200, 429] {
        let (status, headers, answer) = post_json(&url, &body).await;
        assert_eq!(status, expected, "{answer}");
        for name in QUOTA_HEADERS {
            assert!(headers.get(name).is_none(), "{name} sent without header families: {headers:?}");
        }
    }
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_descriptor_is_answered_in_order_and_a_denial_charges_none() {
    let service = start(RULES).await;
    let url = service.url("/v1/check");
    let body = |user: &str| {
        json!({"domain": "api", "descriptors": [
            {"entries": [{"key": "tenant", "value": "t1"}]},
            {"entries": [{"key": "nothing", "value": "here"}]},
            {"entries": [{"key": "user", "value": user}]},
            {"entries": [{"key": "region", "value": "eu"}]},
        ]})
        .to_string()
    };
    let (status, _, answer) = post_json(&url, &body("carol")).await;
    assert_eq!(status, 200, "{answer}");
    let d = answer["descriptors"].as_array().expect("descriptors");
    assert_eq!(d.len(), 4);
    assert_eq!(d[0]["limit"]["name"], Value::Null);
    assert_eq!(d[0]["limit"]["unit"], "hour");
    assert_eq!(d[0]["remaining"], 9);
    // A descriptor no limit applies to: allowed, no limit, no remaining.
    assert_eq!(d[1]["allowed"], true);
    assert_eq!(d[1]["limit"], Value::Null);
    assert_eq!(d[1]["remaining"], Value::Null);
    assert_eq!(d[1]["state"], Value::Null);
    assert_eq!(d[1]["limits"], json!([]));
    assert_eq!(d[2]["limit"]["name"], "per_user");
    assert_eq!(d[3]["limit"]["window_ms"], 90_000);
    assert_eq!(d[3]["limit"]["unit"], Value::Null, "90s is no unit");
    assert_eq!(d[3]["limit"]["algorithm"], "gcra");

    // Spend carol's limit alone, then ask for both: the tenant is not charged.
    for _ in 0..2 {
        let (status, _, _) = post_json(&url, &check_body(&[("user", "carol")])).await;
        assert_eq!(status, 200);
    }
    let (status, _, answer) = post_json(&url, &body("carol")).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["descriptors"][0]["allowed"], true);
    assert_eq!(answer["descriptors"][2]["allowed"], false);
    let (_, _, answer) = post_json(&url, &check_body(&[("tenant", "t1")])).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 8, "the denied request charged the tenant nothing");

    // A domain no rules name: allowed, no limit.
    let (status, _, answer) = post_json(
        &url,
        &json!({"domain": "elsewhere", "descriptors": [{"entries": [{"key": "user", "value": "carol"}]}]})
            .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["descriptors"][0]["allowed"], true);
    assert_eq!(answer["descriptors"][0]["limit"], Value::Null);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_addend_at_request_and_descriptor_level() {
    let service = start(RULES).await;
    let url = service.url("/v1/check");
    let entries = json!([{"key": "user", "value": "heavy"}]);

    // The request's weight.
    let weighted =
        json!({"domain": "api", "hits_addend": 2, "descriptors": [{"entries": entries}]}).to_string();
    let (status, _, answer) = post_json(&url, &weighted).await;
    assert_eq!((status, &answer["descriptors"][0]["remaining"]), (200, &json!(1)), "{answer}");
    let (status, _, answer) = post_json(&url, &weighted).await;
    assert_eq!(status, 429, "2 more do not fit in 1: {answer}");

    // A descriptor's own weight wins over the request's; 0 only checks.
    let own = |hits: u64| {
        json!({"domain": "api", "hits_addend": 3, "descriptors": [{"entries": entries, "hits_addend": hits}]})
            .to_string()
    };
    for _ in 0..3 {
        let (status, _, answer) = post_json(&url, &own(0)).await;
        assert_eq!((status, &answer["descriptors"][0]["remaining"]), (200, &json!(1)), "{answer}");
    }
    let (status, _, answer) = post_json(&url, &own(1)).await;
    assert_eq!((status, &answer["descriptors"][0]["remaining"]), (200, &json!(0)), "{answer}");
    let (status, _, _) = post_json(&url, &own(1)).await;
    assert_eq!(status, 429);

    // `hits_addend: 0` on the request means 1.
    let zero = json!({"domain": "api", "hits_addend": 0, "descriptors": [{"entries": [{"key": "user", "value": "z"}]}]})
        .to_string();
    let (_, _, answer) = post_json(&url, &zero).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 2);

    // A weight above the limit is a 429, not an error, and charges nothing.
    let (status, _, answer) = post_json(
        &url,
        &json!({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "w"}], "hits_addend": 4}]})
            .to_string(),
    )
    .await;
    assert_eq!(status, 429, "{answer}");
    let (_, _, answer) = post_json(&url, &check_body(&[("user", "w")])).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 2, "the heavy request charged nothing");
    service.stop().await;
}

// ---------------------------------------------------------------------------
// POST /v1/peek

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_answers_like_check_and_charges_nothing() {
    let service = with_headers(RULES).await;
    let (check, peek) = (service.url("/v1/check"), service.url("/v1/peek"));
    let body = check_body(&[("user", "peeker")]);
    for _ in 0..10 {
        let (status, headers, answer) = post_json(&peek, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["allowed"], true);
        let d = &answer["descriptors"][0];
        assert_eq!(d["limit"]["name"], "per_user");
        assert_eq!(d["limit"]["requests_per_unit"], 3);
        assert_eq!(d["remaining"], 3, "nothing charged: all 3 left");
        assert_eq!(d["retry_after_ms"], 0);
        assert_eq!(d["state"], "allowed");
        assert_eq!(header(&headers, "x-ratelimit-limit"), Some("3"));
    }
    // The whole limit is still there.
    for left in (0..3).rev() {
        let (status, _, answer) = post_json(&check, &body).await;
        assert_eq!((status, &answer["descriptors"][0]["remaining"]), (200, &json!(left)), "{answer}");
        // A peek between checks sees what the check left.
        let (_, _, peeked) = post_json(&peek, &body).await;
        assert_eq!(peeked["descriptors"][0]["remaining"], left);
    }
    let (status, _, _) = post_json(&check, &body).await;
    assert_eq!(status, 429);
    // Once spent, a peek answers 429 as a check would.
    let (status, headers, answer) = post_json(&peek, &body).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["allowed"], false);
    assert!(answer["descriptors"][0]["retry_after_ms"].as_u64().unwrap() > 0);
    assert!(header(&headers, "retry-after").is_some());
    // Peeking a weight checks that weight, charging nothing.
    let (status, _, answer) = post_json(
        &peek,
        &json!({"domain": "api", "hits_addend": 2, "descriptors": [{"entries": [{"key": "user", "value": "p2"}]}]})
            .to_string(),
    )
    .await;
    assert_eq!((status, &answer["allowed"]), (200, &json!(true)));
    let (status, _, _) = post_json(
        &peek,
        &json!({"domain": "api", "hits_addend": 4, "descriptors": [{"entries": [{"key": "user", "value": "p2"}]}]})
            .to_string(),
    )
    .await;
    assert_eq!(status, 429, "4 never fit in 3");
    let (_, _, answer) = post_json(&check, &check_body(&[("user", "p2")])).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 2);
    service.stop().await;
}

// ---------------------------------------------------------------------------
// POST /json — envoy ratelimit's JSON form

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_json_answers_in_protobuf_json() {
    let service = start(RULES).await;
    let url = service.url("/json");
    let camel = json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": "user", "value": "json"}]}],
        "hitsAddend": 1,
    })
    .to_string();
    let (status, _, answer) = post_json(&url, &camel).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({
            "overallCode": "OK",
            "statuses": [{
                "code": "OK",
                "currentLimit": {"name": "per_user", "requestsPerUnit": 3, "unit": "MINUTE"},
                "limitRemaining": 2,
                "durationUntilReset": "60s",
            }],
        })
    );
    // snake_case names are read too.
    let snake = json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": "user", "value": "json"}], "hits_addend": "1"}],
        "hits_addend": 1,
    })
    .to_string();
    let (status, _, answer) = post_json(&url, &snake).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["statuses"][0]["limitRemaining"], 1);
    // Nothing left: `limitRemaining` (0) is left out.
    let (status, _, answer) = post_json(&url, &camel).await;
    assert_eq!(status, 200, "{answer}");
    let s = &answer["statuses"][0];
    assert_eq!(s["code"], "OK");
    assert!(s.get("limitRemaining").is_none(), "0 is omitted: {answer}");
    assert_eq!(s["currentLimit"]["requestsPerUnit"], 3);
    // Over the limit: 429 and OVER_LIMIT, with the wait.
    let (status, _, answer) = post_json(&url, &camel).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["overallCode"], "OVER_LIMIT");
    let s = &answer["statuses"][0];
    assert_eq!(s["code"], "OVER_LIMIT");
    assert_eq!(s["currentLimit"], json!({"name": "per_user", "requestsPerUnit": 3, "unit": "MINUTE"}));
    assert!(s.get("limitRemaining").is_none());
    let wait = s["durationUntilReset"].as_str().expect("durationUntilReset");
    let seconds: f64 = wait.strip_suffix('s').expect("protobuf duration").parse().expect("seconds");
    assert!(seconds > 0.0 && seconds <= 60.0, "{wait}");

    // A descriptor's own limit, camelCase and snake_case.
    let overriding = |limit: Value| {
        json!({"domain": "api", "descriptors": [{"entries": [{"key": "any", "value": "thing"}], "limit": limit}]})
            .to_string()
    };
    let (status, _, answer) =
        post_json(&url, &overriding(json!({"requestsPerUnit": 2, "unit": "HOUR"}))).await;
    assert_eq!(status, 200, "{answer}");
    let s = &answer["statuses"][0];
    assert_eq!(s["currentLimit"], json!({"name": "api.any_thing", "requestsPerUnit": 2, "unit": "HOUR"}));
    assert_eq!(s["limitRemaining"], 1);
    assert_eq!(s["durationUntilReset"], "3600s");
    let (status, _, answer) =
        post_json(&url, &overriding(json!({"requests_per_unit": "2", "unit": "HOUR"}))).await;
    assert_eq!(status, 200, "{answer}");
    let (status, _, answer) = post_json(&url, &overriding(json!({"requestsPerUnit": 2, "unit": 3}))).await;
    assert_eq!(status, 429, "the unit by number: 3 is HOUR, the same limit: {answer}");

    // An unknown domain, and a descriptor no limit applies to: OK without a limit.
    let (status, _, answer) = post_json(
        &url,
        &json!({"domain": "elsewhere", "descriptors": [{"entries": [{"key": "user", "value": "u"}]}]})
            .to_string(),
    )
    .await;
    assert_eq!((status, answer), (200, json!({"overallCode": "OK", "statuses": [{"code": "OK"}]})));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_json_refuses_unknown_fields_and_bad_values_by_name() {
    let service = start(RULES).await;
    let url = service.url("/json");
    let (status, _, answer) = post_json(&url, r#"{"domain":"api","descriptors":[],"bogusField":1}"#).await;
    assert_names(status, &answer, 400, "unknown field `bogusField`");
    let (status, _, answer) = post_json(
        &url,
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u","extra":true}]}]}"#,
    )
    .await;
    assert_names(status, &answer, 400, "unknown field `extra`");
    let (status, _, answer) = post_json(&url, r#"{"domain":"api","descriptors":[]}"#).await;
    assert_names(status, &answer, 400, "`descriptors` must not be empty");
    let (status, _, answer) = post_json(
        &url,
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u"}],"isNegativeHits":true}]}"#,
    )
    .await;
    assert_names(status, &answer, 400, "is_negative_hits");
    let (status, _, answer) = post_json(
        &url,
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"a","value":"b"}],"limit":{"requestsPerUnit":2,"unit":"FORTNIGHT"}}]}"#,
    )
    .await;
    assert_names(status, &answer, 400, "descriptors[0].limit.unit");
    let (status, _, answer) =
        post_json(&url, r#"{"domain":"api","hitsAddend":"many","descriptors":[]}"#).await;
    assert_names(status, &answer, 400, "hits_addend");
    // And it still answers.
    let (status, _, answer) =
        post_json(&url, r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"after"}]}]}"#)
            .await;
    assert_eq!((status, &answer["overallCode"]), (200, &json!("OK")));
    service.stop().await;
}

// ---------------------------------------------------------------------------
// Bad input

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_400_naming_the_problem() {
    let service = start(RULES).await;
    for path in ["/v1/check", "/v1/peek"] {
        let url = service.url(path);
        let (status, answer) = post_bytes(&url, b"this is not JSON".to_vec()).await;
        assert_names(status, &answer, 400, "bad JSON");
        let (status, answer) = post_bytes(&url, b"{\"domain\": \"a\xff\xfe\"}".to_vec()).await;
        assert_names(status, &answer, 400, "not UTF-8");
        let (status, answer) = post_bytes(&url, Vec::new()).await;
        assert_names(status, &answer, 400, "bad JSON");

        let one = json!([{"entries": [{"key": "user", "value": "u"}]}]);
        let cases: Vec<(Value, &str)> = vec![
            (json!({"domain": "api", "descriptors": one, "extra": 1}), "unknown field `extra`"),
            (
                json!({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "u"}], "limit": {}}]}),
                "unknown field `limit`",
            ),
            (
                json!({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "u", "x": 1}]}]}),
                "unknown field `x`",
            ),
            (json!({"descriptors": one}), "missing field `domain`"),
            (json!({"domain": "api"}), "missing field `descriptors`"),
            (json!({"domain": "", "descriptors": one}), "`domain` must not be empty"),
            (json!({"domain": "api", "descriptors": []}), "`descriptors` must not be empty"),
            (
                json!({"domain": "api", "descriptors": [{"entries": []}]}),
                "`descriptors[0].entries` must not be empty",
            ),
            (
                json!({"domain": "api", "descriptors": [{"entries": [{"key": "", "value": "v"}]}]}),
                "`descriptors[0].entries[0].key` must not be empty",
            ),
            (
                json!({"domain": "api", "descriptors": vec![json!({"entries": [{"key": "user", "value": "u"}]}); 65]}),
                "65 descriptors: a request may carry at most 64",
            ),
            (
                json!({"domain": "api", "descriptors": [
                    {"entries": [{"key": "user", "value": "u"}]},
                    {"entries": (0..17).map(|i| json!({"key": format!("k{i}"), "value": "v"})).collect::<Vec<_>>()},
                ]}),
                "`descriptors[1].entries` has 17: at most 16",
            ),
            (
                json!({"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "v".repeat(5000)}]}]}),
                "`descriptors[0].entries[0]` is longer than 4096 bytes",
            ),
            (
                json!({"domain": "api", "hits_addend": -1, "descriptors": one}),
                "at `hits_addend`: invalid value: integer `-1`",
            ),
        ];
        for (body, needle) in cases {
            let (status, _, answer) = post_json(&url, &body.to_string()).await;
            assert_names(status, &answer, 400, needle);
        }
    }
    // The limits themselves (64 descriptors, 16 entries, 4096 bytes) are fine.
    let (status, _, answer) = post_json(
        &service.url("/v1/check"),
        &json!({"domain": "api", "descriptors": [
            {"entries": (0..16).map(|i| json!({"key": format!("k{i}"), "value": "v"})).collect::<Vec<_>>()},
            {"entries": [{"key": "k".repeat(4096), "value": "v".repeat(4096)}]},
        ]})
        .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, _, answer) = post_json(
        &service.url("/v1/check"),
        &json!({"domain": "api", "descriptors": vec![json!({"entries": [{"key": "tenant", "value": "big"}]}); 10]})
            .to_string(),
    )
    .await;
    assert_eq!(status, 200, "10 descriptors on one counter weigh 10, which fits in 10: {answer}");
    let (status, _, answer) = post_json(
        &service.url("/v1/check"),
        &json!({"domain": "api", "descriptors": vec![json!({"entries": [{"key": "nothing", "value": "x"}]}); 64]})
            .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["descriptors"].as_array().unwrap().len(), 64);

    // The service keeps answering.
    let (status, _, answer) = post_json(&service.url("/v1/check"), &check_body(&[("user", "still")])).await;
    assert_eq!((status, &answer["allowed"]), (200, &json!(true)));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_413_and_wrong_methods_405() {
    let service = start(RULES).await;
    for path in ["/v1/check", "/v1/peek", "/json"] {
        let mut big = check_body(&[("user", "big")]).into_bytes();
        big.resize(MAX_BODY_BYTES + 1, b' ');
        let (status, _, text) =
            http("POST", &service.url(path), big, &[("content-type", "application/json")]).await;
        assert_eq!(status, 413, "{path}: {text}");
        // Exactly the limit is read (and is valid JSON padded with spaces).
        let mut exact = check_body(&[("user", "exact")]).into_bytes();
        exact.resize(MAX_BODY_BYTES, b' ');
        let (status, _, text) =
            http("POST", &service.url(path), exact, &[("content-type", "application/json")]).await;
        assert_eq!(status, 200, "{path}: {text}");
    }
    // Without a content-length: a chunked body is cut off at the limit too.
    for path in ["/v1/check", "/json"] {
        assert_eq!(chunked_post(service.http, path, MAX_BODY_BYTES + 1).await, 413, "chunked {path}");
        assert_eq!(chunked_post(service.http, path, MAX_BODY_BYTES).await, 200, "chunked {path}");
    }
    for path in ["/v1/check", "/v1/peek"] {
        let (status, _, _) = http("GET", &service.url(path), Vec::new(), &[]).await;
        assert_eq!(status, 405, "GET {path}");
    }
    for path in ["/v1/status", "/v1/rules", "/healthz", "/readyz", "/metrics"] {
        let (status, _, _) = http("POST", &service.url(path), Vec::new(), &[]).await;
        assert_eq!(status, 405, "POST {path}");
    }
    let (status, _, _) = http("GET", &service.url("/no/such/path"), Vec::new(), &[]).await;
    assert_eq!(status, 404);
    // The checks are answered before the router, on their exact paths
    // (a query string aside), as the router would.
    let body = check_body(&[("user", "query")]).into_bytes();
    let (status, _, text) = http("POST", &service.url("/v1/check?trace=1"), body.clone(), &[]).await;
    assert_eq!(status, 200, "{text}");
    for path in ["/v1/check/", "/v1/checks", "/V1/check"] {
        let (status, _, _) = http("POST", &service.url(path), body.clone(), &[]).await;
        assert_eq!(status, 404, "POST {path}");
    }
    let (status, _, _) = http("PUT", &service.url("/v1/check"), body, &[]).await;
    assert_eq!(status, 405, "PUT /v1/check");
    // The service keeps answering.
    let (status, _, answer) = post_json(&service.url("/v1/check"), &check_body(&[("user", "after")])).await;
    assert_eq!((status, &answer["allowed"]), (200, &json!(true)));
    service.stop().await;
}

/// POSTs a valid check padded to `size` bytes with chunked transfer
/// encoding (no content-length), in 4 KiB chunks; returns the status.
async fn chunked_post(addr: std::net::SocketAddr, path: &str, size: usize) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut body = check_body(&[("user", "chunked")]).into_bytes();
    body.resize(size, b' ');
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    let mut request = head.into_bytes();
    for chunk in body.chunks(4096) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    // The server may answer and close before reading it all.
    let _ = stream.write_all(&request).await;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    // Up to the status line (the server may reset the connection after it).
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("{path}: no answer: {e}"),
        }
    }
    let line = String::from_utf8_lossy(&answer).into_owned();
    line.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no status line in {line:?}"))
}

// ---------------------------------------------------------------------------
// Status, rules, health, metrics

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_version_config_reload_and_store() {
    let service = start(RULES).await;
    let (status, _, text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(answer["version"], env!("CARGO_PKG_VERSION"));
    assert!(answer["started_unix_s"].as_u64().expect("started_unix_s") > 0);
    assert_eq!(answer["ready"], true);
    let hash = answer["config"]["hash"].as_str().expect("config.hash");
    assert_eq!(hash.len(), 16, "{hash}");
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{hash}");
    let rules = service.rules.to_str().expect("UTF-8 path");
    assert_eq!(answer["config"]["path"], rules);
    assert_eq!(answer["config"]["files"], json!([rules]));
    assert_eq!(answer["config"]["domains"], json!(["api"]));
    assert_eq!(answer["last_reload"]["result"], "ok");
    assert_eq!(answer["last_reload"]["errors"], json!([]));
    assert_eq!(answer["last_reload"]["config_hash"], hash);
    assert_eq!(answer["store"]["kind"], "memory");
    assert_eq!(answer["store"]["breaker"], "closed");
    assert_eq!(answer["store"]["failure_policy"], "fallback");
    assert_eq!(answer["store"]["on_store_failure"], "policy");
    assert_eq!(answer["shadow_mode"], false);
    service.stop().await;

    let shadow = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |c| c.shadow = true).await;
    let (_, _, text) = http("GET", &shadow.url("/v1/status"), Vec::new(), &[]).await;
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(answer["shadow_mode"], true);
    // Shadow mode decides and counts, and never denies.
    for _ in 0..5 {
        let (status, _, answer) = post_json(&shadow.url("/v1/check"), &check_body(&[("user", "s")])).await;
        assert_eq!(status, 200, "{answer}");
    }
    let (_, _, answer) = post_json(&shadow.url("/v1/check"), &check_body(&[("user", "s")])).await;
    assert_eq!(answer["descriptors"][0]["shadow_over_limit"], true);
    shadow.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_show_the_configuration_in_force() {
    let service = start(RULES).await;
    let (status, _, text) = http("GET", &service.url("/v1/rules"), Vec::new(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    let (_, _, status_text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    let status_json: Value = serde_json::from_str(&status_text).unwrap();
    assert_eq!(answer["hash"], status_json["config"]["hash"]);
    let domains = answer["domains"].as_array().expect("domains");
    assert_eq!(domains.len(), 1);
    assert_eq!(domains[0]["domain"], "api");
    assert_eq!(domains[0]["file"], service.rules.to_str().unwrap());
    let descriptors = domains[0]["descriptors"].as_array().expect("descriptors");
    let keys: Vec<&str> = descriptors.iter().map(|d| d["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["region", "tenant", "user"], "sorted by key");
    let user = &descriptors[2];
    assert!(user.get("value").is_none());
    let limits = user["limits"].as_array().expect("limits");
    assert_eq!(limits.len(), 1);
    let limit = &limits[0];
    assert_eq!(limit["name"], "per_user");
    assert_eq!(limit["requests_per_unit"], 3);
    assert_eq!(limit["window_ms"], 60_000);
    assert_eq!(limit["unit"], "minute");
    assert_eq!(limit["algorithm"], "log");
    assert_eq!(limit["shadow_mode"], false);
    let source = limit["source"].as_str().expect("source");
    assert!(source.starts_with(&format!("{}:", service.rules.display())), "{source}");
    let region = &descriptors[0]["limits"][0];
    assert_eq!(region["window_ms"], 90_000);
    assert_eq!(region["unit"], Value::Null);
    assert_eq!(region["algorithm"], "gcra");
    assert_eq!(descriptors[1]["limits"][0]["name"], Value::Null);
    assert_eq!(descriptors[1]["limits"][0]["unit"], "hour");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let service = start(RULES).await;
    let (status, _, text) = http("GET", &service.url("/healthz"), Vec::new(), &[]).await;
    assert_eq!((status, text.as_str()), (200, "ok\n"));
    let (status, _, text) = http("GET", &service.url("/readyz"), Vec::new(), &[]).await;
    assert_eq!((status, text.as_str()), (200, "ready\n"));

    // Some traffic through every API.
    let check = check_body(&[("user", "metrics")]);
    for _ in 0..4 {
        post_json(&service.url("/v1/check"), &check).await;
    }
    post_json(&service.url("/v1/peek"), &check).await;
    post_json(&service.url("/json"), &check).await;
    post_json(&service.url("/v1/check"), r#"{"domain":"api","descriptors":[]}"#).await;
    let mut client = service.client().await;
    support::should_rate_limit(&mut client, support::rls("api", &[&[("user", "grpc")]])).await;

    let (status, headers, text) = http("GET", &service.url("/metrics"), Vec::new(), &[]).await;
    assert_eq!(status, 200);
    assert!(header(&headers, "content-type").unwrap().starts_with("text/plain"), "{headers:?}");
    for (api, code) in [
        ("check", "ok"),
        ("check", "over_limit"),
        ("check", "invalid"),
        ("peek", "over_limit"),
        ("json", "over_limit"),
        ("rls", "ok"),
    ] {
        let value = metric(&text, "slidegate_service_requests_total", &[("api", api), ("code", code)])
            .unwrap_or_else(|| panic!("no requests_total{{api={api},code={code}}} in:\n{text}"));
        assert!(value >= 1.0, "{api} {code}: {value}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("slidegate_service_request_duration_seconds_bucket{")
            && l.contains("api=\"check\"")
            && l.contains("le=")),
        "no duration histogram in:\n{text}"
    );
    assert!(
        metric(&text, "slidegate_service_over_limit_total", &[("domain", "api"), ("limit", "api.user")])
            .is_some_and(|n| n >= 1.0),
        "no over_limit_total in:\n{text}"
    );
    service.stop().await;
}

/// A limit is named as configured, an unnamed one by its descriptor path
/// (its stats key): in the quota headers, the answers, RLS's
/// `current_limit.name` and the metrics — with envoy ratelimit's
/// per-limit counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_named_by_the_config_everywhere() {
    // Its own domain: the metrics are the process's, shared with the other tests.
    let service = with_headers(&RULES.replace("domain: api", "domain: names")).await;
    let check_body =
        |entries: &[(&str, &str)]| check_body(entries).replace(r#""domain":"api""#, r#""domain":"names""#);
    let body = check_body(&[("tenant", "t1")]);
    for _ in 0..9 {
        assert_eq!(post_json(&service.url("/v1/check"), &body).await.0, 200);
    }
    let (status, headers, answer) = post_json(&service.url("/v1/check"), &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "ratelimit-policy"), Some("\"names.tenant\";q=10;w=3600"));
    assert_eq!(answer["descriptors"][0]["limit"]["name"], Value::Null, "none configured: {answer}");
    assert_eq!(answer["descriptors"][0]["limit"]["descriptor"], "names.tenant", "{answer}");
    let (status, headers, answer) = post_json(&service.url("/v1/check"), &check_body(&[("user", "u")])).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "ratelimit-policy"), Some("\"per_user\";q=3;w=60"));
    assert_eq!(answer["descriptors"][0]["limit"]["descriptor"], "names.user", "{answer}");
    let (_, _, answer) = post_json(&service.url("/json"), &check_body(&[("tenant", "t2")])).await;
    assert_eq!(answer["statuses"][0]["currentLimit"]["name"], "names.tenant", "{answer}");

    let own = json!({"domain": "names", "descriptors": [{"entries": [{"key": "any", "value": "thing"}],
        "limit": {"requestsPerUnit": 5, "unit": "MINUTE"}}]});
    assert_eq!(post_json(&service.url("/json"), &own.to_string()).await.0, 200);
    let (_, _, text) = http("GET", &service.url("/metrics"), Vec::new(), &[]).await;
    let decisions = [("rule", "names.tenant"), ("outcome", "allowed")];
    assert_eq!(metric(&text, "slidegate_decisions_total", &decisions), Some(11.0), "{text}");
    let tenant = [("domain", "names"), ("limit", "names.tenant"), ("name", "names.tenant")];
    let user = [("domain", "names"), ("limit", "names.user"), ("name", "per_user")];
    let counter = |name: &str, labels: &[(&str, &str)]| {
        metric(&text, &format!("slidegate_rate_limit_{name}_total"), labels)
    };
    // Limit 10: t1's 9th and 10th hits take its count above 80 % (8).
    assert_eq!(
        ["total_hits", "within_limit", "near_limit", "over_limit", "shadow_mode"]
            .map(|n| counter(n, &tenant)),
        [Some(11.0), Some(11.0), Some(2.0), Some(0.0), Some(0.0)],
        "{text}"
    );
    assert_eq!(counter("total_hits", &user), Some(1.0), "{text}");
    // A descriptor's own limit is named by the request's values: its name
    // label is one for them all (its stats key is bounded as such keys are).
    let own = [("domain", "names"), ("limit", "names.any_thing"), ("name", "request")];
    assert_eq!(counter("total_hits", &own), Some(1.0), "{text}");
    service.stop().await;
}

/// A domain no rules file defines, or a descriptor no limit matches, is
/// admitted unlimited, as envoy ratelimit does — and shows: counted by
/// name in the metrics and listed in `/v1/stats` for the status page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_rules_do_not_know_are_counted_by_name() {
    let service = start(RULES).await;
    let typo = r#"{"domain":"apii","descriptors":[{"entries":[{"key":"user","value":"u"}]}]}"#;
    for _ in 0..2 {
        let (status, _, answer) = post_json(&service.url("/v1/check"), typo).await;
        assert_eq!((status, &answer["descriptors"][0]["limit"]), (200, &Value::Null), "{answer}");
    }
    let unmatched = check_body(&[("no_such_key", "x"), ("user", "u")]);
    assert_eq!(post_json(&service.url("/v1/check"), &unmatched).await.0, 200);

    let (_, _, stats) = http("GET", &service.url("/v1/stats"), Vec::new(), &[]).await;
    let stats: Value = serde_json::from_str(&stats).expect("stats");
    assert_eq!(stats["unknown_domains"], json!([{"name": "apii", "count": 2}]));
    assert_eq!(stats["unmatched_descriptors"], json!([{"name": "api: no_such_key, user", "count": 1}]));
    let (_, _, text) = http("GET", &service.url("/metrics"), Vec::new(), &[]).await;
    let unknown = metric(&text, "slidegate_service_unknown_domain_total", &[("domain", "apii")]);
    assert_eq!(unknown, Some(2.0), "{text}");
    let descriptor = [("descriptor", "api: no_such_key, user")];
    assert_eq!(metric(&text, "slidegate_service_unmatched_total", &descriptor), Some(1.0), "{text}");
    service.stop().await;
}

/// The value of the sample of `name` whose labels include `labels`.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        if metric != name {
            return None;
        }
        labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))).then(|| value.parse().ok())?
    })
}

// ---------------------------------------------------------------------------
// Admin

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_there_is_no_admin_route() {
    let service = start(RULES).await;
    let (status, _, _) =
        http("POST", &service.url("/v1/reload"), Vec::new(), &[("authorization", "Bearer anything")]).await;
    assert_eq!(status, 404);
    let (status, _, _) = http("POST", &service.url("/v1/reload"), Vec::new(), &[]).await;
    assert_eq!(status, 404);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reload_needs_the_token_and_keeps_good_rules_over_a_bad_file() {
    let service = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |config| {
        config.admin_token = Some(ADMIN_TOKEN.into());
        config.watch = false;
    })
    .await;
    let reload = service.url("/v1/reload");
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let refused: [&[(&str, &str)]; 5] = [
        &[],
        &[("authorization", "Bearer wrong-token-of-some-length")],
        &[("authorization", "Bearer a-long-enough-admin-toke")],
        &[("authorization", ADMIN_TOKEN)],
        &[("authorization", "Basic YWRtaW46YWRtaW4=")],
    ];
    for headers in refused {
        let (status, _, text) = http("POST", &reload, Vec::new(), headers).await;
        assert_eq!(status, 401, "{headers:?}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        assert!(answer["error"].as_str().unwrap().contains("admin token"), "{answer}");
    }
    let (_, _, text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    let hash = serde_json::from_str::<Value>(&text).unwrap()["config"]["hash"].clone();
    let (status, _, text) = http("POST", &reload, Vec::new(), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(answer["result"], "ok");
    assert_eq!(answer["changed"], false);
    assert_eq!(answer["config_hash"], hash);

    // Spend part of the limit, then break the file.
    let body = check_body(&[("user", "admin")]);
    let (_, _, answer) = post_json(&service.url("/v1/check"), &body).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 2);
    support::write(
        &service.rules,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 30\n",
    );
    let (status, _, text) = http("POST", &reload, Vec::new(), &[("authorization", &bearer)]).await;
    assert_eq!(status, 422, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(answer["result"], "error");
    assert_eq!(answer["config_hash"], hash, "the rules in force stay");
    let errors = answer["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{answer}");
    let error = errors[0].as_str().unwrap();
    assert!(error.starts_with(&format!("{}:5:13: ", service.rules.display())), "file:line:column: {error}");
    assert!(error.contains("fortnight"), "{error}");
    let (_, _, text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    let status_json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status_json["last_reload"]["result"], "error");
    assert_eq!(status_json["last_reload"]["errors"], json!([error]));
    assert_eq!(status_json["config"]["hash"], hash);

    // Checks still use the old rules, and their counters.
    let (status, _, answer) = post_json(&service.url("/v1/check"), &body).await;
    assert_eq!(status, 200);
    assert_eq!(answer["descriptors"][0]["limit"]["requests_per_unit"], 3);
    assert_eq!(answer["descriptors"][0]["remaining"], 1);

    // A good file is put in force by the next reload.
    support::write(&service.rules, &RULES.replace("requests_per_unit: 3", "requests_per_unit: 30"));
    let (status, _, text) = http("POST", &reload, Vec::new(), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!((&answer["result"], &answer["changed"]), (&json!("ok"), &json!(true)));
    assert_ne!(answer["config_hash"], hash);
    let (_, _, answer) = post_json(&service.url("/v1/check"), &body).await;
    assert_eq!(answer["descriptors"][0]["limit"]["requests_per_unit"], 30);
    assert_eq!(answer["descriptors"][0]["remaining"], 27, "a limit whose number changed keeps its count");
    service.stop().await;
}

/// A client that connects and says nothing, or sends a request's head
/// too slowly, is closed once the header timeout passes, on the HTTP
/// API's port and on gRPC's; so is an HTTP/1.1 connection idle that long
/// after an answer. An HTTP/2 connection is not: idle after a request, it
/// still answers the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_clients_are_closed_after_the_header_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    let timeout = std::time::Duration::from_millis(300);
    let service = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |config| {
        config.header_timeout = timeout;
    })
    .await;
    for addr in [service.http, service.grpc] {
        let silent = TcpStream::connect(addr).await.expect("connect");
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"POST /v1/check HTTP/1.1\r\nhost: x\r\n").await.expect("write");
        let mut kept = TcpStream::connect(addr).await.expect("connect");
        kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.expect("write");
        let mut head = [0u8; 12];
        kept.read_exact(&mut head).await.expect("an answer");
        assert!(head.starts_with(b"HTTP/1.1 "), "{addr}: {:?}", String::from_utf8_lossy(&head));
        for (what, mut stream) in [("silent", silent), ("slow", slow), ("kept alive", kept)] {
            let mut rest = Vec::new();
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(30), stream.read_to_end(&mut rest))
                    .await
                    .unwrap_or_else(|_| panic!("{addr}: the {what} connection was left open"));
            // Closed (or reset) by the server; the kept one after its answer.
            if read.is_ok() && what != "kept alive" {
                assert!(rest.is_empty(), "{addr} {what}: {:?}", String::from_utf8_lossy(&rest));
            }
        }
    }
    // HTTP/2 (h2c, as gRPC speaks it): one connection, idle for three
    // header timeouts between two requests.
    let stream = TcpStream::connect(service.http).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(connection);
    for round in 0..2 {
        if round == 1 {
            tokio::time::sleep(3 * timeout).await;
        }
        let request = http::Request::get(service.url("/healthz"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let answer = sender.send_request(request).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(answer.status(), 200, "round {round}");
    }
}
