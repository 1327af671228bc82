//! gRPC (through the layer alone, and with a real tonic server and client):
//! a limited call is `RESOURCE_EXHAUSTED` with `google.rpc.RetryInfo`
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

fn grpc_ok() -> impl tower::Service<
    Request<tonic::body::Body>,
    Response = Response<tonic::body::Body>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(|_: Request<tonic::body::Body>| async {
        let mut response = Response::new(tonic::body::Body::empty());
        response.headers_mut().insert("grpc-status", "0".parse().unwrap());
        Ok::<_, Infallible>(response)
    })
}

fn call(peer: Option<&str>) -> Request<tonic::body::Body> {
    let mut request = Request::post("/echo.Echo/Say").body(tonic::body::Body::empty()).unwrap();
    if let Some(peer) = peer {
        request.extensions_mut().insert(peer.parse::<SocketAddr>().unwrap());
    }
    request
}

fn status_of(response: &Response<tonic::body::Body>) -> tonic::Status {
    assert_eq!(response.status(), http::StatusCode::OK, "gRPC errors travel in headers");
    tonic::Status::from_header_map(response.headers()).expect("a grpc status")
}

/// A ban answered 403 is `PERMISSION_DENIED`; a client that cannot be
/// identified under `MissingKey::Reject` is `INVALID_ARGUMENT`; a cost no
/// rule admits is `RESOURCE_EXHAUSTED` without `RetryInfo` — gRPC status
/// codes all, never a bare HTTP error a gRPC client cannot read.
#[tokio::test]
async fn every_refusal_is_a_grpc_status() {
    let penalty = slidegate::Penalty::new(Duration::from_secs(60))
        .unwrap()
        .ban_after(1, Duration::from_secs(30))
        .unwrap();
    let login = Rule::per_second(NonZeroU32::new(1).unwrap())
        .named("grpc-ban")
        .unwrap()
        .with_penalty(penalty)
        .unwrap();
    let layer = RateLimitLayer::new(Limiter::in_memory())
        .rule_or(login, PeerIp, slidegate_tower::MissingKey::Reject)
        .ban_status(http::StatusCode::FORBIDDEN)
        .cost(|parts| if parts.uri.path().ends_with("Bulk") { 2 } else { 1 })
        .grpc();
    let mut service = tower::ServiceBuilder::new().layer(layer).service(grpc_ok());
    let peer = Some("192.0.2.7:1");
    assert_eq!(service.ready().await.unwrap().call(call(peer)).await.unwrap().headers()["grpc-status"], "0");
    let banned = service.ready().await.unwrap().call(call(peer)).await.unwrap();
    assert_eq!(status_of(&banned).code(), Code::PermissionDenied);
    let retry = status_of(&banned).get_details_retry_info().expect("RetryInfo");
    assert_eq!(retry.retry_delay, Some(Duration::from_secs(30)));

    let unknown = service.ready().await.unwrap().call(call(None)).await.unwrap();
    assert_eq!(status_of(&unknown).code(), Code::InvalidArgument);

    let mut bulk = call(Some("192.0.2.8:1"));
    *bulk.uri_mut() = "/echo.Echo/Bulk".parse().unwrap();
    let never = service.ready().await.unwrap().call(bulk).await.unwrap();
    assert_eq!(status_of(&never).code(), Code::ResourceExhausted);
    assert!(status_of(&never).get_details_retry_info().is_none(), "waiting would not help");
}

/// A real tonic server (the standard health service) behind the layer and
/// a tonic client over loopback: 3 calls per second per peer, then
/// `RESOURCE_EXHAUSTED` with the `RetryInfo` a tonic client reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_server_and_client() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    let (_reporter, health) = tonic_health::server::health_reporter();
    let rule = Rule::per_second(NonZeroU32::new(3).unwrap()).named("tonic-peer").unwrap();
    let layer = RateLimitLayer::new(Limiter::in_memory()).rule(rule, PeerIp).grpc().message("slow down");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .layer(layer)
        .add_service(health)
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);

    let channel =
        tonic::transport::Channel::from_shared(format!("http://{address}")).unwrap().connect().await.unwrap();
    let mut client = HealthClient::new(channel);
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(client.check(HealthCheckRequest { service: String::new() }).await);
    }
    assert!(answers[..3].iter().all(Result::is_ok), "{answers:?}");
    for answer in &answers[3..] {
        let status = answer.as_ref().expect_err("limited");
        assert_eq!((status.code(), status.message()), (Code::ResourceExhausted, "slow down"));
        let retry = status.get_details_retry_info().and_then(|r| r.retry_delay).expect("RetryInfo");
        assert!(retry > Duration::ZERO && retry <= Duration::from_secs(1), "{retry:?}");
    }
}
