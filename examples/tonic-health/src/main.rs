//! A tonic gRPC server (the standard health service) limited to 3 calls per
//! second per client address; a client in the same process calls it 5
//! times, and the last two answers are `RESOURCE_EXHAUSTED` with a
//! `google.rpc.RetryInfo` saying when to retry. Runs to completion.
//!
//! Run with: `cargo run -p example-tonic-health`

use std::num::NonZeroU32;

use slidegate::{Limiter, Rule};
use slidegate_tower::{PeerIp, RateLimitLayer};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let rule = Rule::per_second(NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN)).named("grpc-per-peer")?;
    let layer = RateLimitLayer::new(Limiter::in_memory()).rule(rule, PeerIp).grpc().message("slow down");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let server = tonic::transport::Server::builder()
        .layer(layer)
        .add_service(health)
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);

    let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))?.connect().await?;
    let mut client = HealthClient::new(channel);
    for call in 1..=5 {
        match client.check(HealthCheckRequest { service: String::new() }).await {
            Ok(reply) => println!("call {call}: {:?}", reply.into_inner().status()),
            Err(status) => {
                let retry = status.get_details_retry_info().and_then(|r| r.retry_delay);
                println!("call {call}: {:?} ({}), retry after {retry:?}", status.code(), status.message());
            }
        }
    }
    Ok(())
}
