//! The transport's floor for `scripts/bench`: an Envoy RLS v3 server on
//! the same gRPC stack as `slidegate serve` (tonic on hyper, the same
//! multi-threaded tokio runtime) that answers `OK` without looking at the
//! request. What a rate-limit service costs on this machine before it
//! decides anything. Bench-only: not a product mode, never shipped.
//!
//! `cargo run --release -p slidegate-server --example rls_floor -- 127.0.0.1:8091`

use std::net::SocketAddr;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

/// Answers every request `OK`.
struct Floor;

#[tonic::async_trait]
impl RateLimitService for Floor {
    async fn should_rate_limit(
        &self,
        _request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        Ok(Response::new(RateLimitResponse { overall_code: Code::Ok as i32, ..RateLimitResponse::default() }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address: SocketAddr = std::env::args()
        .nth(1)
        .ok_or("usage: rls_floor ADDR (e.g. 127.0.0.1:8091)")?
        .parse()
        .map_err(|e| format!("not an address: {e}"))?;
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(RateLimitServiceServer::new(Floor))
        .serve(address)
        .await?;
    Ok(())
}
