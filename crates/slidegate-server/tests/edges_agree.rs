//! One limit declared three ways — an RLS rule, a gateway route limit and
//! a tower-layer rule — decides alike on every edge: the same decisions,
//! the same quota headers and the same Redis counter for the same
//! traffic, also for a weight above the limit, in shadow mode and while
//! the store fails.
//!
//! The gateway's limit `per_ip` of route `r`, keyed by the client's
//! address, counts as the rules file's descriptor `route=r` → `client_ip`
//! with a limit named `r.per_ip` in the domain `gateway`; a tower-layer
//! rule of that name, keyed by the identity the service spells for that
//! descriptor, counts in the same Redis key.

#[path = "support/edges.rs"]
mod edges;
mod support;

use std::borrow::Cow;
use std::convert::Infallible;
use std::num::NonZeroU32;

use edges::Edges;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::request::Parts;
use http::{HeaderMap, Request, Response};
use slidegate::{FailurePolicy, Limiter, MemoryStore, Rule};
use slidegate_redis::RedisStore;
use slidegate_server::{HeaderFamilies, OnStoreFailure, ServiceStore};
use slidegate_testkit::{RedisServer, Upstream};
use slidegate_tower::{KeyExtractor, RateLimitLayer};
use tower::{Layer as _, ServiceExt as _};

/// The limit as a rules file declares it.
const RULES: &str = "\
domain: gateway
descriptors:
  - key: route
    value: r
    descriptors:
      - key: client_ip
        rate_limit: { name: r.per_ip, unit: hour, requests_per_unit: 3 }
";

/// The same limit as a gateway route's.
fn gateway_yaml(upstream: &Upstream) -> String {
    format!(
        "routes:\n  - name: r\n    upstreams: [http://{}]\n    limits:\n      \
         - {{ name: per_ip, key: client_ip, requests_per_unit: 3, window: 1h }}\n",
        upstream.addr()
    )
}

/// The counter the service spells for 127.0.0.1 under that limit: the
/// domain, the entries, the limit's position, name and window.
const IDENTITY: &str = "7:gateway5:route1:r9:client_ip9:127.0.0.1|0#r.per_ip@3600000";

/// The same limit as a tower-layer rule, keyed by that identity.
struct ServiceIdentity;

impl KeyExtractor for ServiceIdentity {
    fn extract<'a>(&self, _: &'a Parts) -> Option<Cow<'a, str>> {
        Some(Cow::Borrowed(IDENTITY))
    }
}

/// One request through a tower layer of the limit on `limiter`, weighing
/// `cost`: the answer's status and headers.
async fn through_tower(limiter: &Limiter<RedisStore>, cost: u32) -> (u16, HeaderMap) {
    let rule = Rule::per_hour(NonZeroU32::new(3).expect("3")).named("r.per_ip").expect("a name");
    let layer = RateLimitLayer::new(limiter.clone())
        .rule(rule, ServiceIdentity)
        .ietf_headers(true)
        .legacy_headers(true)
        .cost(move |_| cost);
    let service = layer.layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    }));
    let Ok(response) = service.oneshot(Request::new(())).await;
    (response.status().as_u16(), response.headers().clone())
}

/// The RLS request of the descriptor, weighing `hits`.
fn rls_request(hits: u64) -> RateLimitRequest {
    let mut request = support::rls("gateway", &[&[("route", "r"), ("client_ip", "127.0.0.1")]]);
    request.descriptors[0].hits_addend = Some(envoy_types::pb::google::protobuf::UInt64Value { value: hits });
    request
}

/// The `/v1/check` body of the descriptor, weighing `hits`.
fn check_body(hits: u64) -> String {
    format!(
        r#"{{"domain":"gateway","descriptors":[{{"hits_addend":{hits},"entries":[{{"key":"route","value":"r"}},{{"key":"client_ip","value":"127.0.0.1"}}]}}]}}"#
    )
}

/// The quota headers of an answer, by name.
const QUOTA: [&str; 6] = [
    "ratelimit",
    "ratelimit-policy",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "retry-after",
];

fn quota_of_map(headers: &HeaderMap) -> Vec<(String, String)> {
    QUOTA
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), headers.get(*name)?.to_str().ok()?.to_owned())))
        .collect()
}

