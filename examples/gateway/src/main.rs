//! The gateway in-process — the same `serve` that `slidegate serve
//! --gateway` runs — in front of two small backends, with the routes in
//! `examples/gateway/gateway.yaml`.
//!
//! Run with `cargo run -p example-gateway`, then:
//!
//! ```text
//! curl -i localhost:8000/                      # round robin: backend 1, backend 2, …
//! curl -i localhost:8000/api/items -H 'x-api-key: k1'
//! for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code}\n' -X POST localhost:8000/login; done
//! open http://localhost:8080/                  # the status page
//! ```
//!
//! `cargo run -p example-gateway -- backends` runs only the backends (on
//! 127.0.0.1:9001 and :9002), for `slidegate serve --gateway
//! examples/gateway/gateway.yaml`.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Uri};
use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (n, port) in [(1, 9001), (2, 9002)] {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        tokio::spawn(backend(n, listener));
    }
    println!("backends on http://127.0.0.1:9001 and http://127.0.0.1:9002");
    if std::env::args().nth(1).as_deref() == Some("backends") {
        let _ = tokio::signal::ctrl_c().await;
        return Ok(());
    }
    let routes = concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.yaml");
    let config = ServerConfig::for_gateway(routes, ServiceStore::Memory(MemoryStore::new()));
    let listeners = Listeners::new(None, Some(TcpListener::bind("127.0.0.1:8080").await?))
        .with_gateway(TcpListener::bind("127.0.0.1:8000").await?);
    println!("gateway on http://127.0.0.1:8000, status page on http://127.0.0.1:8080/");
    serve(config, listeners, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

/// A backend that says which one it is, what it was asked and who asked
/// (as the gateway forwarded it).
async fn backend(n: u32, listener: TcpListener) {
    let app = Router::new().fallback(
        move |uri: Uri, headers: HeaderMap, ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
            let forwarded = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()).unwrap_or("-");
            format!("backend {n}: {uri} from {peer} for {forwarded}\n")
        },
    );
    let _ = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await;
}
