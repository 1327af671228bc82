//! A plain hyper server (no axum, no tonic) with the layer in front of a
//! service answering boxed bodies, over a real loopback connection.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroU32;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use slidegate::{Limiter, Rule};
use slidegate_tower::{PeerIp, RateLimitLayer};
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, hyper::Error>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_hyper_server_is_limited() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let rule = Rule::per_minute(NonZeroU32::new(2).unwrap()).named("hyper").unwrap();
    let layer = RateLimitLayer::new(Limiter::in_memory()).rule(rule, PeerIp);
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let service = tower::ServiceBuilder::new()
                // The peer address, where PeerIp looks for it.
                .map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert::<SocketAddr>(peer);
                    request
                })
                .layer(layer.clone())
                .service(tower::service_fn(|_: Request<Incoming>| async {
                    let body: Body =
                        Full::new(Bytes::from_static(b"hello")).map_err(|never| match never {}).boxed();
                    Ok::<_, Infallible>(Response::new(body))
                }));
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                    .await;
            });
        }
    });

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri: http::Uri = format!("http://{addr}/").parse().unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let response = client.get(uri.clone()).await.unwrap();
        let status = response.status();
        let remaining =
            response.headers().get("x-ratelimit-remaining").map(|v| v.to_str().unwrap().to_owned());
        let retry = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        seen.push((status, remaining, retry, body));
    }
    assert_eq!(seen[0].0, StatusCode::OK);
    assert_eq!((seen[0].1.as_deref(), &seen[0].3[..]), (Some("1"), &b"hello"[..]));
    assert_eq!((seen[1].0, seen[1].1.as_deref()), (StatusCode::OK, Some("0")));
    assert_eq!(seen[2].0, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(seen[2].2.as_deref(), Some("60"));
    assert_eq!(&seen[2].3[..], b"Too Many Requests\n");
}
