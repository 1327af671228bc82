//! The layer in an axum `Router`, driven with `oneshot` (no socket): every
//! status and header against the decision behind it, keys and proxies,
//! missing keys, and pass-through of the inner service.
#![cfg(feature = "axum")] // run by scripts/test with --all-features

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use slidegate::{Limiter, ManualClock, MemoryStore, Penalty, Rule};
use slidegate_tower::{ClientIp, FromExtension, Global, Header, MissingKey, PeerIp, RateLimitLayer};
use tower::{Service, ServiceExt};

fn rule(limit: u32, name: &str) -> Rule {
    Rule::per_minute(NonZeroU32::new(limit).unwrap()).named(name).unwrap()
}

fn limiter(clock: &ManualClock) -> Limiter<MemoryStore> {
    Limiter::new(MemoryStore::builder().clock(clock.clone()).build())
}

fn app(layer: RateLimitLayer<MemoryStore>) -> Router {
    Router::new().route("/", get(|| async { "hello" })).layer(layer)
}

fn request(peer: &str) -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    request
}

async fn send(app: &Router, request: Request<Body>) -> (Response<Body>, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    (Response::from_parts(parts, Body::empty()), text)
}

fn header<'a>(response: &'a Response<Body>, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn allowed_and_limited_responses_carry_exact_headers() {
    let clock = ManualClock::new(1_000_000);
    let app = app(RateLimitLayer::new(limiter(&clock)).rule(rule(2, "per-ip"), PeerIp).message("slow down"));

    let (first, body) = send(&app, request("192.0.2.1:5000")).await;
    assert_eq!((first.status(), body.as_str()), (StatusCode::OK, "hello"));
    assert_eq!(header(&first, "ratelimit-policy"), Some(r#""per-ip";q=2;w=60"#));
    assert_eq!(header(&first, "ratelimit"), Some(r#""per-ip";r=1;t=60"#));
    assert_eq!(header(&first, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&first, "x-ratelimit-remaining"), Some("1"));
    assert_eq!(header(&first, "x-ratelimit-reset"), Some("60"));
    assert_eq!(header(&first, "retry-after"), None);

    clock.advance(Duration::from_millis(20_500));
    let (second, _) = send(&app, request("192.0.2.1:5001")).await;
    assert_eq!(header(&second, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&second, "x-ratelimit-reset"), Some("60"));

    clock.advance(Duration::from_millis(100));
    let (limited, body) = send(&app, request("192.0.2.1:5002")).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body, "slow down\n");
    // The first request leaves the window 60 s after it came: 39.4 s from now, rounded up.
    assert_eq!(header(&limited, "retry-after"), Some("40"));
    assert_eq!(header(&limited, "ratelimit"), Some(r#""per-ip";r=0;t=60"#));
    assert_eq!(header(&limited, "content-type"), Some("text/plain; charset=utf-8"));

    let mut json = request("192.0.2.1:5003");
    json.headers_mut().insert("accept", "application/json".parse().unwrap());
    let (limited, body) = send(&app, json).await;
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (limited.status(), &body["error"], &body["retry_after_secs"]),
        (StatusCode::TOO_MANY_REQUESTS, &"rate_limited".into(), &40.into())
    );

    let (other, _) = send(&app, request("198.51.100.7:5000")).await;
    assert_eq!(other.status(), StatusCode::OK, "another IP has its own quota");
}

#[tokio::test]
async fn header_families_are_switchable() {
    let clock = ManualClock::new(0);
    let app = app(RateLimitLayer::new(limiter(&clock))
        .rule(rule(5, "quiet"), Global)
        .ietf_headers(false)
        .legacy_headers(false));
    let (response, _) = send(&app, request("192.0.2.1:1")).await;
    assert_eq!(response.status(), StatusCode::OK);
    for name in
        ["ratelimit", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]
    {
        assert_eq!(header(&response, name), None, "{name}");
    }
    let app2 = self::app(
        RateLimitLayer::new(limiter(&clock)).rule(rule(5, "ietf-only"), Global).legacy_headers(false),
    );
    let (response, _) = send(&app2, request("192.0.2.1:1")).await;
    assert!(header(&response, "ratelimit").is_some() && header(&response, "x-ratelimit-limit").is_none());
}

#[tokio::test]
async fn an_untrusted_client_cannot_pick_its_key_with_forwarding_headers() {
    let clock = ManualClock::new(0);
    let client_ip = ClientIp::trusting(["10.0.0.0/8"]).unwrap();
    let app = app(RateLimitLayer::new(limiter(&clock)).rule(rule(1, "client-ip"), client_ip));
    let spoofed = |fake: &str| {
        let mut r = request("203.0.113.5:4000");
        r.headers_mut().insert("x-forwarded-for", fake.parse().unwrap());
        r.headers_mut().insert("forwarded", format!("for={fake}").parse().unwrap());
        r
    };
    assert_eq!(send(&app, spoofed("1.1.1.1")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, spoofed("2.2.2.2")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "same peer, same key"
    );

    // Behind the trusted proxy, the forwarded client is the key.
    let via_proxy = |client: &str| {
        let mut r = request("10.0.0.1:4000");
        r.headers_mut().insert("x-forwarded-for", client.parse().unwrap());
        r
    };
    assert_eq!(send(&app, via_proxy("198.51.100.1")).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, via_proxy("198.51.100.2")).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, via_proxy("198.51.100.1")).await.0.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[derive(Clone)]
struct User(&'static str);

#[tokio::test]
async fn several_rules_per_request_all_or_nothing() {
    let clock = ManualClock::new(0);
    let per_user = FromExtension::new(|user: &User| user.0.to_owned());
    let app = app(RateLimitLayer::new(limiter(&clock)).rule(rule(3, "global"), Global).rule_or(
        rule(2, "per-user"),
        per_user,
        MissingKey::Skip,
    ));
    let as_user = |name: &'static str| {
        let mut r = request("192.0.2.1:1");
        r.extensions_mut().insert(User(name));
        r
    };
    assert_eq!(send(&app, as_user("alice")).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, as_user("alice")).await.0.status(), StatusCode::OK);
    let (denied, _) = send(&app, as_user("alice")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&denied, "ratelimit"),
        Some(r#""global";r=1;t=60, "per-user";r=0;t=60"#),
        "global not charged"
    );
    // Anonymous traffic skips the per-user rule and takes the last global unit.
    assert_eq!(send(&app, request("192.0.2.1:1")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&app, as_user("bob")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "global exhausted"
    );
}

#[tokio::test]
async fn missing_keys_are_shared_skipped_or_rejected() {
    let clock = ManualClock::new(0);
    let api_key = || Header::new(http::HeaderName::from_static("x-api-key"));
    let shared = app(RateLimitLayer::new(limiter(&clock)).rule(rule(1, "shared"), api_key()));
    assert_eq!(send(&shared, request("192.0.2.1:1")).await.0.status(), StatusCode::OK);
    assert_eq!(
        send(&shared, request("192.0.2.2:1")).await.0.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "one bucket"
    );

    let skip =
        app(RateLimitLayer::new(limiter(&clock)).rule_or(rule(1, "skip"), api_key(), MissingKey::Skip));
    for _ in 0..3 {
        let (response, _) = send(&skip, request("192.0.2.1:1")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, "ratelimit"), None, "no rule applied");
    }
    let reject =
        app(RateLimitLayer::new(limiter(&clock)).rule_or(rule(1, "reject"), api_key(), MissingKey::Reject));
    assert_eq!(send(&reject, request("192.0.2.1:1")).await.0.status(), StatusCode::BAD_REQUEST);
    let mut keyed = request("192.0.2.1:1");
    keyed.headers_mut().insert("x-api-key", "k1".parse().unwrap());
    assert_eq!(send(&reject, keyed).await.0.status(), StatusCode::OK);
}

#[tokio::test]
async fn bans_answer_with_the_ban_status_and_remaining_time() {
    let clock = ManualClock::new(0);
    let penalty = Penalty::new(Duration::from_secs(600))
        .unwrap()
        .warn_after(1)
        .unwrap()
        .ban_after(2, Duration::from_secs(300))
        .unwrap();
    let login = rule(1, "login").with_penalty(penalty).unwrap();
    let app = app(RateLimitLayer::new(limiter(&clock)).rule(login, PeerIp).ban_status(StatusCode::FORBIDDEN));
    assert_eq!(send(&app, request("192.0.2.9:1")).await.0.status(), StatusCode::OK);
    assert_eq!(send(&app, request("192.0.2.9:1")).await.0.status(), StatusCode::TOO_MANY_REQUESTS);
    let (banned, body) = send(&app, request("192.0.2.9:1")).await;
    assert_eq!(banned.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&banned, "retry-after"), Some("300"));
    assert_eq!(body, "Forbidden: banned for repeated violations\n", "a ban says it is one");
    clock.advance(Duration::from_secs(100));
    let (still, _) = send(&app, request("192.0.2.9:1")).await;
    assert_eq!((still.status(), header(&still, "retry-after")), (StatusCode::FORBIDDEN, Some("200")));
    clock.advance(Duration::from_secs(200));
    let (back, _) = send(&app, request("192.0.2.9:1")).await;
    assert_eq!(back.status(), StatusCode::OK);
    assert_eq!(header(&back, "x-ratelimit-warning"), None, "the count started over after the ban");
}

#[tokio::test]
async fn inner_readiness_and_errors_pass_through() {
    let clock = ManualClock::new(0);
    let failing =
        tower::service_fn(|_: Request<Body>| async { Err::<Response<Body>, &'static str>("inner failed") });
    let mut service = tower::ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter(&clock)).rule(rule(10, "pass"), Global))
        .service(failing);
    let ready = service.ready().await.expect("ready");
    assert_eq!(ready.call(request("192.0.2.1:1")).await.unwrap_err(), "inner failed");

    let ok = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("fine")))
    });
    let mut service = tower::ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter(&clock)).rule(rule(1, "limit"), Global))
        .service(ok);
    let first = service.ready().await.unwrap().call(request("192.0.2.1:1")).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let second = service.ready().await.unwrap().call(request("192.0.2.1:1")).await.unwrap();
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS, "limited is a response, not an error");
}

