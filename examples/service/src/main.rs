//! The rate-limit service in-process: the same `serve` the `slidegate
//! serve` command runs, on the embedded store, with the rules in
//! `examples/service/rules.yaml`.
//!
//! Run with `cargo run -p example-service`, then:
//!
//! ```text
//! curl -s localhost:8080/v1/check \
//!   -d '{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}'
//! ```

use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/rules.yaml");
    let config = ServerConfig::new(rules, ServiceStore::Memory(MemoryStore::new()));
    let listeners = Listeners::new(
        Some(TcpListener::bind("127.0.0.1:8081").await?),
        Some(TcpListener::bind("127.0.0.1:8080").await?),
    );
    println!("Envoy RLS v3 on 127.0.0.1:8081, HTTP API on http://127.0.0.1:8080");
    serve(config, listeners, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
