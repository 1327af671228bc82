//! One service with every edge: RLS over gRPC, the HTTP API and the
//! gateway, in-process on port 0. Included by the tests that compare the
//! edges (`#[path = "support/edges.rs"] mod edges;`, beside `mod support;`);
//! each uses part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::HeaderMap;
use serde_json::Value;
use slidegate_server::{Listeners, ServeError, ServerConfig, ServiceStore, serve};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::support;

/// A running service; dropping it stops it.
pub(crate) struct Edges {
    grpc: SocketAddr,
    api: SocketAddr,
    proxy: SocketAddr,
    /// Where its rules and gateway files are.
    pub(crate) dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Drop for Edges {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Edges {
    /// Starts a service of `rules` and the gateway file `gateway` on
    /// `store`, with its metrics recorder, configured by `adjust`.
    pub(crate) async fn start(
        store: ServiceStore,
        rules: &str,
        gateway: &str,
        adjust: impl FnOnce(&mut ServerConfig),
    ) -> Edges {
        let dir = tempfile::tempdir().expect("temp dir");
        let (rules_file, gateway_file) = (dir.path().join("rules.yaml"), dir.path().join("gateway.yaml"));
        support::write(&rules_file, rules);
        support::write(&gateway_file, gateway);
        let mut config = ServerConfig::new(&rules_file, store);
        config.gateway = Some(gateway_file);
        config.grace = Duration::from_secs(2);
        config.metrics_recorder = true;
        adjust(&mut config);
        let bind = async || TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (grpc, http, proxy) = (bind().await, bind().await, bind().await);
        let addrs = [&grpc, &http, &proxy].map(|l| l.local_addr().expect("addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let listeners = Listeners::new(Some(grpc), Some(http)).with_gateway(proxy);
        let task = tokio::spawn(serve(config, listeners, async move {
            let _ = stopped.await;
        }));
        let edges =
            Edges { grpc: addrs[0], api: addrs[1], proxy: addrs[2], dir, stop: Some(stop), task: Some(task) };
        support::eventually("the service answers", async || {
            support::http_client().get(edges.url("/healthz").parse().expect("uri")).await.is_ok()
        })
        .await;
        edges
    }

    /// The HTTP API's URL of `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.api)
    }

    /// The gateway's URL of `path`.
    pub(crate) fn gateway_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.proxy)
    }

    /// `GET path` through the gateway: status, headers, body.
    pub(crate) async fn gateway_get(&self, path: &str) -> (u16, HeaderMap, String) {
        support::http("GET", &format!("http://{}{path}", self.proxy), "", &[]).await
    }

    /// `POST /v1/check` with `body`: status, headers and the JSON answer.
    pub(crate) async fn check(&self, body: &str) -> (u16, HeaderMap, Value) {
        let (status, headers, text) =
            support::http("POST", &self.url("/v1/check"), body.to_owned(), &[]).await;
        (status, headers, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// One RLS call.
    pub(crate) async fn rls(&self, request: RateLimitRequest) -> Result<RateLimitResponse, tonic::Status> {
        let mut client =
            RateLimitServiceClient::connect(format!("http://{}", self.grpc)).await.expect("gRPC");
        client.should_rate_limit(request).await.map(tonic::Response::into_inner)
    }

    /// The sum of the `/metrics` samples of `name` with every label of `labels`.
    pub(crate) async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let (status, _, text) = support::http("GET", &self.url("/metrics"), "", &[]).await;
        assert_eq!(status, 200, "{text}");
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        text.lines()
            .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')))
            .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }
}
