//! gRPC: a limited call is `RESOURCE_EXHAUSTED` with `google.rpc.RetryInfo`
//! (and a ban answered 403 is `PERMISSION_DENIED`), as tonic clients read it.
#![cfg(feature = "tonic")] // run by scripts/test with --all-features

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use http::{Request, Response};
use slidegate::{Limiter, ManualClock, MemoryStore, Rule};
use slidegate_tower::{PeerIp, RateLimitLayer};
use tonic::Code;
use tonic_types::StatusExt;
use tower::{Service, ServiceExt};

#[tokio::test]
async fn limited_calls_are_resource_exhausted_with_retry_info() {
    let clock = ManualClock::new(0);
    let limiter = Limiter::new(MemoryStore::builder().clock(clock.clone()).build());
    let rule = Rule::per_second(NonZeroU32::new(1).unwrap()).named("grpc").unwrap();
    let grpc_ok = tower::service_fn(|_: Request<tonic::body::Body>| async {
        let mut response = Response::new(tonic::body::Body::empty());
        response.headers_mut().insert("grpc-status", "0".parse().unwrap());
        Ok::<_, Infallible>(response)
    });
    let mut service = tower::ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter).rule(rule, PeerIp).grpc().message("quota exceeded"))
        .service(grpc_ok);
    let call = || {
        let mut request = Request::post("/echo.Echo/Say").body(tonic::body::Body::empty()).unwrap();
        request.extensions_mut().insert("192.0.2.1:1".parse::<SocketAddr>().unwrap());
        request
    };
    let first = service.ready().await.unwrap().call(call()).await.unwrap();
    assert_eq!(first.headers()["grpc-status"], "0");
    clock.advance(Duration::from_millis(250));
    let limited = service.ready().await.unwrap().call(call()).await.unwrap();
    assert_eq!(limited.status(), http::StatusCode::OK, "gRPC errors travel in headers");
    let status = tonic::Status::from_header_map(limited.headers()).expect("a grpc status");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(status.message(), "quota exceeded");
    let retry = status.get_details_retry_info().expect("RetryInfo detail");
    assert_eq!(retry.retry_delay, Some(Duration::from_millis(750)));
}
