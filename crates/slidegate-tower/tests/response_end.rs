//! What the layer does when a response ends, through a real axum server
//! and HTTP client over a socket: budgets charged what each response cost
//! (`RateLimitLayer::response_cost`: a header, a trailer at the end of a
//! slow stream, the `Cost` extension; a body dropped mid-stream charged
//! what its header said; a missing or bad count charged nothing), and
//! concurrency leases (`RateLimitLayer::concurrency`) held while a slow
//! body streams, given back when it ends or is dropped.
#![cfg(feature = "axum")] // run by scripts/test with --all-features

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use slidegate::{Limiter, MemoryStore, Rule};
use slidegate_tower::{Cost, Header, RateLimitLayer, ResponseCost};

/// `frames` frames of `x`, `every` apart, then a trailer `x-usage-tokens`.
struct Slow {
    frames: u32,
    every: Option<Pin<Box<tokio::time::Sleep>>>,
    trailer: Option<u32>,
}

impl http_body::Body for Slow {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.frames == 0 {
            let Some(tokens) = self.trailer.take() else { return Poll::Ready(None) };
            let mut trailers = HeaderMap::new();
            trailers.insert("x-usage-tokens", HeaderValue::from(tokens));
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        let wait = self.every.get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(100))));
        if wait.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.every = None;
        self.frames -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
    }
}

use std::future::Future as _;

fn app(limiter: Limiter<MemoryStore>) -> Router {
    let tokens = Rule::new(1000, Duration::from_secs(60)).unwrap().named("tokens").unwrap().budget();
    let requests = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("requests").unwrap();
    Router::new()
        .route("/tokens/{n}", get(|Path(n): Path<String>| async move { ([("x-usage-tokens", n)], "done") }))
        .route(
            "/stream/{n}",
            get(|Path(n): Path<u32>| async move { Body::new(Slow { frames: 3, every: None, trailer: Some(n) }) }),
        )
        .route(
            "/slow/{n}",
            get(|Path(n): Path<u32>| async move {
                let body = Body::new(Slow { frames: 50, every: None, trailer: None });
                ([("x-usage-tokens", n.to_string())], body).into_response()
            }),
        )
        .route(
            "/extension/{n}",
            get(|Path(n): Path<u32>| async move {
                let mut response: Response = "done".into_response();
                response.extensions_mut().insert(Cost(n));
                response
            }),
        )
        .route("/silent", get(|| async { "no count" }))
        .layer(
            RateLimitLayer::new(limiter)
                .rule(tokens, Header::new(http::HeaderName::from_static("x-tenant")))
                .rule(requests, Header::new(http::HeaderName::from_static("x-tenant")))
                .response_cost(ResponseCost::header("x-usage-tokens")),
        )
}

