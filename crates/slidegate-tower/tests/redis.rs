//! The layer on a real Redis: concurrent requests admit exactly the limit,
//! with one rule and with global + per-IP + per-user rules together, and a
//! dead Redis is answered by the failure policy, visible in a header only
//! when enabled.
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
use slidegate::store::Request as StoreRequest;
use slidegate::{FailurePolicy, Limiter, MultiDecision, Rule, Source, Store};
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

#[derive(Clone)]
struct User(u32);

/// Global + per-IP + per-user rules on one Redis, 300 concurrent requests
/// from 6 users behind 3 addresses: every rule's limit is exact, and a
/// request denied by one rule charged none (all-or-nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_rules_on_redis_are_exact_together() {
    let server = RedisServer::start().expect("start redis-server");
    let store = store(&server, "tower:multi:").await;
    let limiter = Limiter::builder(store.clone()).deadline(Duration::from_secs(5)).build();
    let global = Rule::per_minute(NonZeroU32::new(40).unwrap()).named("global").unwrap();
    let per_ip = Rule::per_minute(NonZeroU32::new(10).unwrap()).named("per-ip").unwrap();
    let per_user = Rule::per_minute(NonZeroU32::new(4).unwrap()).named("per-user").unwrap();
    let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(limiter)
            .rule(global.clone(), slidegate_tower::Global)
            .rule(per_ip.clone(), PeerIp)
            .rule(per_user.clone(), slidegate_tower::FromExtension::new(|user: &User| user.0.to_string())),
    );
    let responses = join_all((0..300u32).map(|i| {
        let app = app.clone();
        tokio::spawn(async move {
            let user = i % 6;
            let mut request = Request::get("/").body(Body::empty()).unwrap();
            let peer: SocketAddr = format!("192.0.2.{}:5000", user % 3).parse().unwrap();
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(User(user));
            (user, app.oneshot(request).await.unwrap().status())
        })
    }))
    .await;
    let mut per_user_ok = [0u32; 6];
    for response in responses {
        let (user, status) = response.unwrap();
        if status == StatusCode::OK {
            per_user_ok[user as usize] += 1;
        }
    }
    // Each user 4 (per-user binds: 2 users per address, 8 < 10 per IP;
    // 24 < 40 globally).
    assert_eq!(per_user_ok, [4; 6]);
    // Nothing was charged for the denied requests: the global and per-IP
    // states hold exactly the admitted ones (a probe takes one more).
    for (rule, key, admitted) in [(&global, "global", 24), (&per_ip, "192.0.2.0", 8)] {
        let probe =
            store.check(&StoreRequest::new(rule, key, 1).expect("valid request")).await.expect("check");
        assert_eq!((probe.allowed, probe.remaining), (true, rule.limit() - admitted - 1), "{rule} {key}");
    }
    assert!(
        !store
            .check(&StoreRequest::new(&per_user, "0", 1).expect("valid request"))
            .await
            .expect("check")
            .allowed
    );
}

/// Script calls the server has run (`INFO commandstats`).
fn script_calls(server: &RedisServer) -> u64 {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    stream.write_all(b"INFO commandstats\r\n").expect("send");
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).expect("reply");
    let len: usize = header.trim_start_matches('$').trim_end().parse().expect("a bulk string");
    let mut stats = vec![0; len];
    reader.read_exact(&mut stats).expect("the whole reply");
    String::from_utf8_lossy(&stats)
        .lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .filter_map(|line| line.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// An attack from one address: after the first denial, the layer answers
/// 429 from the limiter's deny cache without a script call, with the same
/// `Retry-After`, for one rule and beside other rules (global + per-IP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attack_through_the_layer_is_answered_from_the_deny_cache() {
    let server = RedisServer::start().expect("start redis-server");
    let per_ip = Rule::per_minute(NonZeroU32::new(5).unwrap()).named("attack-ip").unwrap();
    let global = Rule::per_minute(NonZeroU32::new(10_000).unwrap()).named("attack-global").unwrap();
    let one = RateLimitLayer::new(Limiter::new(store(&server, "tower:attack1:").await))
        .rule(per_ip.clone(), PeerIp);
    let two = RateLimitLayer::new(Limiter::new(store(&server, "tower:attack2:").await))
        .rule(global, slidegate_tower::Global)
        .rule(per_ip, PeerIp);
    for layer in [one, two] {
        let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(layer);
        for _ in 0..5 {
            assert_eq!(app.clone().oneshot(request()).await.unwrap().status(), StatusCode::OK);
        }
        let first = app.clone().oneshot(request()).await.unwrap();
        assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
        let calls = script_calls(&server);
        for _ in 0..200 {
            let denied = app.clone().oneshot(request()).await.unwrap();
            assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
            let retry: u64 = denied.headers()["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&retry), "retry-after {retry}");
        }
        assert_eq!(script_calls(&server), calls, "the attack never reached Redis");
        // A cached denial says what the store's did, in the same headers.
        let cached = app.clone().oneshot(request()).await.unwrap();
        let names = |r: &http::Response<Body>| r.headers().keys().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&cached), names(&first));
        for header in ["ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "content-type"] {
            assert_eq!(cached.headers()[header], first.headers()[header], "{header}");
        }
        let source = cached.extensions().get::<MultiDecision>().and_then(|m| m.binding()).map(|d| d.source);
        assert_eq!(source, Some(Source::DenyCache));
        // Another address still reaches Redis and is admitted.
        let mut other = Request::get("/").body(Body::empty()).unwrap();
        other.extensions_mut().insert(ConnectInfo("192.0.2.99:5000".parse::<SocketAddr>().unwrap()));
        assert_eq!(app.oneshot(other).await.unwrap().status(), StatusCode::OK);
        assert_eq!(script_calls(&server), calls + 1);
    }
}

/// A denial the deny cache holds is answered at once: ready when first
/// polled, without Redis or the inner service.
#[tokio::test]
async fn a_cached_denial_is_ready_at_once() {
    use futures::FutureExt as _;
    use tower::{Layer as _, Service as _};

    let server = RedisServer::start().expect("start redis-server");
    let rule = Rule::per_minute(NonZeroU32::new(1).unwrap()).named("ready").unwrap();
    let layer = RateLimitLayer::new(Limiter::new(store(&server, "tower:ready:").await)).rule(rule, PeerIp);
    let inner_calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&inner_calls);
    let mut service = layer.layer(tower::service_fn(move |_: Request<Body>| {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { Ok::<_, std::convert::Infallible>(http::Response::new(Body::from("ok"))) }
    }));
    for status in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        let response = service.ready().await.unwrap().call(request()).await.unwrap();
        assert_eq!(response.status(), status);
    }
    let calls = script_calls(&server);
    let now = service.ready().await.unwrap().call(request()).now_or_never();
    let response = now.expect("ready when first polled").unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!((script_calls(&server), inner_calls.load(std::sync::atomic::Ordering::Relaxed)), (calls, 1));
}
