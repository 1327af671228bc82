//! In-process services on port 0, and clients for them.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::Channel;

/// A running service; dropping it stops it.
pub struct Service {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub dir: tempfile::TempDir,
    pub rules: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<Result<(), slidegate_server::ServeError>>>,
}

impl Service {
    /// Stops it and waits until it has drained.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("serve task").expect("serve");
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    pub async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc)).await.expect("connect gRPC")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A key prefix no other test in this process uses.
pub fn unique_prefix(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t:{test}:{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Starts a service whose rules file holds `rules`, configured by `adjust`.
pub async fn start_with(rules: &str, store: ServiceStore, adjust: impl FnOnce(&mut ServerConfig)) -> Service {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, rules).expect("write rules");
    start_at(dir, path, store, adjust).await
}

pub async fn start_at(
    dir: tempfile::TempDir,
    rules: PathBuf,
    store: ServiceStore,
    adjust: impl FnOnce(&mut ServerConfig),
) -> Service {
    let mut config = ServerConfig::new(&rules, store);
    config.grace = Duration::from_secs(5);
    config.metrics_recorder = true;
    adjust(&mut config);
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let (grpc_addr, http_addr) = (grpc.local_addr().expect("addr"), http.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(config, Listeners::new(Some(grpc), Some(http)), async {
        let _ = stopped.await;
    }));
    Service { grpc: grpc_addr, http: http_addr, dir, rules, stop: Some(stop), task: Some(task) }
}

/// A service on the embedded store.
pub async fn start(rules: &str) -> Service {
    start_with(rules, ServiceStore::Memory(MemoryStore::new()), |_| {}).await
}

/// An RLS request for `domain` with descriptors of `(key, value)` entries.
pub fn rls(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .iter()
            .map(|entries| RateLimitDescriptor {
                entries: entries
                    .iter()
                    .map(|(k, v)| Entry { key: (*k).to_owned(), value: (*v).to_owned() })
                    .collect(),
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

pub async fn should_rate_limit(
    client: &mut RateLimitServiceClient<Channel>,
    request: RateLimitRequest,
) -> RateLimitResponse {
    client.should_rate_limit(request).await.expect("ShouldRateLimit").into_inner()
}

/// 1 = OK, 2 = OVER_LIMIT.
pub const OK: i32 = 1;
pub const OVER_LIMIT: i32 = 2;

/// A plain HTTP/1 client over a socket.
pub fn http_client() -> hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<bytes::Bytes>,
> {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// Sends `method path` with `body` and `headers`; returns status, headers and body text.
pub async fn http(
    method: &str,
    url: &str,
    body: impl Into<bytes::Bytes>,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, String) {
    use http_body_util::BodyExt;
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(http_body_util::Full::new(body.into())).expect("request");
    let response = http_client().request(request).await.expect("HTTP request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

pub async fn post_json(url: &str, body: &str) -> (u16, http::HeaderMap, serde_json::Value) {
    let (status, headers, text) =
        http("POST", url, body.to_owned(), &[("content-type", "application/json")]).await;
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("JSON from {url}: {e}: {text}"));
    (status, headers, json)
}

/// Polls `check` every 50 ms for up to 10 s.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}

/// `$SLIDEGATE_CHROMIUM`, or `chromium` on the PATH (scripts/test installs it).
pub fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("SLIDEGATE_CHROMIUM") {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("chromium not found: run scripts/test (it installs it with apt) or set SLIDEGATE_CHROMIUM")
    })
}