/// What is left of `tenant`'s budget, and its debt (a peek: nothing charged).
async fn budget(limiter: &Limiter<MemoryStore>, tenant: &str) -> (u32, u32) {
    let tokens = Rule::new(1000, Duration::from_secs(60)).unwrap().named("tokens").unwrap().budget();
    let multi = limiter.peek_all_weighted(&[(&tokens, tenant, 1)]).await.expect("peek");
    (multi.decisions[0].remaining, multi.decisions[0].debt)
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_are_charged_what_each_response_cost_when_its_body_ends() {
    let limiter = Limiter::in_memory();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = app(limiter.clone());
    tokio::spawn(async move { axum::serve(listener, served).await });
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |path: &str, tenant: &str| {
        let request = http::Request::get(format!("http://{addr}{path}"))
            .header("x-tenant", tenant)
            .body(Empty::new())
            .unwrap();
        client.request(request)
    };
    let status = async |path: &str, tenant: &str| {
        let response = get(path, tenant).await.unwrap();
        let status = response.status();
        response.into_body().collect().await.unwrap();
        status
    };

    // A header: 700 + 700 land (1,400 against 1,000), then denied.
    assert_eq!(status("/tokens/700", "acme").await, StatusCode::OK);
    eventually("700 charged", async || budget(&limiter, "acme").await == (300, 0)).await;
    assert_eq!(status("/tokens/700", "acme").await, StatusCode::OK);
    eventually("1,400 recorded", async || budget(&limiter, "acme").await == (0, 400)).await;
    let denied = get("/tokens/1", "acme").await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.headers().contains_key("retry-after"));
    assert_eq!(budget(&limiter, "acme").await, (0, 400), "a denied request is charged nothing");

    // A trailer at the end of a slow stream: nothing charged until the end.
    let streaming = get("/stream/250", "globex").await.unwrap();
    assert_eq!(budget(&limiter, "globex").await, (1000, 0), "the count comes last");
    streaming.into_body().collect().await.unwrap();
    eventually("the trailer's 250 charged", async || budget(&limiter, "globex").await == (750, 0)).await;

    // A body dropped mid-stream is charged what its header said.
    let mut slow = get("/slow/300", "initech").await.unwrap();
    let first = slow.body_mut().frame().await.unwrap().unwrap();
    assert!(first.is_data());
    assert_eq!(budget(&limiter, "initech").await, (1000, 0), "still streaming");
    drop(slow);
    eventually("300 charged on drop", async || budget(&limiter, "initech").await == (700, 0)).await;

    // The inner service's extension; no count at all is charged nothing.
    assert_eq!(status("/extension/40", "umbrella").await, StatusCode::OK);
    eventually("40 charged", async || budget(&limiter, "umbrella").await == (960, 0)).await;
    assert_eq!(status("/silent", "hooli").await, StatusCode::OK);
    assert_eq!(status("/tokens/lots", "hooli").await, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(budget(&limiter, "hooli").await, (1000, 0), "missing and bad counts charge nothing");
}

/// At most 2 streams per tenant at once, held while each slow body
/// streams and given back when it ends or the client goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_holds_its_lease_while_the_body_streams() {
    let limiter = Limiter::in_memory();
    let streams = slidegate::ConcurrencyLimit::new("streams", 2, Duration::from_secs(60)).unwrap();
    let app = Router::new()
        .route("/slow", get(|| async { Body::new(Slow { frames: 5, every: None, trailer: None }) }))
        .layer(
            RateLimitLayer::new(limiter.clone())
                .concurrency(streams.clone(), Header::new(http::HeaderName::from_static("x-tenant"))),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |tenant: &str| {
        let request = http::Request::get(format!("http://{addr}/slow"))
            .header("x-tenant", tenant)
            .body(Empty::new())
            .unwrap();
        client.request(request)
    };
    let first = get("acme").await.unwrap();
    let second = get("acme").await.unwrap();
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    let third = get("acme").await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS, "two streams are running");
    assert!(third.headers().contains_key("retry-after"));
    assert_eq!(get("globex").await.unwrap().status(), StatusCode::OK, "another tenant");
    // One stream read to its end, one dropped mid-stream: both leases back.
    first.into_body().collect().await.unwrap();
    drop(second);
    eventually("both leases given back", async || {
        let lease = limiter.acquire(&streams, "acme").await.unwrap();
        let free = lease.decision().remaining == 1;
        lease.release().await.unwrap();
        free
    })
    .await;
    assert_eq!(get("acme").await.unwrap().status(), StatusCode::OK);
}

/// A request asking to switch protocols carries its leases as
/// `InFlight`: a service that keeps it after the response (a tunnel)
/// keeps the leases held until it lets go; other requests carry none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_switch_keeps_its_lease_while_the_service_keeps_in_flight() {
    use slidegate_tower::InFlight;
    use std::sync::{Arc, Mutex};
    use tower::{Layer as _, ServiceExt as _};

    let limiter = Limiter::in_memory();
    let tunnels = slidegate::ConcurrencyLimit::new("tunnels", 1, Duration::from_secs(60)).unwrap();
    let kept: Arc<Mutex<Vec<InFlight>>> = Arc::default();
    let keeper = Arc::clone(&kept);
    let service = tower::service_fn(move |mut request: http::Request<Body>| {
        let keeper = Arc::clone(&keeper);
        async move {
            if let Some(in_flight) = request.extensions_mut().remove::<InFlight>() {
                keeper.lock().unwrap().push(in_flight);
            }
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }
    });
    let app = RateLimitLayer::new(limiter.clone())
        .concurrency(tunnels.clone(), Header::new(http::HeaderName::from_static("x-tenant")))
        .layer(service);
    let request = |upgrade: bool| {
        let request = http::Request::get("/ws").header("x-tenant", "acme");
        let request = if upgrade {
            request.header("connection", "upgrade").header("upgrade", "websocket")
        } else {
            request
        };
        request.body(Body::empty()).unwrap()
    };
    let running = async || {
        let lease = limiter.acquire(&tunnels, "acme").await.unwrap();
        let running = !lease.is_admitted();
        lease.release().await.unwrap();
        running
    };

    // An ordinary request: no `InFlight`, the lease back when its body ends.
    let response = app.clone().oneshot(request(false)).await.unwrap();
    response.into_body().collect().await.unwrap();
    assert!(kept.lock().unwrap().is_empty());
    eventually("the lease given back", async || !running().await).await;

    // A protocol switch: held after its body ended, while `InFlight` is kept.
    let response = app.clone().oneshot(request(true)).await.unwrap();
    response.into_body().collect().await.unwrap();
    assert_eq!(kept.lock().unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(running().await, "the tunnel still counts");
    let refused = app.clone().oneshot(request(true)).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    kept.lock().unwrap().clear();
    eventually("the tunnel's lease given back", async || !running().await).await;
    assert_eq!(app.oneshot(request(true)).await.unwrap().status(), StatusCode::OK);
}

