//! `--shadow`, a limit's `shadow_mode` and `--on-store-failure
//! unavailable` hold on every edge of one service: RLS over gRPC,
//! `/v1/check` and the gateway, each deciding through the same limiter.

#[path = "support/edges.rs"]
mod edges;
mod support;

use std::net::SocketAddr;

use edges::Edges;
use serde_json::Value;
use slidegate::MemoryStore;
use slidegate_redis::RedisStore;
use slidegate_server::{OnStoreFailure, ServerConfig, ServiceStore};
use slidegate_testkit::Upstream;

/// The same limit on each edge: 3 per minute, by route.
const RULES: &str = "\
domain: edge
descriptors:
  - key: route
    rate_limit: { unit: minute, requests_per_unit: 3 }
";

/// One route, `route` (metrics are the process's: each test has its own).
fn gateway_yaml(route: &str, upstream: SocketAddr, limits: &str) -> String {
    format!("routes:\n  - name: {route}\n    upstreams: [http://{upstream}]\n    limits:\n{limits}")
}

const ONE_LIMIT: &str = "      - { key: route, requests_per_unit: 3, window: 1m }\n";

/// `Edges` with these rules, and the calls the tests below make.
async fn start(store: ServiceStore, gateway: &str, adjust: impl FnOnce(&mut ServerConfig)) -> Edges {
    Edges::start(store, RULES, gateway, adjust).await
}

/// One request through the gateway: its status.
async fn through_gateway(edges: &Edges) -> u16 {
    edges.gateway_get("/x").await.0
}

/// One `/v1/check` of `route=r`: its status and answer.
async fn check(edges: &Edges) -> (u16, Value) {
    let body = r#"{"domain":"edge","descriptors":[{"entries":[{"key":"route","value":"r"}]}]}"#;
    let (status, _, answer) = edges.check(body).await;
    (status, answer)
}

/// One RLS call of `route=r`: its overall code, or the gRPC error's code.
async fn rls(edges: &Edges) -> Result<i32, tonic::Code> {
    let answer = edges.rls(support::rls("edge", &[&[("route", "r")]])).await;
    answer.map(|r| r.overall_code).map_err(|e| e.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_admits_everything_on_every_edge_and_counts_the_denials() {
    let upstream = Upstream::start();
    let store = ServiceStore::Memory(MemoryStore::new());
    let edges = start(store, &gateway_yaml("s", upstream.addr(), ONE_LIMIT), |c| c.shadow = true).await;

    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(through_gateway(&edges).await);
    }
    assert_eq!(statuses, [200; 6], "the gateway denies no one in shadow mode");
    assert_eq!(upstream.requests(), 6);
    let shadow = [("domain", "gateway"), ("limit", "gateway.route_s.route")];
    assert_eq!(edges.metric("slidegate_shadow_over_limit_total", &shadow).await, 3.0);

    for i in 0..6 {
        assert_eq!(rls(&edges).await, Ok(support::OK), "RLS request {i}");
    }
    for i in 0..2 {
        let (status, answer) = check(&edges).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["descriptors"][0]["shadow_over_limit"], true, "check {i}: {answer}");
    }
    let rls_shadow = [("domain", "edge")];
    assert_eq!(edges.metric("slidegate_shadow_over_limit_total", &rls_shadow).await, 5.0, "3 + 2 over 3");
    let decisions = async |rule: &str| {
        edges.metric("slidegate_decisions_total", &[("rule", rule), ("outcome", "shadow")]).await
    };
    assert_eq!(
        (decisions("s.route").await, decisions("edge.route").await),
        (3.0, 5.0),
        "counted by the limiter"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_limit_in_shadow_mode_admits_and_the_others_still_deny() {
    let upstream = Upstream::start();
    let limits = "      - { name: trial, key: route, requests_per_unit: 1, window: 1m, shadow_mode: true }\n\
                  \x20     - { name: enforced, key: route, requests_per_unit: 3, window: 1m }\n";
    let store = ServiceStore::Memory(MemoryStore::new());
    let edges = start(store, &gateway_yaml("t", upstream.addr(), limits), |_| {}).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(through_gateway(&edges).await);
    }
    assert_eq!(
        statuses,
        [200, 200, 200, 429],
        "the shadow limit denies from the second, the other from the fourth"
    );
    let gateway = edges.url("/v1/gateway");
    let (_, _, view) = support::http("GET", &gateway, "", &[]).await;
    assert!(view.contains("\"shadow_mode\":true"), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_is_unavailable_on_every_edge_when_configured() {
    let upstream = Upstream::start();
    // Nothing listens there: every store call fails.
    let nowhere = format!("redis://127.0.0.1:{}/", slidegate_testkit::free_port().expect("a free port"));
    let store = RedisStore::builder(nowhere).lazy(true).connect().await.expect("a lazy store");
    let edges =
        start(ServiceStore::Redis(store.clone()), &gateway_yaml("u", upstream.addr(), ONE_LIMIT), |c| {
            c.on_store_failure = OnStoreFailure::Unavailable;
        })
        .await;
    assert_eq!(through_gateway(&edges).await, 503);
    assert_eq!(upstream.requests(), 0, "not forwarded");
    assert_eq!(rls(&edges).await, Err(tonic::Code::Unavailable));
    assert_eq!(check(&edges).await.0, 503);
    let (_, _, status) = support::http("GET", &edges.url("/v1/status"), "", &[]).await;
    assert!(status.contains("\"on_store_failure\":\"unavailable\""), "{status}");
    drop(edges);

    // The failure policy answers otherwise: the fallback admits, degraded.
    let edges =
        start(ServiceStore::Redis(store), &gateway_yaml("u", upstream.addr(), ONE_LIMIT), |_| {}).await;
    assert_eq!(through_gateway(&edges).await, 200);
    assert_eq!(rls(&edges).await, Ok(support::OK));
    assert_eq!(upstream.requests(), 1);
}

/// A gateway limit whose `requests_per_unit` is edited keeps what it
/// counted, as a rules file's does (`reload.rs`): on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_gateway_limit_keeps_its_count_on_redis() {
    let upstream = Upstream::start();
    let redis = slidegate_testkit::RedisServer::start().expect("redis-server");
    let store = RedisStore::connect(&redis.url()).await.expect("connect");
    let edges =
        start(ServiceStore::Redis(store), &gateway_yaml("v", upstream.addr(), ONE_LIMIT), |_| {}).await;
    for _ in 0..2 {
        assert_eq!(through_gateway(&edges).await, 200);
    }
    let hash = async || {
        let (_, _, view) = support::http("GET", &edges.url("/v1/gateway"), "", &[]).await;
        serde_json::from_str::<Value>(&view).expect("JSON")["hash"].clone()
    };
    let before = hash().await;
    let edited = gateway_yaml(
        "v",
        upstream.addr(),
        &ONE_LIMIT.replace("requests_per_unit: 3", "requests_per_unit: 4"),
    );
    support::write(&edges.dir.path().join("gateway.yaml"), &edited);
    support::eventually("the edited file in force", async || hash().await != before).await;
    // 2 counted under 3; under 4, two more fit.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(through_gateway(&edges).await);
    }
    assert_eq!(statuses, [200, 200, 429]);
}
