//! The twin of [`Api`]'s bypass: every request it answers without the
//! router (`POST /v1/check`, `/v1/peek`, `/json`) is answered byte for
//! byte alike — status, every header in order, body — by the router,
//! reached as [`Api`] reaches it for any other request ([`Api::route`]).
//!
//! Two services with their own memory store, on manual clocks at the same
//! time, serve real sockets through the service's own accept loop (one
//! with the bypass, one with every request routed) and are sent the same
//! requests in the same order, over HTTP/1.1 and h2c. Answers are compared
//! as clients receive them — on the wire for HTTP/1.1, `date` aside:
//! before hyper writes them, the router's carry a `content-length` that
//! hyper adds to the bypass's, at the same place.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, header};
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use slidegate::{Limiter, ManualClock, MemoryStore};
use slidegate_tower::headers::Families;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::{Api, ApiFuture, AppState, MAX_BODY_BYTES, declared_too_large, read_body};
use crate::ServiceStore;
use crate::config::{Config, Rules};
use crate::decide::Decider;
use crate::runtime::accept::{accept, api as connections_of};
use crate::runtime::reload::{Reloader, Seen};
use crate::runtime::status::ServiceStatus;

const RULES: &str = r"
domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: team
    value: red
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: trial
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 1 }
";

/// A service on the memory store at `clock`'s time, with every family of
/// quota headers.
fn api(clock: &ManualClock) -> Api {
    let config = Config::from_texts(&[(PathBuf::from("rules.yaml"), RULES.to_owned())])
        .unwrap_or_else(|e| panic!("the rules load: {e}"));
    let store = ServiceStore::Memory(MemoryStore::builder().clock(clock.clone()).build());
    let limiter = Limiter::builder(store).clock(clock.clone()).build();
    let rules = Rules::new(config);
    let status = Arc::new(ServiceStatus::new("hash", None));
    let state = AppState {
        decider: Decider::new(limiter, rules.clone()),
        families: Families::new(true, true, true),
        status: Arc::clone(&status),
        reloader: Reloader::with_gateway(rules, None, None, status, Seen::now(None, None, &[])),
        metrics: None,
        admin_token: None,
        store_kind: "memory",
        gateway: None,
        server_stats: Arc::default(),
    };
    Api::new(state, Duration::from_secs(10))
}

/// How a request's body arrives.
#[derive(Clone, Copy)]
enum Sent {
    /// Whole, with its length known.
    Whole,
    /// In 7-byte pieces that each keep the reader waiting once, length
    /// unknown (chunked).
    Trickled,
}

/// One request to send both ways.
struct Case {
    path: &'static str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    sent: Sent,
}

fn case(path: &'static str, body: impl Into<Vec<u8>>) -> Case {
    Case { path, content_type: Some("application/json"), body: body.into(), sent: Sent::Whole }
}

impl Case {
    fn content_type(self, content_type: Option<&'static str>) -> Case {
        Case { content_type, ..self }
    }

    fn trickled(self) -> Case {
        Case { sent: Sent::Trickled, ..self }
    }

    /// The request as HTTP/1.1 bytes (the connection closed after it): its
    /// head, and its body in two writes.
    fn wire(&self) -> (Vec<u8>, Vec<u8>) {
        let mut head =
            format!("POST {} HTTP/1.1\r\nhost: slidegate.test\r\nconnection: close\r\n", self.path);
        if let Some(content_type) = self.content_type {
            head.push_str(&format!("content-type: {content_type}\r\n"));
        }
        let mut body = Vec::new();
        match self.sent {
            Sent::Whole => {
                head.push_str(&format!("content-length: {}\r\n", self.body.len()));
                body.extend_from_slice(&self.body);
            }
            Sent::Trickled => {
                head.push_str("transfer-encoding: chunked\r\n");
                for piece in self.body.chunks(7) {
                    body.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    body.extend_from_slice(piece);
                    body.extend_from_slice(b"\r\n");
                }
                body.extend_from_slice(b"0\r\n\r\n");
            }
        }
        let mut first = head.into_bytes();
        first.extend_from_slice(b"\r\n");
        let rest = body.split_off(body.len() / 2);
        first.extend(body);
        (first, rest)
    }

    /// The request for an HTTP/2 connection.
    fn request(&self) -> Request<Body> {
        let body = match self.sent {
            Sent::Whole => Body::from(self.body.clone()),
            Sent::Trickled => trickled(&self.body, 7),
        };
        let mut request = Request::new(body);
        *request.method_mut() = Method::POST;
        *request.uri_mut() = format!("http://slidegate.test{}", self.path).parse().expect("a URI");
        if let Some(content_type) = self.content_type {
            request.headers_mut().insert(header::CONTENT_TYPE, content_type.parse().expect("a value"));
        }
        request
    }
}