/// An observer is told each lease taken and given back and each budget
/// charged when a response ends, with the state after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_is_told_what_the_layer_holds_and_charges() {
    use slidegate::{ConcurrencyLimit, Decision};
    use slidegate_tower::Observer;
    use std::sync::{Arc, Mutex};
    use tower::{Layer as _, ServiceExt as _};

    #[derive(Clone, Default)]
    struct Told(Arc<Mutex<Vec<String>>>);
    impl Observer for Told {
        fn charged(&self, rule: &Rule, key: &str, after: &Decision) {
            let told = format!(
                "charged {} {key}: {} left, debt {}",
                rule.name().unwrap_or("?"),
                after.remaining,
                after.debt
            );
            self.0.lock().unwrap().push(told);
        }
        fn acquired(&self, limit: &ConcurrencyLimit, key: &str, decision: &Decision) {
            self.0.lock().unwrap().push(format!(
                "acquired {} {key}: {} left",
                limit.name(),
                decision.remaining
            ));
        }
        fn released(&self, limit: &ConcurrencyLimit, key: &str) {
            self.0.lock().unwrap().push(format!("released {} {key}", limit.name()));
        }
    }

    let told = Told::default();
    let tokens = Rule::per_minute(NonZeroU32::new(1000).unwrap()).named("tokens").unwrap().budget();
    let streams = ConcurrencyLimit::new("streams", 2, Duration::from_secs(60)).unwrap();
    let tenant = || Header::new(http::HeaderName::from_static("x-tenant"));
    // A second limit, of one at once for everybody.
    let everybody = ConcurrencyLimit::new("everybody", 1, Duration::from_secs(60)).unwrap();
    let app = RateLimitLayer::new(Limiter::in_memory())
        .rule(tokens, tenant())
        .concurrency(streams, tenant())
        .concurrency(everybody, slidegate_tower::Global)
        .response_cost(ResponseCost::header("x-usage-tokens"))
        .observer(told.clone())
        .layer(tower::service_fn(|_: http::Request<Body>| async {
            Ok::<_, Infallible>(([("x-usage-tokens", "1300")], "answer").into_response())
        }));
    let request = http::Request::get("/chat").header("x-tenant", "acme").body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let taken = ["acquired streams acme: 1 left", "acquired everybody global: 0 left"];
    assert_eq!(*told.0.lock().unwrap(), taken);
    // Refused by the second limit: its first lease, given back at once,
    // is told neither taken nor given back.
    let request = http::Request::get("/chat").header("x-tenant", "acme").body(Body::empty()).unwrap();
    assert_eq!(app.oneshot(request).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(*told.0.lock().unwrap(), taken);
    response.into_body().collect().await.unwrap();
    eventually("the charge told", async || told.0.lock().unwrap().len() == 5).await;
    let mut events = told.0.lock().unwrap().clone();
    events.sort();
    assert_eq!(
        events,
        [
            "acquired everybody global: 0 left",
            "acquired streams acme: 1 left",
            "charged tokens acme: 0 left, debt 300",
            "released everybody global",
            "released streams acme"
        ]
    );
}
