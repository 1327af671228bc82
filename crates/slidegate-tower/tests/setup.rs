//! What the layer does beyond the happy path: setup mistakes refused when
//! rules are added, free and impossible costs, stacked layers, warnings
//! and bans, route keys, forwarding headers clients cannot abuse, the
//! `Accept` header, and the failure policies answering through the layer.
#![cfg(feature = "axum")] // run by scripts/test with --all-features

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use slidegate::limits::MAX_DIMENSIONS;
use slidegate::{
    Decision, Error, ErrorKind, FailurePolicy, Limiter, ManualClock, MemoryStore, Penalty, Rule, Store,
};
use slidegate_tower::{
    ClientIp, ForwardedHeader, Global, LimitedKeys, MatchedPath, MissingKey, Path, PeerIp, RateLimitLayer,
};
use tower::ServiceExt;

fn rule(limit: u32, name: &str) -> Rule {
    Rule::per_minute(NonZeroU32::new(limit).unwrap()).named(name).unwrap()
}

fn limiter(clock: &ManualClock) -> Limiter<MemoryStore> {
    Limiter::new(MemoryStore::builder().clock(clock.clone()).build())
}

fn request(uri: &str, peer: &str) -> Request<Body> {
    let mut request = Request::get(uri).body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    request
}

async fn send(app: &Router, request: Request<Body>) -> (Response<()>, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    (Response::from_parts(parts, ()), text)
}

fn header<'a>(response: &'a Response<()>, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

#[test]
fn setup_mistakes_are_refused_when_rules_are_added() {
    let layer = || RateLimitLayer::new(Limiter::in_memory());
    let mut full = layer();
    for i in 0..MAX_DIMENSIONS {
        full = full.try_rule_or(rule(10, &format!("r{i}")), Global, MissingKey::default()).unwrap();
    }
    let err = full.try_rule_or(rule(10, "one-more"), Global, MissingKey::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    assert!(err.to_string().contains(&format!("at most {MAX_DIMENSIONS} rules")), "{err}");

    let twice = layer().rule(rule(10, "api"), PeerIp);
    let err = twice.try_rule_or(rule(99, "api"), Global, MissingKey::default()).unwrap_err();
    assert!(err.to_string().contains("same state"), "{err}");
    let unnamed = Rule::per_minute(NonZeroU32::new(5).unwrap());
    let err = layer()
        .rule(unnamed.clone(), PeerIp)
        .try_rule_or(unnamed, Global, MissingKey::default())
        .unwrap_err();
    assert!(err.to_string().contains("give them different names"), "{err}");

    let err = layer().try_rule_or(rule(1, "empty"), PeerIp, MissingKey::Shared("".into())).unwrap_err();
    assert!(err.to_string().contains("must not be empty"), "{err}");

    let panicked = std::panic::catch_unwind(|| layer().rule(rule(1, "x"), Global).rule(rule(2, "x"), PeerIp));
    assert!(panicked.is_err(), "rule() panics on a setup mistake, as axum's router does");
}

#[tokio::test]
async fn free_and_impossible_costs() {
    let clock = ManualClock::new(0);
    let layer = RateLimitLayer::new(limiter(&clock)).rule(rule(10, "weighted"), Global).cost(|parts| {
        match parts.uri.path() {
            "/health" => 0,
            "/huge" => 11,
            _ => 10,
        }
    });
    let app = Router::new().route("/{*path}", get(|| async { "ok" })).layer(layer);
    assert_eq!(send(&app, request("/work", "192.0.2.1:1")).await.0.status(), StatusCode::OK);
    for _ in 0..3 {
        let (free, _) = send(&app, request("/health", "192.0.2.1:1")).await;
        assert_eq!(free.status(), StatusCode::OK, "cost 0 is free, even with the quota used up");
        assert_eq!(header(&free, "ratelimit"), None, "and unchecked");
    }
    let mut huge = request("/huge", "192.0.2.1:1");
    huge.headers_mut().insert("accept", "application/json".parse().unwrap());
    let (never, body) = send(&app, huge).await;
    assert_eq!(never.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&never, "retry-after"), None, "waiting would not help");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"], "cost_above_limit");
    assert!(body["retry_after_secs"].is_null(), "{body}");
}

