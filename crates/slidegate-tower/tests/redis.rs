//! The layer on a real Redis: concurrent requests admit exactly the limit,
//! and a dead Redis is answered by the failure policy, visible in a header
//! only when enabled.
#![cfg(feature = "axum")] // run by scripts/test with --all-features

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use futures::future::join_all;
use http::{Request, StatusCode};
use slidegate::{FailurePolicy, Limiter, Rule};
use slidegate_redis::RedisStore;
use slidegate_testkit::RedisServer;
use slidegate_tower::{PeerIp, RateLimitLayer};
use tower::ServiceExt;

fn request() -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo("192.0.2.1:5000".parse::<SocketAddr>().unwrap()));
    request
}

async fn store(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::builder(server.url()).prefix(prefix).connect().await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_admit_exactly_the_limit() {
    let server = RedisServer::start().expect("start redis-server");
    let limiter =
        Limiter::builder(store(&server, "tower:exact:").await).deadline(Duration::from_secs(5)).build();
    let rule = Rule::per_minute(NonZeroU32::new(25).unwrap()).named("exact").unwrap();
    let app: Router = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter).rule(rule, PeerIp));
    let responses = join_all((0..200).map(|_| {
        let app = app.clone();
        tokio::spawn(async move { app.oneshot(request()).await.unwrap().status() })
    }))
    .await;
    let ok = responses.iter().filter(|s| *s.as_ref().unwrap() == StatusCode::OK).count();
    let limited = responses.iter().filter(|s| *s.as_ref().unwrap() == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!((ok, limited), (25, 175));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_is_degraded_and_says_so_only_when_asked() {
    let mut server = RedisServer::start().expect("start redis-server");
    let rule = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("degraded").unwrap();
    let quiet = Limiter::builder(store(&server, "tower:quiet:").await)
        .failure_policy(FailurePolicy::FailOpen)
        .build();
    let loud =
        Limiter::builder(store(&server, "tower:loud:").await).failure_policy(FailurePolicy::FailOpen).build();
    let app = |limiter, header| -> Router {
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter).rule(rule.clone(), PeerIp).degraded_header(header))
    };
    let (quiet, loud) = (app(quiet, false), app(loud, true));
    let healthy = loud.clone().oneshot(request()).await.unwrap();
    assert!(healthy.headers().get("x-ratelimit-degraded").is_none());
    server.kill();
    let quiet = quiet.oneshot(request()).await.unwrap();
    assert_eq!(quiet.status(), StatusCode::OK, "fail-open admits");
    assert!(quiet.headers().get("x-ratelimit-degraded").is_none(), "not shown unless enabled");
    let loud = loud.oneshot(request()).await.unwrap();
    assert_eq!(loud.status(), StatusCode::OK);
    assert_eq!(loud.headers()["x-ratelimit-degraded"], "1");
}
