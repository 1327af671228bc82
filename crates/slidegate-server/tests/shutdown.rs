//! Graceful shutdown: requests in flight when the service is told to stop
//! are answered in full, readiness turns off and the listeners close during
//! the drain, and `serve` returns `Ok`; with nothing in flight, stopping is
//! prompt even with idle connections open.
//!
//! Requests are held in flight by a frozen Redis server (SIGSTOP) behind
//! long timeouts, so nothing finishes until the test thaws it. That they
//! reached the server is read from the kernel, not guessed from time: the
//! client wrote the request (for gRPC, its bytes went through the socket)
//! and the server's side of the connection has nothing left unread.

mod support;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use serde_json::{Value, json};
use slidegate_redis::RedisStore;
use slidegate_server::ServiceStore;
use slidegate_testkit::RedisServer;
use support::{OK, rls, start_with, unique_prefix};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

const RULES: &str = r#"
domain: edge
descriptors:
  - key: client
    rate_limit:
      unit: minute
      requests_per_unit: 100
"#;

/// A hang guard only: every wait below ends long before it unless the
/// service hangs.
const HANG_GUARD: Duration = Duration::from_secs(60);

const RLS_SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";

// ---------------------------------------------------------------------------
// What the kernel says about the service's sockets.

/// Bytes the server has not read yet on its side of the connection from
/// `client_port` to `server_port` (`None`: no such connection).
fn unread_by_server(server_port: u16, client_port: u16) -> Option<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = |address: &str| u16::from_str_radix(address.rsplit_once(':')?.1, 16).ok();
            let (local, remote, state, queues) =
                (fields.get(1)?, fields.get(2)?, fields.get(3)?, fields.get(4)?);
            // 01: ESTABLISHED.
            if *state != "01" || port(local)? != server_port || port(remote)? != client_port {
                return None;
            }
            u64::from_str_radix(queues.split_once(':')?.1, 16).ok()
        })
    })
}

/// Whether the server has read everything sent on the connection from `client_port`.
fn read_by_server(server_port: u16, client_port: u16) -> bool {
    unread_by_server(server_port, client_port) == Some(0)
}

// ---------------------------------------------------------------------------
// HTTP/1 by hand, to know when a request is written and whether its answer
// is complete.

/// A request written to the service, its answer not read yet.
struct SentRequest {
    stream: TcpStream,
    port: u16,
}

async fn send_request(addr: SocketAddr, method: &str, path: &str, body: &str) -> io::Result<SentRequest> {
    let mut stream = TcpStream::connect(addr).await?;
    let port = stream.local_addr()?.port();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    Ok(SentRequest { stream, port })
}

/// A complete HTTP answer: status, headers (lower-cased names), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("JSON body: {e}: {self:?}"))
    }
}