/// A global layer around a per-route one: the response carries both
/// layers' IETF fields and the most binding legacy values.
#[tokio::test]
async fn stacked_layers_merge_their_headers() {
    let clock = ManualClock::new(0);
    let login = RateLimitLayer::new(limiter(&clock)).rule(rule(2, "login"), PeerIp);
    let global = RateLimitLayer::new(limiter(&clock)).rule(rule(100, "global"), Global);
    let app = Router::new().route("/login", get(|| async { "welcome" }).layer(login)).layer(global);
    let (first, _) = send(&app, request("/login", "192.0.2.1:1")).await;
    let fields: Vec<&str> =
        first.headers().get_all("ratelimit").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(fields, [r#""login";r=1;t=60"#, r#""global";r=99;t=60"#]);
    assert_eq!(first.headers().get_all("ratelimit-policy").iter().count(), 2);
    assert_eq!(header(&first, "x-ratelimit-limit"), Some("2"), "the login rule binds most");
    assert_eq!(header(&first, "x-ratelimit-remaining"), Some("1"));
    send(&app, request("/login", "192.0.2.1:1")).await;
    let (denied, _) = send(&app, request("/login", "192.0.2.1:1")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&denied, "x-ratelimit-limit"), Some("2"), "the denying rule's values stay");
    assert_eq!(header(&denied, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&denied, "retry-after"), Some("60"));
}

#[tokio::test]
async fn warnings_and_bans_are_visible() {
    let clock = ManualClock::new(0);
    let penalty = Penalty::new(Duration::from_secs(600))
        .unwrap()
        .warn_after(1)
        .unwrap()
        .ban_after(3, Duration::from_secs(120))
        .unwrap();
    let login = rule(1, "login").with_penalty(penalty).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter(&clock)).rule(login, PeerIp).message("too many login attempts"));
    let peer = "192.0.2.9:1";
    assert_eq!(send(&app, request("/", peer)).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, request("/", peer)).await.0.status(), StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(60));
    let (warned, _) = send(&app, request("/", peer)).await;
    assert_eq!(warned.status(), StatusCode::OK);
    assert_eq!(header(&warned, "x-ratelimit-warning"), Some("violations=1"));
    send(&app, request("/", peer)).await;
    let mut json = request("/", peer);
    json.headers_mut().insert("accept", "text/html, APPLICATION/JSON;q=0.9".parse().unwrap());
    let (banned, body) = send(&app, json).await;
    assert_eq!(banned.status(), StatusCode::TOO_MANY_REQUESTS, "a ban answers 429 unless told otherwise");
    assert_eq!(header(&banned, "retry-after"), Some("120"));
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((body["error"].as_str(), body["retry_after_secs"].as_u64()), (Some("banned"), Some(120)));
    assert_eq!(body["message"], "too many login attempts");

    let mut refused = request("/", peer);
    refused.headers_mut().insert("accept", "application/json;q=0, text/plain".parse().unwrap());
    let (text, body) = send(&app, refused).await;
    assert_eq!(header(&text, "content-type"), Some("text/plain; charset=utf-8"), "q=0 refuses JSON");
    assert_eq!(body, "too many login attempts\n");
}