/// `body` in pieces of `size` bytes, each keeping its reader waiting once.
fn trickled(body: &[u8], size: usize) -> Body {
    let pieces: Vec<Bytes> = body.chunks(size).map(Bytes::copy_from_slice).collect();
    Body::from_stream(futures::stream::iter(pieces).then(|piece| async move {
        tokio::task::yield_now().await;
        Ok::<_, Infallible>(piece)
    }))
}

/// [`Api`] with its bypass off: every request goes to the router, as any
/// request [`Api`] does not answer itself does (a body declared too large
/// is refused first, as [`Api`] refuses it).
#[derive(Clone)]
struct Routed(Api);

impl tower_service::Service<Request<Incoming>> for Routed {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> ApiFuture {
        declared_too_large(&request).unwrap_or_else(|| self.0.route(request))
    }
}

/// A server on a loopback port, served by the service's accept loop,
/// until `stop`.
async fn serve<S>(service: S, stop: &watch::Receiver<bool>) -> std::net::SocketAddr
where
    S: tower_service::Service<
            Request<Incoming>,
            Response = axum::response::Response,
            Error = Infallible,
            Future = ApiFuture,
        > + Clone
        + Send
        + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let timeout = Duration::from_secs(10);
    let tasks = Arc::new(Mutex::new(tokio::task::JoinSet::new()));
    tokio::spawn(accept(listener, connections_of(service, timeout), stop.clone(), tasks, timeout));
    addr
}

/// The bytes of the answer to `case` over HTTP/1.1, read to the
/// connection's end, the value of `date` blanked out.
async fn over_http1(addr: std::net::SocketAddr, case: &Case) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let (first, rest) = case.wire();
    stream.write_all(&first).await.expect("write");
    stream.flush().await.expect("flush");
    // The server may answer (413) and close before reading it all.
    let _ = stream.write_all(&rest).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let lines: Vec<&str> = text
        .split("\r\n")
        .map(|line| if line.to_ascii_lowercase().starts_with("date: ") { "date: -" } else { line })
        .collect();
    lines.join("\r\n")
}

/// The answer to `case` on a new HTTP/2 connection (a 413 closes it):
/// status, every header in order but `date`, and the body.
async fn over_http2(addr: std::net::SocketAddr, case: &Case) -> String {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.expect("h2c");
    tokio::spawn(connection);
    let response = sender.send_request(case.request()).await.expect("an answer");
    let (parts, body) = response.into_parts();
    let mut text = format!("{}\n", parts.status);
    for (name, value) in parts.headers.iter().filter(|(name, _)| **name != header::DATE) {
        text.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())));
    }
    let body = body.collect().await.expect("a body").to_bytes();
    text.push_str(&String::from_utf8_lossy(&body));
    text
}

fn check(entries: &[&[(&str, &str)]], hits: Option<u32>) -> String {
    let descriptors: Vec<serde_json::Value> = entries
        .iter()
        .map(|entries| {
            let entries: Vec<_> =
                entries.iter().map(|(key, value)| serde_json::json!({"key": key, "value": value})).collect();
            serde_json::json!({ "entries": entries })
        })
        .collect();
    let mut body = serde_json::json!({ "domain": "api", "descriptors": descriptors });
    if let Some(hits) = hits {
        body["hits_addend"] = hits.into();
    }
    body.to_string()
}

