//! An axum service limited per client IP, on slidegate's embedded store —
//! no Redis needed.
//!
//! Run with: `cargo run -p example-axum-embedded`, then
//! `for i in $(seq 7); do curl -si localhost:3000/ | head -1; done`
//! (the 6th request in 10 s gets `429 Too Many Requests`), or
//! `curl -si localhost:3000/login -X POST` to meet the stricter login rule,
//! whose repeat offenders are warned, then banned for a minute.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use slidegate::{Limiter, Penalty, Rule};
use slidegate_tower::{PeerIp, RateLimitLayer};

fn app() -> Result<Router, slidegate::Error> {
    let limiter = Limiter::in_memory();
    let per_ip = Rule::new(5, Duration::from_secs(10))?.named("per-ip")?;
    let login =
        Rule::per_minute(NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN)).named("login")?.with_penalty(
            Penalty::new(Duration::from_secs(600))?.warn_after(2)?.ban_after(5, Duration::from_secs(60))?,
        )?;

    let login_route = post(|| async { "welcome\n" })
        .layer(RateLimitLayer::new(limiter.clone()).rule(login, PeerIp).message("too many login attempts"));
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/login", login_route)
        .layer(RateLimitLayer::new(limiter).rule(per_ip, PeerIp)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    // `PeerIp` reads the peer address the server records per connection.
    axum::serve(listener, app()?.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