#[tokio::test]
async fn path_and_route_keys() {
    let clock = ManualClock::new(0);
    let per_path = RateLimitLayer::new(limiter(&clock)).rule(rule(1, "per-path"), Path);
    let app = Router::new().route("/users/{id}", get(|| async { "user" })).layer(per_path);
    assert_eq!(send(&app, request("/users/1", "192.0.2.1:1")).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, request("/users/2", "192.0.2.1:1")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, request("/users/1", "192.0.2.2:1")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // One key per route template: the layer on the route, where axum has matched it.
    let per_route = RateLimitLayer::new(limiter(&clock)).rule(rule(1, "per-route"), MatchedPath);
    let app = Router::new().route("/users/{id}", get(|| async { "user" }).layer(per_route));
    assert_eq!(send(&app, request("/users/1", "192.0.2.1:1")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, request("/users/2", "192.0.2.1:1")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// Behind a trusted proxy that sets `X-Forwarded-For`, clients get their
/// own key whatever else they send; IPv6 clients can be grouped per /64.
#[tokio::test]
async fn forwarding_headers_clients_cannot_abuse() {
    let clock = ManualClock::new(0);
    let client_ip = ClientIp::trusting(["10.0.0.0/8"]).unwrap().ipv6_prefix(64);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter(&clock)).rule(rule(1, "client"), client_ip));
    let via_proxy = |xff: &[u8], forwarded: &str| {
        let mut r = request("/", "10.0.0.1:4000");
        r.headers_mut().insert("x-forwarded-for", http::HeaderValue::from_bytes(xff).unwrap());
        r.headers_mut().insert("forwarded", forwarded.parse().unwrap());
        r.headers_mut().insert("x-real-ip", "198.51.100.99".parse().unwrap());
        r
    };
    // The client's own Forwarded and X-Real-IP are passed on by the proxy,
    // not read: each of these is the same client.
    assert_eq!(send(&app, via_proxy(b"203.0.113.5", "for=1.1.1.1")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, via_proxy(b"203.0.113.5", "for=2.2.2.2")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // A client writing garbage or non-UTF-8 in front of the proxy's hop
    // (nginx appends to the client's line) is still itself.
    assert_eq!(
        send(&app, via_proxy(b"\xff\xfe, 203.0.113.5", "for=3.3.3.3")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        send(&app, via_proxy(b"_obfuscated, 203.0.113.5:443", "for=4.4.4.4")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // IPv6, with brackets and port; one key per /64.
    assert_eq!(send(&app, via_proxy(b"[2001:db8:1:2::10]:443", "")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, via_proxy(b"2001:db8:1:2::99", "")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "same /64"
    );
    assert_eq!(send(&app, via_proxy(b"2001:db8:1:3::10", "")).await.0.status(), StatusCode::OK);

    // A proxy speaking RFC 7239 is followed when told so.
    let rfc = ClientIp::trusting(["10.0.0.0/8"]).unwrap().header(ForwardedHeader::Forwarded);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter(&clock)).rule(rule(1, "rfc"), rfc));
    assert_eq!(send(&app, via_proxy(b"9.9.9.9", "for=198.51.100.1")).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, via_proxy(b"9.9.9.8", "for=198.51.100.2")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, via_proxy(b"9.9.9.7", "for=198.51.100.1")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// A store that is down.
#[derive(Debug, Clone)]
struct Down;

impl Store for Down {
    async fn check(&self, _: &slidegate::store::Request<'_>) -> Result<Decision, Error> {
        Err(Error::new(ErrorKind::Unavailable, "connection refused"))
    }

    async fn check_all(
        &self,
        _: &slidegate::store::Dimensions<'_>,
    ) -> Result<slidegate::MultiDecision, Error> {
        Err(Error::new(ErrorKind::Unavailable, "connection refused"))
    }
}

#[tokio::test]
async fn failure_policies_answer_through_the_layer() {
    let app = |policy| -> Router {
        let limiter = Limiter::builder(Down).failure_policy(policy).no_breaker().build();
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter).rule(rule(2, "down"), PeerIp).degraded_header(true))
    };
    let closed = app(FailurePolicy::FailClosed);
    let (denied, _) = send(&closed, request("/", "192.0.2.1:1")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS, "fail-closed denies");
    assert_eq!(header(&denied, "x-ratelimit-degraded"), Some("1"));

    // The fallback limits locally, with the same rule.
    let fallback = app(FailurePolicy::Fallback);
    for expected in [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        let (response, _) = send(&fallback, request("/", "192.0.2.1:1")).await;
        assert_eq!(response.status(), expected);
        assert_eq!(header(&response, "x-ratelimit-degraded"), Some("1"));
    }

    // `fail`: the check fails, the layer answers 503 and the service is not called.
    let fail = app(FailurePolicy::Fail);
    let (unavailable, body) = send(&fail, request("/", "192.0.2.1:1")).await;
    assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_ne!(body, "ok");
}

/// Shadow rules and a shadow limiter: every request reaches the service,
/// and an enforced rule beside a shadow one is still enforced and charged.
#[tokio::test]
async fn shadow_rules_admit_and_the_enforced_ones_still_count() {
    let clock = ManualClock::new(0);
    let shadow = Limiter::builder(MemoryStore::builder().clock(clock.clone()).build()).shadow(true).build();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(shadow).rule(rule(1, "everything-shadow"), PeerIp));
    for i in 0..3 {
        let (response, _) = send(&app, request("/", "192.0.2.1:1")).await;
        assert_eq!(response.status(), StatusCode::OK);
        // Who a shadow rule would have denied, for logs and status pages.
        let keys = response.extensions().get::<LimitedKeys>();
        let expected = LimitedKeys(vec![("everything-shadow".into(), "192.0.2.1".into())]);
        assert_eq!(keys, (i > 0).then_some(&expected), "request {i}");
    }

    let layer = RateLimitLayer::new(limiter(&clock))
        .rule(rule(1, "trial").in_shadow(true), PeerIp)
        .rule(rule(3, "enforced"), PeerIp);
    let app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
    let statuses: Vec<StatusCode> = {
        let mut out = Vec::new();
        for _ in 0..4 {
            out.push(send(&app, request("/", "192.0.2.1:1")).await.0.status());
        }
        out
    };
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS],
        "the shadow rule denies from the second request on, the enforced one from the fourth"
    );
}