fn quota_of_rls(answer: &RateLimitResponse) -> Vec<(String, String)> {
    QUOTA
        .iter()
        .filter_map(|name| {
            let header = answer.response_headers_to_add.iter().find(|h| h.key.eq_ignore_ascii_case(name))?;
            Some(((*name).to_owned(), header.value.clone()))
        })
        .collect()
}

/// Everything but its figures: the headers an answer would carry.
fn families() -> HeaderFamilies {
    HeaderFamilies::new(true, true, false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_limit_decides_alike_on_every_edge_in_one_redis_counter() {
    let redis = RedisServer::start().expect("redis-server");
    let store = RedisStore::connect(&redis.url()).await.expect("connect");
    let upstream = Upstream::start();
    let edges = Edges::start(ServiceStore::Redis(store.clone()), RULES, &gateway_yaml(&upstream), |config| {
        config.headers = families();
    })
    .await;
    let tower = Limiter::new(store);

    // One request on each edge: all three charge the one counter.
    assert_eq!(edges.gateway_get("/x").await.0, 200);
    assert_eq!(edges.rls(rls_request(1)).await.expect("RLS").overall_code, support::OK);
    assert_eq!(through_tower(&tower, 1).await.0, 200);
    assert_eq!(redis.command("DBSIZE").expect("DBSIZE"), ":1", "one counter in Redis");

    // Spent: every edge denies, with the same quota headers.
    let (gateway_status, gateway_headers, _) = edges.gateway_get("/x").await;
    let rls = edges.rls(rls_request(1)).await.expect("RLS");
    let (tower_status, tower_headers) = through_tower(&tower, 1).await;
    let (check_status, check_headers, _) = edges.check(&check_body(1)).await;
    assert_eq!(
        (gateway_status, rls.overall_code, tower_status, check_status),
        (429, support::OVER_LIMIT, 429, 429)
    );
    let gateway = quota_of_map(&gateway_headers);
    assert_eq!(gateway.len(), QUOTA.len(), "every quota header: {gateway:?}");
    assert_eq!(quota_of_rls(&rls), gateway, "RLS");
    assert_eq!(quota_of_map(&tower_headers), gateway, "tower layer");
    assert_eq!(quota_of_map(&check_headers), gateway, "/v1/check");
    assert_eq!(redis.command("DBSIZE").expect("DBSIZE"), ":1", "still one counter");

    // The service's edges count their denials alike: one identity among
    // the most limited, one denial each in the metrics.
    let (_, _, stats) = support::http("GET", &edges.url("/v1/stats"), "", &[]).await;
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("stats");
    let top = stats["top_limited"].as_array().expect("top_limited");
    assert_eq!(top.len(), 1, "{top:?}");
    assert_eq!(top[0]["identity"], "gateway: route=r, client_ip=127.0.0.1");
    assert_eq!(top[0]["count"], 3, "gateway, RLS and /v1/check");
    let over_limit = edges
        .metric(
            "slidegate_service_over_limit_total",
            &[("domain", "gateway"), ("limit", "gateway.route_r.client_ip")],
        )
        .await;
    assert_eq!(over_limit, 3.0);

    // A weight above the limit: denied on every edge that weighs, without
    // Retry-After (no wait admits it), with the same headers.
    let rls = edges.rls(rls_request(5)).await.expect("RLS");
    let (tower_status, tower_headers) = through_tower(&tower, 5).await;
    let (check_status, check_headers, _) = edges.check(&check_body(5)).await;
    assert_eq!((rls.overall_code, tower_status, check_status), (support::OVER_LIMIT, 429, 429));
    let heavy = quota_of_rls(&rls);
    assert!(!heavy.iter().any(|(name, _)| name == "retry-after"), "{heavy:?}");
    assert_eq!(quota_of_map(&tower_headers), heavy, "tower layer");
    assert_eq!(quota_of_map(&check_headers), heavy, "/v1/check");
}

/// The limit's per-limit counters (envoy ratelimit's) carry the same
/// labels whichever edge decided: the descriptor the limit counts as, and
/// its name. (Route `c`: the metrics are the process's, shared with the
/// other tests here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_edge_counts_in_the_same_per_limit_counters() {
    let upstream = Upstream::start();
    let rules = RULES.replace("value: r\n", "value: c\n").replace("r.per_ip", "c.per_ip");
    let gateway = gateway_yaml(&upstream).replace("name: r\n", "name: c\n");
    let edges = Edges::start(ServiceStore::Memory(MemoryStore::new()), &rules, &gateway, |_| {}).await;
    let rls = || support::rls("gateway", &[&[("route", "c"), ("client_ip", "127.0.0.1")]]);
    let check = check_body(1).replace(r#""value":"r""#, r#""value":"c""#);
    assert_eq!(edges.gateway_get("/x").await.0, 200);
    assert_eq!(edges.rls(rls()).await.expect("RLS").overall_code, support::OK);
    assert_eq!(edges.check(&check).await.0, 200);
    assert_eq!(edges.gateway_get("/x").await.0, 429);
    assert_eq!(edges.rls(rls()).await.expect("RLS").overall_code, support::OVER_LIMIT);
    assert_eq!(edges.check(&check).await.0, 429);
    let limit = [("domain", "gateway"), ("limit", "gateway.route_c.client_ip"), ("name", "c.per_ip")];
    let counter =
        async |name: &str| edges.metric(&format!("slidegate_rate_limit_{name}_total"), &limit).await;
    let mut seen = Vec::new();
    for name in ["total_hits", "within_limit", "near_limit", "over_limit", "shadow_mode"] {
        seen.push(counter(name).await);
    }
    assert_eq!(seen, [6.0, 3.0, 1.0, 3.0, 0.0], "total, within, near (the third of 3), over, shadow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_shadow_mode_every_edge_admits_and_reports_alike() {
    let redis = RedisServer::start().expect("redis-server");
    let store = RedisStore::connect(&redis.url()).await.expect("connect");
    let upstream = Upstream::start();
    let edges = Edges::start(ServiceStore::Redis(store.clone()), RULES, &gateway_yaml(&upstream), |config| {
        config.headers = families();
        config.shadow = true;
    })
    .await;
    let tower = Limiter::builder(store).shadow(true).build();
    for _ in 0..2 {
        assert_eq!(edges.gateway_get("/x").await.0, 200);
        assert_eq!(edges.rls(rls_request(1)).await.expect("RLS").overall_code, support::OK);
        assert_eq!(through_tower(&tower, 1).await.0, 200);
    }
    // The last three were over the limit: admitted, reported alike.
    let (gateway_status, gateway_headers, _) = edges.gateway_get("/x").await;
    let rls = edges.rls(rls_request(1)).await.expect("RLS");
    let (tower_status, tower_headers) = through_tower(&tower, 1).await;
    assert_eq!((gateway_status, rls.overall_code, tower_status), (200, support::OK, 200));
    let gateway = quota_of_map(&gateway_headers);
    assert!(gateway.contains(&("x-ratelimit-remaining".into(), "0".into())), "{gateway:?}");
    assert_eq!(quota_of_rls(&rls), gateway, "RLS");
    assert_eq!(quota_of_map(&tower_headers), gateway, "tower layer");
    assert_eq!(upstream.requests(), 3, "the gateway forwarded every request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_fails_every_edge_alike() {
    // Nothing listens there: every store call fails.
    let nowhere = format!("redis://127.0.0.1:{}/", slidegate_testkit::free_port().expect("a port"));
    let store = RedisStore::builder(nowhere).lazy(true).connect().await.expect("a lazy store");
    let upstream = Upstream::start();
    let edges = Edges::start(ServiceStore::Redis(store.clone()), RULES, &gateway_yaml(&upstream), |config| {
        config.headers = families();
        config.on_store_failure = OnStoreFailure::Unavailable;
    })
    .await;
    let tower = Limiter::builder(store).failure_policy(FailurePolicy::Fail).build();
    assert_eq!(edges.gateway_get("/x").await.0, 503);
    assert_eq!(edges.rls(rls_request(1)).await.expect_err("UNAVAILABLE").code(), tonic::Code::Unavailable);
    assert_eq!(through_tower(&tower, 1).await.0, 503);
    assert_eq!(edges.check(&check_body(1)).await.0, 503);
    assert_eq!(upstream.requests(), 0);
}
