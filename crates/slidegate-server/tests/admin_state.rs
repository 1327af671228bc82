//! `DELETE /v1/state`: an operator forgets one descriptor's counters — on
//! the embedded store and on Redis, with the admin token only.

mod support;

use slidegate_redis::RedisStore;
use slidegate_server::ServiceStore;
use slidegate_testkit::RedisServer;
use support::{http, post_json, start_with, unique_prefix};

const RULES: &str = "
domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2 }
";

const TOKEN: &str = "an-admin-token-long-enough";

fn body(user: &str) -> String {
    format!(r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#)
}

async fn resets_one_descriptor(store: ServiceStore) {
    let service = start_with(RULES, store, |c| c.admin_token = Some(TOKEN.into())).await;
    let check = service.url("/v1/check");
    for user in ["alice", "bob"] {
        for _ in 0..2 {
            assert_eq!(post_json(&check, &body(user)).await.0, 200);
        }
        assert_eq!(post_json(&check, &body(user)).await.0, 429);
    }
    let state = service.url("/v1/state");
    let (status, _, _) = http("DELETE", &state, body("alice"), &[]).await;
    assert_eq!(status, 401, "no token");
    let (status, _, _) =
        http("DELETE", &state, body("alice"), &[("authorization", "Bearer wrong-token-xxxxxxxx")]).await;
    assert_eq!(status, 401, "a wrong token");
    let bearer = format!("Bearer {TOKEN}");
    let (status, _, text) =
        http("DELETE", &state, body("alice"), &[("authorization", bearer.as_str())]).await;
    assert_eq!(status, 200, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(answer["reset"], 1);
    let (status, _, json) = post_json(&check, &body("alice")).await;
    assert_eq!((status, json["descriptors"][0]["remaining"].as_u64()), (200, Some(1)), "a full quota again");
    assert_eq!(post_json(&check, &body("bob")).await.0, 429, "bob keeps his");
    let (status, _, text) = http("DELETE", &state, "{not json", &[("authorization", bearer.as_str())]).await;
    assert_eq!(status, 400, "{text}");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_one_descriptor_on_the_embedded_store() {
    resets_one_descriptor(ServiceStore::Memory(slidegate::MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_one_descriptor_on_redis() {
    let server = RedisServer::start().expect("redis-server");
    let store =
        RedisStore::builder(server.url()).prefix(unique_prefix("state")).connect().await.expect("connect");
    resets_one_descriptor(ServiceStore::Redis(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_there_is_no_admin_api() {
    let service = support::start(RULES).await;
    let (status, _, _) = http("DELETE", &service.url("/v1/state"), body("alice"), &[]).await;
    assert_eq!(status, 404);
    let (status, _, _) = http("POST", &service.url("/v1/reload"), "", &[]).await;
    assert_eq!(status, 404);
    service.stop().await;
}