/// Reads the answer to the end of the connection; an error unless it is a
/// whole HTTP answer (status line, headers, exactly `content-length` bytes).
async fn read_answer(mut sent: SentRequest) -> Result<Answer, String> {
    let mut raw = Vec::new();
    sent.stream.read_to_end(&mut raw).await.map_err(|e| format!("reading the answer: {e}"))?;
    let text = String::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no end of headers: {text:?}"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("bad status line: {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .ok_or_else(|| format!("no content-length: {head:?}"))?;
    if body.len() != length {
        return Err(format!("truncated: {} of {length} bytes: {body:?}", body.len()));
    }
    Ok(Answer { status, headers, body: body.to_owned() })
}

/// `GET /readyz` on a new connection: its status, or `None` when the
/// service did not take the connection (refused, reset or closed unanswered).
async fn readyz(addr: SocketAddr) -> Option<u16> {
    let sent = send_request(addr, "GET", "/readyz", "").await.ok()?;
    read_answer(sent).await.ok().map(|answer| answer.status)
}

// ---------------------------------------------------------------------------
// gRPC over a connection whose written bytes the test can see.

/// Everything the gRPC client wrote, and from which local port.
#[derive(Clone, Default)]
struct Tap {
    sent: Arc<Mutex<Vec<u8>>>,
    port: Arc<Mutex<Option<u16>>>,
}

impl Tap {
    fn has_sent(&self, marker: &str) -> bool {
        let sent = self.sent.lock().unwrap();
        sent.windows(marker.len()).any(|w| w == marker.as_bytes())
    }

    fn port(&self) -> Option<u16> {
        *self.port.lock().unwrap()
    }
}

/// A TCP stream recording what is written to it.
struct Tapped {
    inner: TcpStream,
    sent: Arc<Mutex<Vec<u8>>>,
}

impl AsyncRead for Tapped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tapped {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            self.sent.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Connects to one address (whatever the URI), through a [`Tapped`] stream.
#[derive(Clone)]
struct TapConnector {
    addr: SocketAddr,
    tap: Tap,
}

impl tonic::codegen::Service<http::Uri> for TapConnector {
    type Response = hyper_util::rt::TokioIo<Tapped>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let (addr, tap) = (self.addr, self.tap.clone());
        Box::pin(async move {
            let inner = TcpStream::connect(addr).await?;
            inner.set_nodelay(true)?;
            *tap.port.lock().unwrap() = Some(inner.local_addr()?.port());
            Ok(hyper_util::rt::TokioIo::new(Tapped { inner, sent: tap.sent.clone() }))
        })
    }
}

async fn tapped_channel(addr: SocketAddr) -> (Channel, Tap) {
    let tap = Tap::default();
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect_with_connector(TapConnector { addr, tap: tap.clone() })
        .await
        .expect("connect gRPC");
    (channel, tap)
}

// ---------------------------------------------------------------------------

fn check_body(value: &str) -> String {
    json!({"domain": "edge", "descriptors": [{"entries": [{"key": "client", "value": value}]}]}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_are_answered_in_full_and_serve_returns_ok() {
    tokio::time::timeout(HANG_GUARD, requests_in_flight_are_answered()).await.expect("hang guard");
}

async fn requests_in_flight_are_answered() {
    const HTTP_REQUESTS: usize = 4;
    const GRPC_CALLS: usize = 4;
    let server = RedisServer::start().expect("redis-server");
    // Long store timeouts: a request waits for the frozen server, however
    // long the test takes to look at the drain.
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("drain"))
        .response_timeout(Duration::from_secs(40))
        .connect()
        .await
        .expect("connect");
    let service = start_with(RULES, ServiceStore::Redis(store), |config| {
        config.deadline = Duration::from_secs(40);
        config.grace = Duration::from_secs(50);
    })
    .await;
    let (http_addr, grpc_addr) = (service.http, service.grpc);

    // Served before the freeze: one answer through each API, and a health
    // watch that will see the drain.
    let (status, _, answer) = support::post_json(&service.url("/v1/check"), &check_body("warm")).await;
    assert_eq!(status, 200, "{answer}");
    let mut client = service.client().await;
    assert_eq!(
        support::should_rate_limit(&mut client, rls("edge", &[&[("client", "warm")]])).await.overall_code,
        OK
    );
    let health_channel =
        Endpoint::from_shared(format!("http://{grpc_addr}")).unwrap().connect().await.unwrap();
    let mut watch = HealthClient::new(health_channel)
        .watch(HealthCheckRequest { service: RLS_SERVICE.into() })
        .await
        .expect("health watch")
        .into_inner();
    let serving = |m: Option<HealthCheckResponse>| m.expect("a health status").status;
    assert_eq!(serving(watch.message().await.expect("health")), ServingStatus::Serving as i32);
    assert_eq!(readyz(http_addr).await, Some(200));

    server.pause().expect("SIGSTOP redis-server");

    // Requests that cannot finish while the store is frozen.
    let mut sent = Vec::new();
    for i in 0..HTTP_REQUESTS {
        let path = if i % 2 == 0 { "/v1/check" } else { "/json" };
        sent.push((
            path,
            send_request(http_addr, "POST", path, &check_body(&format!("http-{i}"))).await.unwrap(),
        ));
    }
    let ports: Vec<u16> = sent.iter().map(|(_, s)| s.port).collect();
    let http_answers: Vec<_> =
        sent.into_iter().map(|(path, request)| (path, tokio::spawn(read_answer(request)))).collect();
    let (channel, tap) = tapped_channel(grpc_addr).await;
    let markers: Vec<String> = (0..GRPC_CALLS).map(|i| format!("grpc-in-flight-{i}")).collect();
    let grpc_answers: Vec<_> = markers
        .iter()
        .map(|marker| {
            let mut client = RateLimitServiceClient::new(channel.clone());
            let request = rls("edge", &[&[("client", marker.as_str())]]);
            tokio::spawn(async move { client.should_rate_limit(request).await })
        })
        .collect();
    support::eventually("the requests in the service's hands", async || {
        let grpc_port = tap.port();
        ports.iter().all(|&port| read_by_server(http_addr.port(), port))
            && markers.iter().all(|m| tap.has_sent(m))
            && grpc_port.is_some_and(|port| read_by_server(grpc_addr.port(), port))
    })
    .await;
    assert!(http_answers.iter().all(|(_, a)| !a.is_finished()), "nothing answers while Redis is frozen");
    assert!(grpc_answers.iter().all(|a| !a.is_finished()), "nothing answers while Redis is frozen");

    // Stop, with all of them in flight.
    let stopping = tokio::spawn(service.stop());

    // The drain: gRPC health says NOT_SERVING, /readyz is 503 or the
    // listener is gone, and new connections are refused.
    assert_eq!(
        serving(watch.message().await.expect("health while draining")),
        ServingStatus::NotServing as i32
    );
    drop(watch);
    support::eventually("/readyz not ready", async || matches!(readyz(http_addr).await, None | Some(503)))
        .await;
    support::eventually("the listeners closed", async || {
        TcpStream::connect(http_addr).await.is_err() && TcpStream::connect(grpc_addr).await.is_err()
    })
    .await;
    assert!(!stopping.is_finished(), "serve waits for the requests in flight");
    assert!(http_answers.iter().all(|(_, a)| !a.is_finished()), "still in flight");

    server.resume().expect("SIGCONT redis-server");

    // Every request in flight got a whole answer, decided by the store.
    for (path, answer) in http_answers {
        let answer = answer.await.expect("reader task").unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        let json = answer.json();
        if path == "/json" {
            assert_eq!(json["overallCode"], "OK", "{json}");
            assert_eq!(json["statuses"][0]["limitRemaining"], 99, "{json}");
        } else {
            assert_eq!((&json["allowed"], &json["degraded"]), (&json!(true), &json!(false)), "{json}");
            assert_eq!(json["descriptors"][0]["remaining"], 99, "{json}");
        }
        assert!(
            answer.headers.iter().any(|(name, value)| name == "connection" && value == "close"),
            "{answer:?}"
        );
    }
    for answer in grpc_answers {
        let answer = answer.await.expect("call task").expect("a gRPC answer, not an error").into_inner();
        assert_eq!(answer.overall_code, OK);
        assert_eq!(answer.statuses[0].limit_remaining, 99);
    }

    // serve returned Ok (stop() panics otherwise), and nothing listens any more.
    stopping.await.expect("serve returned Ok");
    assert!(TcpStream::connect(http_addr).await.is_err(), "HTTP listener closed");
    assert!(TcpStream::connect(grpc_addr).await.is_err(), "gRPC listener closed");
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nothing_in_flight_stop_returns_promptly() {
    let service = support::start(RULES).await;
    let (status, _, _) = support::http("GET", &service.url("/healthz"), Vec::new(), &[]).await;
    assert_eq!(status, 200);
    let (http_addr, grpc_addr) = (service.http, service.grpc);
    tokio::time::timeout(HANG_GUARD, service.stop()).await.expect("stop hung");
    assert!(TcpStream::connect(http_addr).await.is_err(), "HTTP listener closed");
    assert!(TcpStream::connect(grpc_addr).await.is_err(), "gRPC listener closed");
}

/// Idle keep-alive connections (HTTP/1 and gRPC's HTTP/2), and one that
/// has sent nothing yet, hold nothing up: with a grace and a header
/// timeout far longer than the hang guard, stop returns all the same, and
/// the idle connections are closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_hold_up_the_drain() {
    let service = start_with(RULES, ServiceStore::Memory(slidegate::MemoryStore::new()), |config| {
        config.grace = Duration::from_secs(3600);
        config.header_timeout = Duration::from_secs(3600);
    })
    .await;
    // Connected, nothing sent.
    let mut silent = TcpStream::connect(service.http).await.expect("connect");
    // An HTTP/1.1 connection kept alive after one answer.
    let mut idle = TcpStream::connect(service.http).await.expect("connect");
    let request = format!("GET /healthz HTTP/1.1\r\nhost: {}\r\n\r\n", service.http);
    idle.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    while !answer.ends_with(b"ok\n") {
        let mut chunk = [0u8; 512];
        let n = idle.read(&mut chunk).await.expect("read");
        assert!(n > 0, "closed before answering: {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&answer));
    // A gRPC connection, idle after one call.
    let mut client = service.client().await;
    assert_eq!(
        support::should_rate_limit(&mut client, rls("edge", &[&[("client", "idle")]])).await.overall_code,
        OK
    );

    tokio::time::timeout(HANG_GUARD, service.stop()).await.expect("idle connections held up the drain");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(HANG_GUARD, idle.read_to_end(&mut rest))
        .await
        .expect("idle connection left open");
    // Closed (or reset) by the server, with nothing more said.
    if closed.is_ok() {
        assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    }
    let closed = tokio::time::timeout(HANG_GUARD, silent.read_to_end(&mut rest))
        .await
        .expect("silent connection left open");
    if closed.is_ok() {
        assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    }
    drop(client);
}

/// Starts a service on a Redis server that will be frozen, with store
/// timeouts longer than any test: a request waits for the thaw.
async fn service_on_freezable_redis(server: &RedisServer, test: &str, grace: Duration) -> support::Service {
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix(test))
        .response_timeout(Duration::from_secs(40))
        .connect()
        .await
        .expect("connect");
    let service = start_with(RULES, ServiceStore::Redis(store), |config| {
        config.deadline = Duration::from_secs(40);
        config.grace = grace;
    })
    .await;
    let (status, _, answer) = support::post_json(&service.url("/v1/check"), &check_body("warm")).await;
    assert_eq!(status, 200, "{answer}");
    service
}

/// The grace bounds the drain: a request the store does not answer does
/// not keep `serve` from returning `Ok` once the grace is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grace_bounds_the_drain() {
    tokio::time::timeout(HANG_GUARD, async {
        let server = RedisServer::start().expect("redis-server");
        let service = service_on_freezable_redis(&server, "grace", Duration::from_millis(300)).await;
        let (http_addr, grpc_addr) = (service.http, service.grpc);
        server.pause().expect("SIGSTOP redis-server");
        let request = send_request(http_addr, "POST", "/v1/check", &check_body("stuck")).await.unwrap();
        let port = request.port;
        let answer = tokio::spawn(read_answer(request));
        support::eventually("the request in the service's hands", async || {
            read_by_server(http_addr.port(), port)
        })
        .await;

        // Redis stays frozen: only the end of the grace lets serve return
        // (stop() panics unless it returned Ok).
        service.stop().await;
        if answer.is_finished() {
            // Dropped at the end of the grace (not answered: Redis is frozen).
            let outcome = answer.await.expect("reader task");
            assert!(outcome.is_err(), "answered by a frozen store? {outcome:?}");
        }
        assert!(TcpStream::connect(http_addr).await.is_err(), "HTTP listener closed");
        assert!(TcpStream::connect(grpc_addr).await.is_err(), "gRPC listener closed");
        server.resume().expect("SIGCONT redis-server");
    })
    .await
    .expect("hang guard");
}

/// What `serve` says when the grace is over ("requests still in flight are
/// dropped"): once it has returned, a request it gave up on is not answered
/// any more — the service is gone, whatever the store does next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_still_in_flight_after_the_grace_are_dropped() {
    tokio::time::timeout(HANG_GUARD, async {
        let server = RedisServer::start().expect("redis-server");
        let service = service_on_freezable_redis(&server, "dropped", Duration::from_millis(300)).await;
        let http_addr = service.http;
        let (channel, tap) = tapped_channel(service.grpc).await;
        server.pause().expect("SIGSTOP redis-server");
        let request = send_request(http_addr, "POST", "/v1/check", &check_body("given-up")).await.unwrap();
        let port = request.port;
        let http_answer = tokio::spawn(read_answer(request));
        let mut client = RateLimitServiceClient::new(channel);
        let grpc_answer = tokio::spawn(async move {
            client.should_rate_limit(rls("edge", &[&[("client", "grpc-given-up")]])).await
        });
        support::eventually("the requests in the service's hands", async || {
            read_by_server(http_addr.port(), port)
                && tap.has_sent("grpc-given-up")
                && tap.port().is_some_and(|p| read_by_server(service.grpc.port(), p))
        })
        .await;

        service.stop().await;
        // serve has returned: thawing the store must not bring answers from it.
        server.resume().expect("SIGCONT redis-server");
        let http_outcome = http_answer.await.expect("reader task");
        let grpc_outcome = grpc_answer.await.expect("call task").map(|answer| answer.into_inner().overall_code);
        assert!(
            http_outcome.is_err() && grpc_outcome.is_err(),
            "answered after serve returned, by connections that outlived it:\n  HTTP: {http_outcome:?}\n  gRPC: \
             {grpc_outcome:?}"
        );
    })
    .await
    .expect("hang guard");
}