/// The requests, in the order both services get them: allowed, then
/// limited, in each mode; bad bodies of every kind; several descriptors.
fn cases() -> Vec<Case> {
    let alice = || check(&[&[("user", "alice")]], None);
    let json = |user: &str| {
        format!(r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#)
    };
    let oversized = format!(r#"{{"domain":"{}"}}"#, "a".repeat(MAX_BODY_BYTES));
    vec![
        case("/v1/check", alice()),
        case("/v1/peek", alice()),
        case("/v1/check", alice()).trickled(),
        case("/v1/check", alice()),
        case("/v1/peek", alice()),
        case("/json", json("alice")),
        case("/json", json("bob")),
        case("/json", json("bob")).trickled(),
        case("/v1/peek", check(&[&[("user", "carol")]], None)),
        case("/v1/check", check(&[&[("user", "carol")], &[("team", "red")]], None)),
        case("/v1/check", check(&[&[("user", "dave")], &[("team", "red")]], None)),
        case("/v1/check", check(&[&[("user", "erin")], &[("trial", "t")]], Some(1))),
        case("/v1/check", check(&[&[("user", "erin")], &[("trial", "t")]], Some(1))),
        case("/v1/check", check(&[&[("user", "frank")]], Some(3))),
        case(
            "/json",
            r#"{"domain":"api","hitsAddend":"3","descriptors":[{"entries":[{"key":"user","value":"gina"}]}]}"#,
        ),
        case(
            "/json",
            r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"hal"}],"limit":{"requestsPerUnit":5,"unit":"HOUR"}}]}"#,
        ),
        case(
            "/v1/check",
            r#"{"domain":"elsewhere","descriptors":[{"entries":[{"key":"user","value":"x"}]}]}"#,
        ),
        case("/json", r#"{"domain":"elsewhere","descriptors":[{"entries":[{"key":"user","value":"x"}]}]}"#),
        case("/v1/check", alice()).content_type(Some("text/plain")),
        case("/json", json("ivy")).content_type(None),
        case("/v1/check", r#"{"domain":"#),
        case("/json", r#"{"domain":"#).trickled(),
        case("/v1/check", r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":7}]}]}"#),
        case("/v1/peek", r#"{"domain":"api","descriptors":[],"extra":true}"#),
        case("/json", r#"{"domain":"api","descriptors":[{"isNegativeHits":true}]}"#),
        case("/v1/check", b"{\"domain\":\"\xff\"}".to_vec()),
        case("/v1/check", ""),
        case("/json", ""),
        case("/v1/check", oversized.clone()),
        case("/json", oversized.clone()).trickled(),
        case("/v1/peek", oversized).trickled(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bypass_answers_byte_for_byte_as_the_router() {
    let (bypass_clock, router_clock) = (ManualClock::new(1_000_000), ManualClock::new(1_000_000));
    let (stop, stopped) = watch::channel(false);
    let bypass = serve(api(&bypass_clock), &stopped).await;
    let router = serve(Routed(api(&router_clock)), &stopped).await;
    let mut statuses = std::collections::BTreeSet::new();
    for (i, case) in cases().iter().enumerate() {
        let through_bypass = over_http1(bypass, case).await;
        let through_router = over_http1(router, case).await;
        assert_eq!(through_bypass, through_router, "request {i} to {}, HTTP/1.1", case.path);
        statuses.insert(through_bypass.get(9..12).unwrap_or_default().to_owned());
        // An HTTP/2 client still sending a body the server has refused
        // may see the stream reset before the answer: only HTTP/1.1,
        // read whatever comes, is sure to show it.
        if case.body.len() <= MAX_BODY_BYTES {
            let through_bypass = over_http2(bypass, case).await;
            let through_router = over_http2(router, case).await;
            assert_eq!(through_bypass, through_router, "request {i} to {}, HTTP/2", case.path);
        }
        for clock in [&bypass_clock, &router_clock] {
            clock.advance(Duration::from_millis(250));
        }
    }
    let _ = stop.send(true);
    let statuses: Vec<&str> = statuses.iter().map(String::as_str).collect();
    assert_eq!(statuses, ["200", "400", "413", "429"], "every kind of answer was compared");
}

/// The twin of [`read_body`]'s shortcut (a body that came with its head is
/// read at once, without a timer): a body read as it comes, under the
/// timer, is read to the same bytes or refused with the same answer.
#[tokio::test]
async fn a_body_read_at_once_is_read_as_one_that_trickles_in() {
    async fn text(read: Result<Bytes, axum::response::Response>) -> String {
        match read {
            Ok(body) => {
                use std::hash::{Hash as _, Hasher as _};
                let mut hasher = std::hash::DefaultHasher::new();
                body.hash(&mut hasher);
                format!("read {} bytes, hashed {:x}", body.len(), hasher.finish())
            }
            Err(answer) => {
                let (parts, body) = answer.into_parts();
                let body = body.collect().await.expect("a body").to_bytes();
                format!("{} {:?} {body:?}", parts.status, parts.headers)
            }
        }
    }
    let timeout = Duration::from_secs(10);
    for size in [0, 1, 100, MAX_BODY_BYTES, MAX_BODY_BYTES + 1] {
        let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let at_once = text(read_body(Body::from(body.clone()), timeout).await).await;
        let trickling = text(read_body(trickled(&body, 4096), timeout).await).await;
        assert_eq!(at_once, trickling, "a body of {size} bytes");
    }
}