#[tokio::test]
async fn weighted_requests_and_impossible_costs() {
    let clock = ManualClock::new(0);
    let weighted = RateLimitLayer::new(limiter(&clock))
        .rule(rule(10, "weighted"), Global)
        .cost(|parts| if parts.uri.path() == "/" { 4 } else { 11 });
    let app = app(weighted);
    let (first, _) = send(&app, request("192.0.2.1:1")).await;
    assert_eq!(header(&first, "x-ratelimit-remaining"), Some("6"));
    let mut huge = Request::get("/huge").body(Body::empty()).unwrap();
    huge.extensions_mut().insert(ConnectInfo("192.0.2.1:1".parse::<SocketAddr>().unwrap()));
    let (never, _) = send(&app, huge).await;
    assert_eq!(never.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&never, "retry-after"), None, "waiting would not help");
}

/// Plain hyper services answer with `Full<Bytes>` bodies (or any
/// [`LimitedBody`](slidegate_tower::LimitedBody)); the layer works on them too.
#[tokio::test]
async fn plain_http_services_with_full_bodies() {
    use bytes::Bytes;
    use http_body_util::Full;

    let clock = ManualClock::new(0);
    let hello = tower::service_fn(|_: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello"))))
    });
    let mut service = tower::ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter(&clock)).rule(rule(1, "hyper"), PeerIp))
        .service(hello);
    let call = || {
        let mut request = Request::get("/").body(Full::new(Bytes::new())).unwrap();
        request.extensions_mut().insert("192.0.2.1:1".parse::<SocketAddr>().unwrap());
        request
    };
    let ok = service.ready().await.unwrap().call(call()).await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let limited = service.ready().await.unwrap().call(call()).await.unwrap();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = limited.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"Too Many Requests\n");
}
