//! Gateway mode end to end: a gateway served in-process on port 0 between
//! real clients (HTTP/1.1, h2c, WebSocket, raw sockets) and real upstreams
//! on port 0 (the testkit's [`Upstream`], and a hand-written one that ends
//! its connections on purpose) — routing, limits, forwarding headers,
//! streaming, upstream failures, limits on input and reload.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServeError, ServerConfig, ServiceStore, serve};
use slidegate_testkit::Upstream;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{self, Message};

/// A hang guard only: every wait below ends long before it unless
/// something hangs.
const HANG_GUARD: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// The gateway, in-process.

/// A running gateway; dropping it stops it.
struct Gateway {
    /// The proxy.
    addr: SocketAddr,
    /// The HTTP API.
    api: SocketAddr,
    /// Its gateway file.
    file: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Gateway {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn api_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.api)
    }

    /// A JSON answer of the HTTP API.
    async fn api_json(&self, path: &str) -> Value {
        let (status, _, text) = support::http("GET", &self.api_url(path), "", &[]).await;
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: JSON: {e}: {text}"))
    }

    /// The hash of the gateway file in force.
    async fn hash(&self) -> String {
        self.api_json("/v1/gateway").await["hash"].as_str().expect("hash").to_owned()
    }

    /// Stops it and waits until it has drained.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("serve task").expect("serve");
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts a gateway whose file holds `yaml`; returns once it answers.
async fn gateway(yaml: &str) -> Gateway {
    gateway_with(yaml, |_| {}).await
}

/// As [`gateway`], its service configured by `adjust`.
async fn gateway_with(yaml: &str, adjust: impl FnOnce(&mut ServerConfig)) -> Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    support::write(&file, yaml);
    let mut config = ServerConfig::for_gateway(&file, ServiceStore::Memory(MemoryStore::new()));
    config.grace = Duration::from_secs(2);
    config.metrics_recorder = true;
    adjust(&mut config);
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let (api, addr) = (http.local_addr().expect("addr"), proxy.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let task =
        tokio::spawn(serve(config, Listeners::new(None, Some(http)).with_gateway(proxy), async move {
            let _ = stopped.await;
        }));
    // It answers once it serves; a refused file ends `serve` instead.
    let uri = format!("http://{api}/v1/gateway");
    if let Err(error) = support::http_client().get(uri.parse().expect("uri")).await {
        panic!("the gateway did not start: {error}; serve: {:?}", task.await);
    }
    Gateway { addr, api, file, _dir: dir, stop: Some(stop), task: Some(task) }
}

/// A gateway with `settings` (YAML lines, or none) and one route, `r`, of
/// every request to `upstream`.
async fn one_route(upstream: SocketAddr, settings: &str) -> Gateway {
    gateway(&format!("{settings}routes:\n  - name: r\n    upstreams: [http://{upstream}]\n")).await
}

/// `yaml` with each `(placeholder, address)` written in.
fn fill(yaml: &str, upstreams: &[(&str, SocketAddr)]) -> String {
    upstreams.iter().fold(yaml.to_owned(), |yaml, (name, addr)| yaml.replace(name, &addr.to_string()))
}

// ---------------------------------------------------------------------------
// Upstreams: real servers on port 0.

/// An HTTP/1.1 upstream called `name` (the testkit's: see [`Upstream`]).
fn upstream(name: &str) -> Upstream {
    Upstream::builder().name(name).http1_only().start()
}

/// An address nobody listens on (bound, then closed).
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr")
}

// ---------------------------------------------------------------------------
// Clients.

/// `GET url` with `headers`: status, headers and body text.
async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, HeaderMap, String) {
    support::http("GET", url, "", headers).await
}

/// An echo answered through the gateway: asserts 200 and parses it.
async fn echo(method: &str, url: &str, headers: &[(&str, &str)]) -> Value {
    let (status, response_headers, text) = support::http(method, url, "", headers).await;
    assert_eq!(status, 200, "{method} {url}: {text}");
    let echo: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("echo JSON: {e}: {text}"));
    assert_eq!(
        response_headers.get("x-upstream").map(|v| v.to_str().expect("ascii")),
        echo["upstream"].as_str(),
        "{echo}"
    );
    echo
}

/// The values an echo says the upstream received for header `name`.
fn received(echo: &Value, name: &str) -> Vec<String> {
    echo["headers"][name]
        .as_array()
        .map(|values| values.iter().map(|v| v.as_str().expect("string").to_owned()).collect())
        .unwrap_or_default()
}

/// The one value the upstream received for `name`.
#[track_caller]
fn received_one(echo: &Value, name: &str) -> String {
    let values = received(echo, name);
    assert_eq!(values.len(), 1, "one `{name}` expected: {echo}");
    values[0].clone()
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).map(|v| v.to_str().expect("ASCII header"))
}

/// The `r=` of `rule` in the `RateLimit` fields of `headers`.
fn remaining(headers: &HeaderMap, rule: &str) -> Option<u64> {
    let quoted = format!("\"{rule}\"");
    headers
        .get_all("ratelimit")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find_map(|item| {
            let params = item.strip_prefix(quoted.as_str())?;
            params.split(';').find_map(|p| p.strip_prefix("r=")).and_then(|r| r.parse().ok())
        })
}

/// Sends `request` (whole) on a new connection and reads the answer until
/// the server closes it (the request should say `connection: close`).
async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    // The server may answer and close before reading it all.
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            // A reset after the answer (the server closed with bytes unread).
            Err(_) if !answer.is_empty() => break,
            Err(e) => panic!("no answer: {e}"),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// The status code of a raw HTTP/1.1 answer.
#[track_caller]
fn status_of(answer: &str) -> u16 {
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}

/// An HTTP/1.1 connection of its own (hyper's, over one socket).
struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    task: JoinHandle<()>,
}

impl Connection {
    async fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        Connection { sender, task }
    }

    /// `GET path`: the status, or the error if the connection fails.
    async fn get(&mut self, path: &str) -> Result<u16, hyper::Error> {
        self.sender.ready().await?;
        let request = Request::get(path).header("host", "cap.test").body(Empty::new()).expect("request");
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        response.into_body().collect().await?;
        Ok(status)
    }

    /// Closes the socket.
    async fn close(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

// ---------------------------------------------------------------------------
// 1. Routing.

const ROUTING: &str = r#"
routes:
  # Before the exact host in the file: an exact host still outranks it.
  - name: wildcard
    host: "*.example.com"
    upstreams: [http://UP/wildcard]
  - name: exact_host
    host: api.example.com
    upstreams: [http://UP/exact_host]
  - name: api
    path_prefix: /api
    upstreams: [http://UP/api]
  - name: api_post
    path_prefix: /api
    methods: [POST, put]
    upstreams: [http://UP/api_post]
  - name: api_v2
    path_prefix: /api/v2
    upstreams: [http://UP/api_v2]
  - name: strip
    path_prefix: /strip
    strip_prefix: true
    upstreams: [http://UP/base/]
  - name: own_host
    path_prefix: /own-host
    preserve_host: false
    upstreams: [http://UP]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_host_path_and_method_most_specific_first() {
    let up = upstream("up");
    let gateway = gateway(&fill(ROUTING, &[("UP", up.addr())])).await;
    // Each route's upstream URL has the route's name as its base path: the
    // path the upstream receives names the route that took the request.
    let route_of = async |method: &str, path: &str, host: &str| -> String {
        let seen = echo(method, &gateway.url(path), &[("host", host)]).await;
        assert_eq!(seen["method"], method);
        seen["uri"].as_str().expect("uri").to_owned()
    };
    // Exact host, any case and port; it outranks every route without a
    // host, even a longer prefix.
    assert_eq!(route_of("GET", "/x", "api.example.com").await, "/exact_host/x");
    assert_eq!(route_of("GET", "/api/v2/x", "API.Example.COM:8080").await, "/exact_host/api/v2/x");
    // `*.example.com`: any subdomain, not example.com itself.
    assert_eq!(route_of("GET", "/x", "www.example.com").await, "/wildcard/x");
    assert_eq!(route_of("DELETE", "/api/x", "a.b.example.com").await, "/wildcard/api/x");
    // Without a host: the longest prefix, then a route with methods.
    assert_eq!(route_of("GET", "/api/x?q=1&r=2", "other.test").await, "/api/api/x?q=1&r=2");
    assert_eq!(route_of("POST", "/api/x", "other.test").await, "/api_post/api/x");
    assert_eq!(route_of("PUT", "/api", "other.test").await, "/api_post/api");
    assert_eq!(route_of("POST", "/api/v2/x", "other.test").await, "/api_v2/api/v2/x");
    assert_eq!(route_of("GET", "/api/v2", "example.com").await, "/api_v2/api/v2");

    // No route.
    for (path, host) in [("/", "other.test"), ("/x", "example.com"), ("/ap", "other.test")] {
        let (status, _, body) = get(&gateway.url(path), &[("host", host)]).await;
        assert_eq!((status, body.as_str()), (404, "no route for this request\n"), "{host}{path}");
    }

    // `strip_prefix` cuts the prefix; the upstream's base path goes first;
    // the query stays.
    assert_eq!(route_of("GET", "/strip/a/b?c=d", "other.test").await, "/base/a/b?c=d");
    assert_eq!(route_of("GET", "/strip", "other.test").await, "/base/");

    // `preserve_host` (the default): the upstream sees the client's Host.
    let seen = echo("GET", &gateway.url("/api/x"), &[("host", "client.test:81")]).await;
    assert_eq!(received_one(&seen, "host"), "client.test:81");
    // `preserve_host: false`: the upstream's own.
    let seen = echo("GET", &gateway.url("/own-host/x"), &[("host", "client.test")]).await;
    assert_eq!(seen["uri"], "/own-host/x");
    assert_eq!(received_one(&seen, "host"), up.addr().to_string());
    assert_eq!(received_one(&seen, "x-forwarded-host"), "client.test");
    // Nothing to change in the path (no base path, no prefix cut): it and
    // the query arrive as they were sent, encoded bytes and all.
    let seen = echo("GET", &gateway.url("/own-host/a%20b/c?q=%2F&r&=x"), &[]).await;
    assert_eq!(seen["uri"], "/own-host/a%20b/c?q=%2F&r&=x");

    assert_eq!(up.requests(), 14, "the 404s never reached the upstream");
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 2. Limits.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_limit_admits_exactly_n_then_429_with_quota_headers() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: limited
    upstreams: [http://UP]
    limits:
      - { key: client_ip, requests_per_unit: 3, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let url = gateway.url("/thing");
    for left in (0..3u64).rev() {
        let (status, headers, text) = get(&url, &[]).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(header(&headers, "x-upstream"), Some("up"));
        assert_eq!(header(&headers, "x-ratelimit-limit"), Some("3"));
        assert_eq!(header(&headers, "x-ratelimit-remaining"), Some(left.to_string().as_str()));
        let reset: u64 = header(&headers, "x-ratelimit-reset").expect("x-ratelimit-reset").parse().unwrap();
        assert!((1..=60).contains(&reset), "{reset}");
        assert_eq!(header(&headers, "ratelimit-policy"), Some("\"limited.client_ip\";q=3;w=60"));
        assert_eq!(remaining(&headers, "limited.client_ip"), Some(left), "{headers:?}");
        assert_eq!(header(&headers, "retry-after"), None, "admitted: no Retry-After");
    }
    // Over the limit: text by default, JSON when asked.
    let (status, headers, text) = get(&url, &[]).await;
    assert_eq!((status, text.as_str()), (429, "Too Many Requests\n"));
    assert_eq!(header(&headers, "content-type"), Some("text/plain; charset=utf-8"));
    let retry: u64 = header(&headers, "retry-after").expect("retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(header(&headers, "x-ratelimit-limit"), Some("3"));
    assert_eq!(header(&headers, "x-ratelimit-remaining"), Some("0"));
    assert!(header(&headers, "x-ratelimit-reset").is_some());
    assert_eq!(header(&headers, "ratelimit-policy"), Some("\"limited.client_ip\";q=3;w=60"));
    assert_eq!(remaining(&headers, "limited.client_ip"), Some(0));
    assert_eq!(header(&headers, "x-upstream"), None);

    let (status, headers, text) = get(&url, &[("accept", "application/json")]).await;
    assert_eq!(status, 429);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    let body: Value = serde_json::from_str(&text).expect("JSON 429");
    assert_eq!(body["error"], "rate_limited");
    assert_eq!(body["message"], "Too Many Requests");
    assert_eq!(body["limit"], 3);
    assert_eq!(body["remaining"], 0);
    assert!((1..=60).contains(&body["retry_after_secs"].as_u64().expect("retry_after_secs")), "{body}");
    assert_eq!(up.requests(), 3, "limited requests never reach the upstream");

    // The status page's statistics count the gateway's decisions: the
    // limited client among the most limited identities, the decisions'
    // time as store latency.
    let (_, _, text) = get(&gateway.api_url("/v1/stats"), &[]).await;
    let stats: Value = serde_json::from_str(&text).expect("stats");
    let top = stats["top_limited"].as_array().expect("top_limited");
    assert_eq!(top[0]["identity"], "gateway: route=limited, client_ip=127.0.0.1", "{top:?}");
    assert_eq!(top[0]["count"], 2);
    assert!(stats["store"]["latency_us"]["p50"].as_f64().is_some(), "{}", stats["store"]);
    // And the metrics, by route and outcome.
    for (outcome, count) in [("admitted", 3.0), ("limited", 2.0)] {
        let labels = [("route", "limited"), ("outcome", outcome)];
        assert_eq!(metric(&gateway, "slidegate_gateway_requests_total", &labels).await, count, "{outcome}");
    }
    let timed =
        metric(&gateway, "slidegate_gateway_request_duration_seconds_count", &[("route", "limited")]).await;
    assert_eq!(timed, 5.0, "every decided request is timed");
    gateway.stop().await;
}

/// Each limit counts in its own per-limit counters (envoy ratelimit's),
/// labelled with the descriptor it counts as and its name — also when a
/// limit before it was skipped for a missing key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limit_counts_in_its_own_counters_past_a_skipped_one() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: r
    upstreams: [http://UP]
    limits:
      - { name: by_user, key: "header:x-user", on_missing: skip, requests_per_unit: 5, window: 1m }
      - { name: by_ip, key: client_ip, requests_per_unit: 2, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let url = gateway.url("/x");
    let statuses = [get(&url, &[]).await.0, get(&url, &[]).await.0, get(&url, &[]).await.0];
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(get(&url, &[("x-user", "u")]).await.0, 429, "by_ip is spent");
    let counters = async |name: &str, labels: &[(&str, &str)]| {
        metric(&gateway, &format!("slidegate_rate_limit_{name}_total"), labels).await
    };
    let by_ip = [("domain", "gateway"), ("limit", "gateway.route_r.client_ip"), ("name", "r.by_ip")];
    let by_user = [("domain", "gateway"), ("limit", "gateway.route_r.header:x-user"), ("name", "r.by_user")];
    let mut seen = Vec::new();
    for name in ["total_hits", "within_limit", "near_limit", "over_limit"] {
        seen.push((counters(name, &by_ip).await, counters(name, &by_user).await));
    }
    assert_eq!(
        seen,
        [(4.0, 1.0), (2.0, 1.0), (1.0, 0.0), (2.0, 0.0)],
        "by_ip: 4 hits, 2 within (the second near), 2 over; by_user: the one request with its key"
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_limits_apply_to_every_route_all_or_nothing_with_the_routes() {
    let up = upstream("up");
    let yaml = r#"
limits:
  - { name: per_key, key: "header:x-api-key", requests_per_unit: 3, window: 1m }
routes:
  - name: a
    path_prefix: /a
    upstreams: [http://UP]
    limits:
      - { key: client_ip, requests_per_unit: 2, window: 1m }
  - name: b
    path_prefix: /b
    upstreams: [http://UP]
  - name: c
    path_prefix: /c
    upstreams: [http://UP]
    limits:
      - { key: client_ip, requests_per_unit: 2, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let call = async |path: &str, key: &str| get(&gateway.url(path), &[("x-api-key", key)]).await;

    // Key k1 on route a: both limits charged.
    for (key_left, route_left) in [(2, 1), (1, 0)] {
        let (status, headers, _) = call("/a", "k1").await;
        assert_eq!(status, 200);
        assert_eq!(remaining(&headers, "gateway.per_key"), Some(key_left), "{headers:?}");
        assert_eq!(remaining(&headers, "a.client_ip"), Some(route_left), "{headers:?}");
        assert_eq!(
            header(&headers, "ratelimit-policy"),
            Some("\"gateway.per_key\";q=3;w=60, \"a.client_ip\";q=2;w=60")
        );
    }
    // Route a's limit denies the third; the gateway's is not charged...
    assert_eq!(call("/a", "k1").await.0, 429);
    // ... so k1 has one request left, on any route (b has no limit of its own).
    let (status, headers, _) = call("/b", "k1").await;
    assert_eq!(status, 200);
    assert_eq!(remaining(&headers, "gateway.per_key"), Some(0), "{headers:?}");
    assert_eq!(header(&headers, "ratelimit-policy"), Some("\"gateway.per_key\";q=3;w=60"));
    assert_eq!(call("/b", "k1").await.0, 429, "the gateway's limit applies to route b");

    // The gateway's limit denies k1 on route c: c's limit is not charged,
    // two other keys get both of c's requests.
    assert_eq!(call("/c", "k1").await.0, 429);
    let (status, headers, _) = call("/c", "k2").await;
    assert_eq!(status, 200);
    assert_eq!(remaining(&headers, "c.client_ip"), Some(1), "the denied request charged nothing");
    assert_eq!(remaining(&headers, "gateway.per_key"), Some(2));
    let (status, headers, _) = call("/c", "k3").await;
    assert_eq!(status, 200);
    assert_eq!(remaining(&headers, "c.client_ip"), Some(0));
    assert_eq!(call("/c", "k4").await.0, 429, "c's own limit denies");
    assert_eq!(up.requests(), 2 + 1 + 2);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_under_reject_is_400() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: keyed
    upstreams: [http://UP]
    limits:
      - { key: "header:x-api-key", on_missing: reject, requests_per_unit: 5, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let (status, _, body) = get(&gateway.url("/x"), &[]).await;
    let named =
        "cannot identify the client: the request has no `x-api-key` header (or it is empty or not text)\n";
    assert_eq!((status, body.as_str()), (400, named), "the answer names the header");
    let (status, headers, _) = get(&gateway.url("/x"), &[("x-api-key", "k")]).await;
    assert_eq!(status, 200);
    assert_eq!(remaining(&headers, "keyed.header-x-api-key"), Some(4), "{headers:?}");
    assert_eq!(up.requests(), 1);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_client_gets_the_ban_status() {
    let up = upstream("up");
    let yaml = r#"
ban_status: 403
routes:
  - name: login
    upstreams: [http://UP]
    limits:
      - key: client_ip
        requests_per_unit: 1
        window: 1m
        penalty: { window: 1m, ban_after: 2, ban_for: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let url = gateway.url("/login");
    let json = [("accept", "application/json")];
    let mut statuses = Vec::new();
    let mut last = (0, HeaderMap::new(), String::new());
    for _ in 0..4 {
        last = get(&url, &json).await;
        statuses.push(last.0);
    }
    // One admitted, one violation; the second violation bans.
    assert_eq!(statuses, [200, 429, 403, 403]);
    let (_, headers, text) = last;
    let body: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(body["error"], "banned", "{body}");
    assert_eq!(body["message"], "Forbidden: banned for repeated violations", "{body}");
    let retry: u64 = header(&headers, "retry-after").expect("retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(get(&url, &[]).await.0, 403, "still banned");
    assert_eq!(up.requests(), 1);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 3. Trusted proxies and forwarding headers.

const KEYED_BY_CLIENT: &str = r#"
trusted_proxies: [TRUSTED]
routes:
  - name: r
    upstreams: [http://UP]
    limits:
      - { key: client_ip, requests_per_unit: 2, window: 1m }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_names_the_client() {
    let up = upstream("up");
    let yaml = fill(&KEYED_BY_CLIENT.replace("TRUSTED", "127.0.0.1"), &[("UP", up.addr())]);
    let gateway = gateway(&yaml).await;
    let url = gateway.url("/x");
    for _ in 0..2 {
        let seen = echo("GET", &url, &[("x-forwarded-for", "203.0.113.1"), ("host", "app.test")]).await;
        // Extended with the peer, not replaced.
        assert_eq!(received_one(&seen, "x-forwarded-for"), "203.0.113.1, 127.0.0.1");
        assert_eq!(received_one(&seen, "x-forwarded-proto"), "http");
        assert_eq!(received_one(&seen, "x-forwarded-host"), "app.test");
        assert_eq!(received_one(&seen, "forwarded"), "for=127.0.0.1;proto=http;host=\"app.test\"");
    }
    assert_eq!(get(&url, &[("x-forwarded-for", "203.0.113.1")]).await.0, 429);
    // Another client behind the proxy has its own quota.
    let (status, headers, _) = get(&url, &[("x-forwarded-for", "203.0.113.2")]).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-ratelimit-remaining"), Some("1"));
    // A trusted proxy's own forwarding headers are kept and extended.
    let seen = echo(
        "GET",
        &url,
        &[
            ("x-forwarded-for", "203.0.113.3"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "edge.test"),
            ("forwarded", "for=203.0.113.3;proto=https"),
            ("host", "app.test"),
        ],
    )
    .await;
    assert_eq!(received_one(&seen, "x-forwarded-for"), "203.0.113.3, 127.0.0.1");
    assert_eq!(received_one(&seen, "x-forwarded-proto"), "https");
    assert_eq!(received_one(&seen, "x-forwarded-host"), "edge.test");
    assert_eq!(
        received_one(&seen, "forwarded"),
        "for=203.0.113.3;proto=https, for=127.0.0.1;proto=http;host=\"app.test\""
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_client_cannot_pick_its_key_or_forge_forwarding_headers() {
    let up = upstream("up");
    let yaml = fill(&KEYED_BY_CLIENT.replace("TRUSTED", "10.0.0.0/8"), &[("UP", up.addr())]);
    let gateway = gateway(&yaml).await;
    let url = gateway.url("/x");
    for spoof in ["203.0.113.1", "203.0.113.2"] {
        let seen = echo(
            "GET",
            &url,
            &[
                ("x-forwarded-for", spoof),
                ("x-forwarded-proto", "https"),
                ("x-forwarded-host", "forged.test"),
                ("forwarded", "for=198.51.100.1;proto=https"),
                ("host", "app.test"),
            ],
        )
        .await;
        assert_eq!(received_one(&seen, "x-forwarded-for"), "127.0.0.1", "the spoof is replaced");
        assert_eq!(received_one(&seen, "x-forwarded-proto"), "http");
        assert_eq!(received_one(&seen, "x-forwarded-host"), "app.test");
        assert_eq!(received_one(&seen, "forwarded"), "for=127.0.0.1;proto=http;host=\"app.test\"");
    }
    // Both spoofs counted against the peer: a third address is over.
    let (status, headers, _) = get(&url, &[("x-forwarded-for", "203.0.113.3")]).await;
    assert_eq!(status, 429);
    assert_eq!(header(&headers, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(up.requests(), 2);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 4. Hop-by-hop headers.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_headers_stop_at_the_gateway_both_ways() {
    // An upstream whose answers carry hop-by-hop headers of their own.
    let up = Upstream::builder()
        .name("up")
        .http1_only()
        .header("connection", "x-up-secret")
        .header("x-up-secret", "1")
        .header("keep-alive", "timeout=5")
        .header("proxy-authenticate", "Basic")
        .header("x-up-kept", "1")
        .start();
    let gateway = one_route(up.addr(), "").await;
    let (status, headers, text) = support::http(
        "GET",
        &gateway.url("/hop"),
        "",
        &[
            ("connection", "x-secret, keep-alive"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic dXNlcjpwYXNz"),
            ("proxy-connection", "keep-alive"),
            ("x-kept", "1"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let seen: Value = serde_json::from_str(&text).expect("echo");
    for gone in ["connection", "x-secret", "keep-alive", "proxy-authorization", "proxy-connection"] {
        assert!(received(&seen, gone).is_empty(), "`{gone}` reached the upstream: {seen}");
    }
    assert_eq!(received_one(&seen, "x-kept"), "1");
    // The upstream's own hop-by-hop headers stop too.
    for gone in ["x-up-secret", "keep-alive", "proxy-authenticate"] {
        assert_eq!(header(&headers, gone), None, "`{gone}` reached the client: {headers:?}");
    }
    assert!(
        headers.get_all("connection").iter().all(|v| !v.to_str().unwrap().contains("x-up-secret")),
        "{headers:?}"
    );
    assert_eq!(header(&headers, "x-up-kept"), Some("1"));
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 5. HTTP/2.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_client_reaches_an_http1_upstream_and_is_limited() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: r
    upstreams: [http://UP]
    limits:
      - { key: client_ip, requests_per_unit: 2, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let stream = TcpStream::connect(gateway.addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2c handshake");
    let connection = tokio::spawn(connection);
    let mut statuses = Vec::new();
    for i in 0..3 {
        sender.ready().await.expect("ready");
        let request = Request::get(format!("http://app.test/h2?i={i}")).body(Empty::<Bytes>::new()).unwrap();
        let response = sender.send_request(request).await.expect("h2 request");
        assert_eq!(response.version(), http::Version::HTTP_2);
        let status = response.status();
        let remaining = header(response.headers(), "x-ratelimit-remaining").map(str::to_owned);
        let body = response.into_body().collect().await.expect("body").to_bytes();
        statuses.push(status.as_u16());
        if status == StatusCode::OK {
            let seen: Value = serde_json::from_slice(&body).expect("echo");
            assert_eq!(seen["uri"], format!("/h2?i={i}"));
            assert_eq!(seen["version"], "HTTP/1.1", "the upstream speaks HTTP/1.1");
            assert_eq!(received_one(&seen, "host"), "app.test");
            assert_eq!(remaining.as_deref(), Some(if i == 0 { "1" } else { "0" }));
        }
    }
    assert_eq!(statuses, [200, 200, 429], "one connection, three requests");
    drop(sender);
    let _ = connection.await;
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_route_speaks_h2c_to_its_upstream() {
    let up = Upstream::builder().name("h2").http2_only().start();
    let yaml = "routes:\n  - name: grpcish\n    http2: true\n    upstreams: [http://UP]\n";
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let seen = echo("GET", &gateway.url("/svc/method?x=1"), &[("host", "app.test")]).await;
    assert_eq!(seen["upstream"], "h2");
    assert_eq!(seen["version"], "HTTP/2.0");
    assert_eq!(seen["uri"], "/svc/method?x=1");
    assert_eq!(received_one(&seen, "x-forwarded-host"), "app.test");
    // A body goes through as well.
    let (status, _, text) = support::http("POST", &gateway.url("/count"), vec![7u8; 100_000], &[]).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(text, "100000", "the body's length");
    assert_eq!(up.requests(), 2);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 6. Streaming.

const SIXTY_FOUR_MIB: u64 = 64 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_through_whole_both_ways() {
    let up = upstream("up");
    let gateway = one_route(up.addr(), "").await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();

    // Upload: 64 MiB in 64 KiB pieces, chunked (no content-length).
    let piece = Bytes::from(vec![b'x'; 65_536]);
    let pieces = SIXTY_FOUR_MIB / 65_536;
    let body = StreamBody::new(futures::stream::iter(
        (0..pieces).map(move |_| Ok::<_, Infallible>(Frame::data(piece.clone()))),
    ));
    let request = Request::post(gateway.url("/count")).body(BoxBody::new(body)).expect("request");
    let response = client.request(request).await.expect("upload");
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(body, SIXTY_FOUR_MIB.to_string(), "the upstream got every byte");

    // Download: 64 MiB generated by the upstream, read frame by frame.
    let request = Request::get(gateway.url(&format!("/stream/{SIXTY_FOUR_MIB}")))
        .body(BoxBody::new(Empty::new()))
        .unwrap();
    let response = client.request(request).await.expect("download");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut at = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("frame");
        let Some(data) = frame.data_ref() else { continue };
        if let (Some(first), Some(last)) = (data.first(), data.last()) {
            assert_eq!(*first, Upstream::stream_byte(at), "byte {at}");
            assert_eq!(
                *last,
                Upstream::stream_byte(at + data.len() as u64 - 1),
                "byte {}",
                at + data.len() as u64 - 1
            );
        }
        at += data.len() as u64;
    }
    assert_eq!(at, SIXTY_FOUR_MIB, "the client got every byte");
    drop(client);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 7. Upstream failures.

/// The value of the gateway's upstream error counter for `route` and `kind`.
async fn upstream_errors(gateway: &Gateway, route: &str, kind: &str) -> f64 {
    metric(gateway, "slidegate_gateway_upstream_errors_total", &[("route", route), ("kind", kind)]).await
}

/// The sum of the `/metrics` samples of `name` with every label of `labels`.
async fn metric(gateway: &Gateway, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (status, _, text) = get(&gateway.api_url("/metrics"), &[]).await;
    assert_eq!(status, 200, "{text}");
    let labels: Vec<String> = labels.iter().map(|(label, value)| format!("{label}=\"{value}\"")).collect();
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')))
        .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_502() {
    let nobody = closed_port().await;
    let yaml = "routes:\n  - name: unreachable\n    upstreams: [http://NOBODY]\n";
    let gateway = gateway(&fill(yaml, &[("NOBODY", nobody)])).await;
    for _ in 0..2 {
        let (status, _, body) = get(&gateway.url("/x"), &[]).await;
        assert_eq!(status, 502, "{body}");
    }
    assert_eq!(upstream_errors(&gateway, "unreachable", "connect").await, 2.0);
    gateway.stop().await;
}

/// An upstream down under load: every request is a 502 and counted, and
/// its warning is logged once per interval, not once per request. On one
/// thread, so the gateway's tasks log to this test's subscriber.
#[tokio::test]
async fn an_unreachable_upstream_is_logged_once_per_interval_not_per_request() {
    let log = slidegate_testkit::CapturedLog::default();
    let _logging = tracing::subscriber::set_default(log.subscriber());
    let nobody = closed_port().await;
    let yaml = "routes:\n  - name: down\n    upstreams: [http://NOBODY]\n";
    let gateway = gateway(&fill(yaml, &[("NOBODY", nobody)])).await;
    for _ in 0..40 {
        let (status, _, body) = get(&gateway.url("/x"), &[]).await;
        assert_eq!(status, 502, "{body}");
    }
    assert_eq!(upstream_errors(&gateway, "down", "connect").await, 40.0, "every failure is counted");
    gateway.stop().await;
    let warned = log.lines("upstream unreachable");
    assert_eq!(warned.len(), 1, "{:?}", log.lines(""));
    assert!(warned[0].contains("route=down") && warned[0].contains("held_back=0"), "{warned:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_upstream_is_retried_around_then_skipped() {
    let nobody = closed_port().await;
    let good = upstream("good");
    let yaml = r#"
upstream_down_for: 1h
routes:
  - name: failover
    upstreams: [http://NOBODY, http://GOOD]
"#;
    let gateway = gateway(&fill(yaml, &[("NOBODY", nobody), ("GOOD", good.addr())])).await;
    for i in 0..6 {
        let trace = format!("t{i}");
        let seen = echo("GET", &gateway.url(&format!("/x/{i}")), &[("x-trace", &trace)]).await;
        assert_eq!(seen["upstream"], "good");
        // The retried request carries the whole head too.
        assert_eq!(received_one(&seen, "x-trace"), trace, "{seen}");
        assert_eq!(received_one(&seen, "x-forwarded-for"), "127.0.0.1", "{seen}");
    }
    assert_eq!(good.requests(), 6);
    // The first request tried the down one (round robin starts there) and
    // was retried on the other; after that it was skipped.
    assert_eq!(upstream_errors(&gateway, "failover", "connect").await, 1.0);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_is_504() {
    let up = upstream("slow");
    let yaml = "response_timeout: 300ms\nroutes:\n  - name: slow\n    upstreams: [http://UP]\n";
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let (status, _, body) = get(&gateway.url("/sleep/5000"), &[]).await;
    assert_eq!(status, 504, "{body}");
    // With a body: the wait for the answer starts once it is sent.
    let (status, _, body) = support::http("POST", &gateway.url("/sleep/5000"), "payload", &[]).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(echo("GET", &gateway.url("/quick"), &[]).await["upstream"], "slow");
    assert_eq!(upstream_errors(&gateway, "slow", "timeout").await, 2.0);
    gateway.stop().await;
}

/// An upload that stops making progress for the response timeout ends
/// with 504 (a slow one that keeps going is no timeout: the CLI's tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upload_is_504() {
    let up = upstream("up");
    let gateway = one_route(up.addr(), "response_timeout: 300ms\n").await;
    // A chunked body that sends one chunk, then nothing more.
    let mut stream = tokio::net::TcpStream::connect(gateway.addr).await.expect("connect");
    let head = "POST /count HTTP/1.1\r\nhost: app.test\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n";
    tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let read = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer).await.unwrap_or(0);
            answer.extend_from_slice(&buffer[..n]);
            if n == 0 || answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the gateway neither answered nor closed");
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status_of(&answer), 504, "{answer}");
    assert_eq!(upstream_errors(&gateway, "r", "timeout").await, 1.0);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 7b. Upstream connections, kept between requests.

/// How a [`raw_upstream`] ends its connections.
#[derive(Clone, Copy)]
enum Ending {
    /// Closes a connection idle this long (a keep-alive timeout).
    IdleFor(Duration),
    /// Answers `connection: close` and closes after each answer.
    EachAnswer,
    /// Never answers; keeps the connection until the other side closes it.
    Never,
    /// Answers the first request on each connection; at the second, closes
    /// the connection unanswered (a keep-alive timeout met as the request
    /// came): after reading it (`read: true`, a FIN), or with it unread (a
    /// reset).
    ClosesAtSecond { read: bool },
}

/// An HTTP/1.1 upstream written by hand: answers every request head with
/// `200 ok`, ending connections as `ending` says. Its connections end with
/// its task (aborted: every socket closes). It is not the testkit's
/// [`Upstream`] because it breaks HTTP on purpose — it closes a kept
/// connection as a request arrives, or reads a request and never answers —
/// which a well-behaved server (hyper's) cannot be made to do, and only
/// these tests need.
struct RawUpstream {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    /// Connections open now.
    open: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

async fn raw_upstream(listener: TcpListener, ending: Ending) -> RawUpstream {
    let addr = listener.local_addr().expect("addr");
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(AtomicUsize::new(0));
    let (accepted, answered, now_open) = (Arc::clone(&connections), Arc::clone(&requests), Arc::clone(&open));
    let task = tokio::spawn(async move {
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            accepted.fetch_add(1, Ordering::SeqCst);
            now_open.fetch_add(1, Ordering::SeqCst);
            let (answered, now_open) = (Arc::clone(&answered), Arc::clone(&now_open));
            tasks.spawn(async move {
                serve_raw(stream, ending, answered).await;
                now_open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    RawUpstream { addr, connections, open, requests, task }
}

async fn serve_raw(mut stream: TcpStream, ending: Ending, answered: Arc<AtomicUsize>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut served = 0;
    loop {
        if let (Ending::ClosesAtSecond { read: false }, 1) = (ending, served) {
            // Closed with the request unread: the peer gets a reset.
            let _ = stream.readable().await;
            answered.fetch_add(1, Ordering::SeqCst);
            return;
        }
        while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = match ending {
                Ending::IdleFor(idle) => tokio::time::timeout(idle, stream.read(&mut chunk)).await,
                Ending::EachAnswer | Ending::Never | Ending::ClosesAtSecond { .. } => {
                    Ok(stream.read(&mut chunk).await)
                }
            };
            match read {
                Ok(Ok(n)) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        }
        let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
        buffer.drain(..end);
        answered.fetch_add(1, Ordering::SeqCst);
        served += 1;
        if matches!(ending, Ending::Never) {
            // Until the other side closes.
            while stream.read(&mut chunk).await.is_ok_and(|n| n > 0) {}
            return;
        }
        if let (Ending::ClosesAtSecond { .. }, 2) = (ending, served) {
            return;
        }
        let close = matches!(ending, Ending::EachAnswer);
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n{}\r\nok\n",
            if close { "connection: close\r\n" } else { "" }
        );
        if stream.write_all(answer.as_bytes()).await.is_err() || close {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_kept_and_shared_by_client_connections() {
    let up = upstream("up");
    let gateway = one_route(up.addr(), "").await;
    // One request at a time, each on a new client connection: one
    // upstream connection carries them all.
    for i in 0..20 {
        let echo = echo("GET", &gateway.url(&format!("/one/{i}")), &[]).await;
        assert_eq!(echo["uri"], format!("/one/{i}"));
    }
    assert_eq!(up.requests(), 20);
    assert_eq!(up.connections(), 1, "one kept connection");
    // Eight clients at once, each on its own kept connection: no more
    // upstream connections than requests in flight.
    let clients = (0..8).map(|_| {
        let addr = gateway.addr;
        tokio::spawn(async move {
            let mut connection = Connection::open(addr).await;
            for _ in 0..10 {
                assert_eq!(connection.get("/many").await.expect("answer"), 200);
            }
            connection.close().await;
        })
    });
    for client in clients.collect::<Vec<_>>() {
        tokio::time::timeout(HANG_GUARD, client).await.expect("hang").expect("client");
    }
    assert_eq!(up.requests(), 100);
    assert!(up.connections() <= 9, "{} upstream connections for 8 in flight", up.connections());
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_ends_its_connections_loses_no_request() {
    // A keep-alive timeout shorter than the pauses between requests: each
    // request finds its kept connection closed, and takes a new one.
    let idle = raw_upstream(
        TcpListener::bind("127.0.0.1:0").await.expect("bind"),
        Ending::IdleFor(Duration::from_millis(50)),
    )
    .await;
    let gateway_idle = one_route(idle.addr, "").await;
    for _ in 0..4 {
        let (status, _, body) = get(&gateway_idle.url("/"), &[]).await;
        assert_eq!((status, body.as_str()), (200, "ok\n"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(idle.requests.load(Ordering::SeqCst), 4);
    assert_eq!(idle.connections.load(Ordering::SeqCst), 4, "a closed connection is never used again");
    gateway_idle.stop().await;

    // `connection: close` on every answer: never kept, never failed.
    let closing =
        raw_upstream(TcpListener::bind("127.0.0.1:0").await.expect("bind"), Ending::EachAnswer).await;
    let gateway_closing = one_route(closing.addr, "").await;
    for _ in 0..10 {
        let (status, headers, body) = get(&gateway_closing.url("/"), &[]).await;
        assert_eq!((status, body.as_str()), (200, "ok\n"));
        assert!(headers.get("connection").is_none(), "the upstream's `connection` stays with it");
    }
    assert_eq!(closing.connections.load(Ordering::SeqCst), 10);
    gateway_closing.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_closed_as_a_request_came_is_tried_again_when_that_is_safe() {
    for read in [true, false] {
        let up = raw_upstream(
            TcpListener::bind("127.0.0.1:0").await.expect("bind"),
            Ending::ClosesAtSecond { read },
        )
        .await;
        let gateway = one_route(up.addr, "").await;
        let url = gateway.url("/");
        assert_eq!(get(&url, &[]).await.0, 200);
        // Idle long enough for an upstream's keep-alive timeout: the kept
        // connection is closed under the next GET, which is sent again on
        // a new connection.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (status, _, body) = get(&url, &[]).await;
        assert_eq!((status, body.as_str()), (200, "ok\n"), "read: {read}");
        assert_eq!(up.requests.load(Ordering::SeqCst), 3, "read: {read}");
        assert_eq!(up.connections.load(Ordering::SeqCst), 2, "read: {read}");
        // A POST is never sent twice: the client hears that it failed.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (status, _, _) = support::http("POST", &url, "a body", &[]).await;
        assert_eq!(status, 502, "read: {read}");
        assert_eq!(up.requests.load(Ordering::SeqCst), 4, "read: {read}");
        assert_eq!(up.connections.load(Ordering::SeqCst), 2, "read: {read}");
        gateway.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_never_answers_is_left_no_connection_open() {
    let silent = raw_upstream(TcpListener::bind("127.0.0.1:0").await.expect("bind"), Ending::Never).await;
    let gateway = one_route(silent.addr, "response_timeout: 200ms\n").await;
    let url = gateway.url("/");
    let asks = (0..10).map(|_| get(&url, &[]));
    for (status, _, _) in futures::future::join_all(asks).await {
        assert_eq!(status, 504);
    }
    assert_eq!(silent.requests.load(Ordering::SeqCst), 10);
    // A connection whose answer never came is closed, not kept or left open.
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while silent.open.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(silent.open.load(Ordering::SeqCst), 0, "connections left open to a silent upstream");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_upstream_is_reached_on_new_connections() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let first = raw_upstream(listener, Ending::IdleFor(HANG_GUARD)).await;
    let gateway = one_route(addr, "").await;
    // Several kept connections.
    let mut clients: Vec<Connection> = Vec::new();
    for _ in 0..4 {
        clients.push(Connection::open(gateway.addr).await);
    }
    let answers = futures::future::join_all(clients.iter_mut().map(|c| c.get("/"))).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(200))), "{answers:?}");
    // The upstream restarts: every kept connection is closed under the gateway.
    first.task.abort();
    let _ = first.task.await;
    let second =
        raw_upstream(TcpListener::bind(addr).await.expect("rebind"), Ending::IdleFor(HANG_GUARD)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    for client in &mut clients {
        assert_eq!(client.get("/").await.expect("answer"), 200);
    }
    for _ in 0..4 {
        assert_eq!(get(&gateway.url("/"), &[]).await.0, 200);
    }
    assert_eq!(second.requests.load(Ordering::SeqCst), 8);
    for client in clients {
        client.close().await;
    }
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_cut_short_or_early_leave_no_broken_connection_behind() {
    let up = upstream("up");
    let gateway = one_route(up.addr(), "").await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();
    for _ in 0..3 {
        // A download the client stops reading and drops after its first frame.
        let request =
            Request::get(gateway.url("/stream/16777216")).body(BoxBody::new(Empty::new())).expect("request");
        let response = client.request(request).await.expect("download");
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        body.frame().await.expect("a frame").expect("frame");
        drop(body);
        // An upload the upstream answers without reading it (the echo does
        // not read bodies): the answer comes before the body is all sent.
        let upload = Bytes::from(vec![b'x'; 8 << 20]);
        let request =
            Request::post(gateway.url("/early")).body(BoxBody::new(Full::new(upload))).expect("request");
        let response = tokio::time::timeout(HANG_GUARD, client.request(request)).await.expect("hang");
        // The upstream closes the connection with the body unread, which
        // fails the exchange under the gateway (hyper's client): its answer
        // or a 502, never a hang — or, when the gateway answers and closes
        // while this client is still sending, a broken pipe here.
        match response {
            Ok(response) => assert!(matches!(response.status().as_u16(), 200 | 502), "{response:?}"),
            Err(error) => {
                assert!(error.is_connect() || format!("{error:?}").contains("BodyWrite"), "{error:?}")
            }
        }
        // What follows on the kept connections is whole and right.
        for i in 0..5 {
            let echo = echo("GET", &gateway.url(&format!("/after/{i}")), &[]).await;
            assert_eq!(echo["uri"], format!("/after/{i}"));
            assert_eq!(echo["method"], "GET");
        }
    }
    drop(client);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 8. WebSocket.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_tunnel_through_and_their_handshakes_are_limited() {
    let ws = Upstream::builder().name("ws").start();
    let yaml = r#"
routes:
  - name: ws
    path_prefix: /ws
    upstreams: [http://WS]
    limits:
      - { key: client_ip, requests_per_unit: 2, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("WS", ws.addr())])).await;
    let url = format!("ws://{}/ws/echo", gateway.addr);
    let mut sockets = Vec::new();
    for n in 0..2u8 {
        let (mut socket, response) = tokio_tungstenite::connect_async(url.as_str()).await.expect("handshake");
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(header(response.headers(), "x-ratelimit-remaining"), Some(if n == 0 { "1" } else { "0" }));
        // The upstream speaks first...
        let greeting = socket.next().await.expect("a message").expect("greeting");
        assert_eq!(greeting, Message::text("ws"));
        // ... and echoes what the client sends.
        socket.send(Message::text(format!("hello {n}"))).await.expect("send");
        assert_eq!(
            socket.next().await.expect("a message").expect("echo"),
            Message::text(format!("hello {n}"))
        );
        let binary = vec![n; 100_000];
        socket.send(Message::binary(binary.clone())).await.expect("send");
        assert_eq!(socket.next().await.expect("a message").expect("echo"), Message::binary(binary));
        sockets.push(socket);
    }
    // The third handshake is over the limit: 429, no upgrade.
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert!(response.headers().contains_key("retry-after"));
        }
        Err(other) => panic!("expected a 429, got {other}"),
        Ok(_) => panic!("the third handshake was admitted"),
    }
    // The open tunnels still work, and close cleanly.
    for mut socket in sockets {
        socket.send(Message::text("still here")).await.expect("send");
        assert_eq!(socket.next().await.expect("a message").expect("echo"), Message::text("still here"));
        socket.close(None).await.expect("close");
        while let Some(Ok(_)) = socket.next().await {}
    }
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 9. Limits on input.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_max_header_bytes_is_431() {
    let up = upstream("up");
    let gateway = one_route(up.addr(), "max_header_bytes: 8192\n").await;
    let request = |filler: usize| {
        format!(
            "GET /x HTTP/1.1\r\nhost: app.test\r\nx-filler: {}\r\nconnection: close\r\n\r\n",
            "a".repeat(filler)
        )
    };
    assert_eq!(status_of(&raw(gateway.addr, request(4_000).as_bytes()).await), 200);
    assert_eq!(status_of(&raw(gateway.addr, request(9_000).as_bytes()).await), 431);
    assert_eq!(up.requests(), 1);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_address_are_capped() {
    let up = upstream("up");
    let yaml = r#"
max_connections_per_ip: 2
trusted_proxies: [10.0.0.0/8]
routes:
  - name: r
    upstreams: [http://UP]
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let mut first = Connection::open(gateway.addr).await;
    let mut second = Connection::open(gateway.addr).await;
    // Answered, so both are open and counted.
    assert_eq!(first.get("/1").await.expect("first"), 200);
    assert_eq!(second.get("/2").await.expect("second"), 200);
    // A third is closed without an answer.
    let mut third = Connection::open(gateway.addr).await;
    assert!(third.get("/3").await.is_err(), "the third connection was served");
    third.close().await;
    // The two still work.
    assert_eq!(first.get("/1").await.expect("first"), 200);
    assert_eq!(second.get("/2").await.expect("second"), 200);
    // Once one closes, a new one is served (as soon as the gateway has
    // seen the close).
    first.close().await;
    support::eventually("a connection once one closed", async || {
        let mut fresh = Connection::open(gateway.addr).await;
        let served = fresh.get("/4").await.is_ok_and(|status| status == 200);
        fresh.close().await;
        served
    })
    .await;
    assert_eq!(second.get("/2").await.expect("second"), 200);
    second.close().await;
    assert!(up.requests() >= 5, "{}", up.requests());
    gateway.stop().await;
}

/// A client that connects and sends nothing is closed once the header
/// timeout passes, and gives its place under the per-address cap back:
/// silent connections cannot lock an address (or, many, the descriptors)
/// out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_closed_and_free_their_place() {
    let up = upstream("up");
    let yaml = "max_connections_per_ip: 1\nroutes:\n  - name: r\n    upstreams: [http://UP]\n";
    let gateway = gateway_with(&fill(yaml, &[("UP", up.addr())]), |config| {
        config.header_timeout = Duration::from_millis(300);
    })
    .await;
    let mut silent = TcpStream::connect(gateway.addr).await.expect("connect");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), silent.read_to_end(&mut rest))
        .await
        .expect("the silent connection was left open");
    if read.is_ok() {
        assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    }
    support::eventually("a connection once the silent one closed", async || {
        let mut fresh = Connection::open(gateway.addr).await;
        let served = fresh.get("/after").await.is_ok_and(|status| status == 200);
        fresh.close().await;
        served
    })
    .await;
    assert_eq!(up.requests(), 1);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_proxies_are_not_capped() {
    let up = upstream("up");
    let yaml = r#"
max_connections_per_ip: 1
trusted_proxies: [127.0.0.1]
routes:
  - name: r
    upstreams: [http://UP]
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    let mut connections = Vec::new();
    for i in 0..3 {
        let mut connection = Connection::open(gateway.addr).await;
        assert_eq!(connection.get(&format!("/{i}")).await.expect("served"), 200);
        connections.push(connection);
    }
    for connection in connections {
        connection.close().await;
    }
    gateway.stop().await;
}

/// A WebSocket tunnel holds a connection from its client: it keeps its
/// place under `max_connections_per_ip` after hyper hands the upgraded
/// socket over, until it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_tunnels_count_against_the_connection_cap() {
    let ws = Upstream::builder().name("ws").start();
    let up = upstream("up");
    let yaml = r#"
max_connections_per_ip: 2
routes:
  - name: ws
    path_prefix: /ws
    upstreams: [http://WS]
  - name: r
    upstreams: [http://UP]
"#;
    let gateway = gateway(&fill(yaml, &[("WS", ws.addr()), ("UP", up.addr())])).await;
    let url = format!("ws://{}/ws/echo", gateway.addr);
    let mut sockets = Vec::new();
    for _ in 0..2 {
        let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str()).await.expect("handshake");
        assert_eq!(socket.next().await.expect("a message").expect("greeting"), Message::text("ws"));
        sockets.push(socket);
    }
    // Two tunnels open: a third connection is one too many.
    let mut third = Connection::open(gateway.addr).await;
    let served = third.get("/3").await;
    third.close().await;
    assert!(served.is_err(), "a third connection was served while two tunnels were open: {served:?}");
    // A closed tunnel frees its place.
    let mut socket = sockets.pop().expect("a tunnel");
    socket.close(None).await.expect("close");
    while let Some(Ok(_)) = socket.next().await {}
    // The client's TCP connection closes with the socket.
    drop(socket);
    support::eventually("a connection once a tunnel closed", async || {
        let mut fresh = Connection::open(gateway.addr).await;
        let served = fresh.get("/4").await.is_ok_and(|status| status == 200);
        fresh.close().await;
        served
    })
    .await;
    drop(sockets);
    gateway.stop().await;
}

/// WebSocket tunnels run among the connections `serve` drains: the grace
/// period ends them, so none outlives `serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_gateway_ends_its_websocket_tunnels() {
    let ws = Upstream::builder().name("ws").start();
    let yaml = "routes:\n  - name: ws\n    upstreams: [http://WS]\n";
    let gateway = gateway(&fill(yaml, &[("WS", ws.addr())])).await;
    let url = format!("ws://{}/ws/echo", gateway.addr);
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str()).await.expect("handshake");
    assert_eq!(socket.next().await.expect("a message").expect("greeting"), Message::text("ws"));
    socket.send(Message::text("before")).await.expect("send");
    assert_eq!(socket.next().await.expect("a message").expect("echo"), Message::text("before"));
    // `serve` returns once drained, or at the end of the grace period (2 s).
    gateway.stop().await;
    // The send may fail already; what comes back must not be an echo.
    let _ = socket.send(Message::text("after")).await;
    let next = tokio::time::timeout(HANG_GUARD, socket.next())
        .await
        .expect("the tunnel neither answered nor closed");
    assert!(
        !matches!(&next, Some(Ok(message)) if message.is_text()),
        "the tunnel outlived the gateway: {next:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_and_ambiguous_spellings_are_refused() {
    let up = upstream("up");
    let yaml = "routes:\n  - name: api\n    path_prefix: /api\n    upstreams: [http://UP]\n";
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    for path in [
        "/api/../admin",
        "/api/%2e%2e/admin",
        "/api/%2E%2e/admin",
        "/api/./x",
        "/api/x/..",
        // An upstream that decodes `%2f` or `\` before resolving would see a `..` segment.
        "/api/..%2fadmin",
        "/api/%2e%2e%5Cadmin",
        "/api/..\\admin",
        // Servlet containers drop path parameters: `..;` is `..` to them.
        "/api/..;/admin",
        "/api;x=1/y",
        // Encoded separators, and a `%` that starts no escape.
        "/api%2Fx",
        "/api/100%",
    ] {
        let request = format!("GET {path} HTTP/1.1\r\nhost: app.test\r\nconnection: close\r\n\r\n");
        let answer = raw(gateway.addr, request.as_bytes()).await;
        assert_eq!(status_of(&answer), 400, "{path}: {answer}");
    }
    // Dots that are no segment of their own are a path like any other.
    let request = "GET /api/..x/a.b HTTP/1.1\r\nhost: app.test\r\nconnection: close\r\n\r\n";
    assert_eq!(status_of(&raw(gateway.addr, request.as_bytes()).await), 200);
    assert_eq!(up.requests(), 1, "no refused path reached the upstream");
    gateway.stop().await;
}

/// A limited route and an unlimited one below it: every spelling an
/// upstream reads as the limited route's path is matched to it, limited,
/// and forwarded in the form it was matched in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_limited_path_meets_its_limit() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: api
    path_prefix: /api/
    upstreams: [http://UP/limited]
    limits:
      - { key: "header:x-api-key", on_missing: reject, requests_per_unit: 100, window: 1m }
  - name: site
    path_prefix: /
    upstreams: [http://UP/open]
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    for path in ["/api/x", "//api/x", "///api/x", "/%61pi/x", "/ap%69/x", "/api//x"] {
        let request = format!("GET {path} HTTP/1.1\r\nhost: app.test\r\nconnection: close\r\n\r\n");
        let answer = raw(gateway.addr, request.as_bytes()).await;
        assert_eq!(
            status_of(&answer),
            400,
            "{path} without a key reached a route without the limit: {answer}"
        );
        assert!(answer.contains("cannot identify the client: the request has no `"), "{path}: {answer}");
    }
    assert_eq!(up.requests(), 0);
    // With the key: forwarded as matched.
    let seen = echo("GET", &gateway.url("//%61pi//x%2a?q=%2F"), &[("x-api-key", "k")]).await;
    assert_eq!(seen["uri"], "/limited/api/x%2A?q=%2F", "{seen}");
    // Over HTTP/2 (`:path` is the client's to write).
    let stream = TcpStream::connect(gateway.addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.expect("h2c");
    let connection = tokio::spawn(connection);
    for path in ["//api/x", "/%61pi/x"] {
        let request = Request::get(format!("http://app.test{path}")).body(Empty::<Bytes>::new()).unwrap();
        let response = sender.send_request(request).await.expect("h2 request");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "h2 {path}");
    }
    drop(sender);
    let _ = connection.await;
    assert_eq!(up.requests(), 1);
    gateway.stop().await;
}

/// `key: path` counts a path, not its spellings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_key_counts_one_path_however_it_is_spelled() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: p
    upstreams: [http://UP]
    limits:
      - { key: path, requests_per_unit: 2, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    assert_eq!(get(&gateway.url("/p/b"), &[]).await.0, 200);
    assert_eq!(get(&gateway.url("/p/%62"), &[]).await.0, 200);
    let (status, headers, _) = get(&gateway.url("//p//b"), &[]).await;
    assert_eq!(status, 429, "three requests for one path: {headers:?}");
    assert_eq!(get(&gateway.url("/p/c"), &[]).await.0, 200, "another path counts apart");
    gateway.stop().await;
}

/// A request carrying a key header twice is refused: the limit would
/// count one value while the upstream might read the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_header_is_400() {
    let up = upstream("up");
    let yaml = r#"
routes:
  - name: keyed
    upstreams: [http://UP]
    limits:
      - { key: "header:x-api-key", requests_per_unit: 3, window: 1m }
"#;
    let gateway = gateway(&fill(yaml, &[("UP", up.addr())])).await;
    for i in 0..5 {
        let request = format!(
            "GET /x HTTP/1.1\r\nhost: app.test\r\nx-api-key: rand{i}\r\nx-api-key: realkey\r\nconnection: close\r\n\r\n"
        );
        let answer = raw(gateway.addr, request.as_bytes()).await;
        assert_eq!(status_of(&answer), 400, "{answer}");
        assert!(answer.ends_with("a header a limit is keyed by is repeated\n"), "{answer}");
    }
    assert_eq!(up.requests(), 0);
    let (status, headers, _) = get(&gateway.url("/x"), &[("x-api-key", "realkey")]).await;
    assert_eq!((status, remaining(&headers, "keyed.header-x-api-key")), (200, Some(2)));
    gateway.stop().await;
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host`, or with two, is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_needs_exactly_one_host() {
    let up = upstream("up");
    let gateway = one_route(up.addr(), "").await;
    for (head, status) in [
        ("GET /x HTTP/1.1\r\n", 400),
        ("GET /x HTTP/1.1\r\nhost: a.test\r\nhost: b.test\r\n", 400),
        ("GET /x HTTP/1.1\r\nhost: a.test\r\nhost: a.test\r\n", 400),
        ("GET /x HTTP/1.1\r\nhost: a test\r\n", 400),
        ("GET /x HTTP/1.1\r\nhost: a.test\r\n", 200),
        ("GET /x HTTP/1.0\r\n", 200),
    ] {
        let request = format!("{head}connection: close\r\n\r\n");
        let answer = raw(gateway.addr, request.as_bytes()).await;
        let got = answer.get(9..12).and_then(|code| code.parse::<u16>().ok());
        assert_eq!(got, Some(status), "{head:?}: {answer}");
    }
    assert_eq!(up.requests(), 2);
    gateway.stop().await;
}

// ---------------------------------------------------------------------------
// 10. Reload and statistics.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_file_applies_to_new_requests_and_a_broken_one_changes_nothing() {
    let (a, b) = (upstream("a"), upstream("b"));
    let first = r#"
routes:
  - name: main
    upstreams: [http://UPSTREAM_A]
    limits:
      - { key: client_ip, requests_per_unit: 100, window: 1m }
"#;
    let second = r#"
routes:
  - name: main
    upstreams: [http://UPSTREAM_B]
    limits:
      - { key: client_ip, requests_per_unit: 2, window: 1m }
  - name: other
    path_prefix: /other
    upstreams: [http://UPSTREAM_B]
"#;
    let upstreams = [("UPSTREAM_A", a.addr()), ("UPSTREAM_B", b.addr())];
    let gateway = gateway(&fill(first, &upstreams)).await;
    let (status, headers, _) = get(&gateway.url("/x"), &[]).await;
    assert_eq!((status, header(&headers, "x-upstream")), (200, Some("a")));
    assert_eq!(header(&headers, "x-ratelimit-limit"), Some("100"));

    let old = gateway.hash().await;
    support::write(&gateway.file, &fill(second, &upstreams));
    let mut new = String::new();
    support::eventually("the rewritten gateway file in force", async || {
        new = gateway.hash().await;
        new != old
    })
    .await;
    let status = gateway.api_json("/v1/status").await;
    assert_eq!(status["last_reload"]["result"], "ok", "{status}");
    assert_eq!(status["gateway"]["hash"], new.as_str());
    assert_eq!(status["gateway"]["routes"], json!(["main", "other"]));
    // New requests: the new upstream and the new limit. The limit's count
    // goes on (its state is keyed by its rule's name, `main.client_ip`):
    // one request made under 100 a minute, one now, and 2 a minute is full.
    let (status, headers, _) = get(&gateway.url("/x"), &[]).await;
    assert_eq!((status, header(&headers, "x-upstream")), (200, Some("b")));
    assert_eq!(header(&headers, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&headers, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&headers, "ratelimit-policy"), Some("\"main.client_ip\";q=2;w=60"));
    assert_eq!(get(&gateway.url("/x"), &[]).await.0, 429);

    // A broken file: refused, shown, and the routes in force stay.
    support::write(&gateway.file, "routes:\n  - name: main\n    upstreams: [ftp://nowhere]\n");
    support::eventually("the broken file refused", async || {
        gateway.api_json("/v1/status").await["last_reload"]["result"] == "error"
    })
    .await;
    let status = gateway.api_json("/v1/status").await;
    let errors = status["last_reload"]["errors"].as_array().expect("errors");
    assert!(errors.iter().any(|e| e.as_str().is_some_and(|e| e.contains("ftp://nowhere"))), "{status}");
    assert_eq!(status["gateway"]["hash"], new.as_str());
    assert_eq!(gateway.hash().await, new);
    assert_eq!(echo("GET", &gateway.url("/other/y"), &[]).await["upstream"], "b");
    assert_eq!(get(&gateway.url("/x"), &[]).await.0, 429, "the limit in force still holds");
    assert_eq!((a.requests(), b.requests()), (1, 2));

    // The statistics: per route, admitted and limited per second; `main`
    // kept its series through the reload.
    let stats = gateway.api_json("/v1/stats").await;
    let routes = stats["gateway"]["routes"].as_array().expect("gateway routes");
    let sum = |route: &Value, field: &str| -> u64 {
        let series = route[field].as_array().unwrap_or_else(|| panic!("{field}: {route}"));
        assert_eq!(series.len(), 300, "five minutes of seconds");
        series.iter().map(|n| n.as_u64().expect("count")).sum()
    };
    let main = routes.iter().find(|r| r["name"] == "main").expect("main");
    assert_eq!((sum(main, "admitted"), sum(main, "limited")), (2, 2), "{main}");
    let other = routes.iter().find(|r| r["name"] == "other").expect("other");
    assert_eq!((sum(other, "admitted"), sum(other, "limited")), (1, 0), "{other}");
    gateway.stop().await;
}
