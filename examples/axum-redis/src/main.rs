//! An axum service whose limits every instance shares through Redis: a
//! global limit, one per client IP (`X-Forwarded-For` believed only from
//! 10.0.0.0/8), and one per authenticated user (the `User` an
//! authentication middleware puts in the request; skipped for anonymous
//! requests). A request is admitted only if all three admit.
//!
//! Run with: `REDIS_URL=redis://127.0.0.1:6380/ cargo run -p example-axum-redis`
//! (any `redis://`, `redis+cluster://…` or `redis+sentinel://…` URL), then
//! `curl -si -H 'authorization: Bearer alice-token' localhost:3000/`. If Redis goes away,
//! each instance keeps limiting on its own (the default fallback policy) and
//! says so in `X-RateLimit-Degraded: 1`.

use std::net::SocketAddr;
use std::num::NonZeroU32;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use slidegate::{Limiter, Rule};
use slidegate_redis::RedisStore;
use slidegate_tower::{ClientIp, FromExtension, Global, MissingKey, RateLimitLayer};

/// The authenticated caller, as an authentication middleware records it.
#[derive(Clone)]
struct User {
    name: &'static str,
}

/// A stand-in for real authentication: a bearer token of a known user puts
/// that `User` in the request; anything else stays anonymous.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let token = request.headers().get("authorization").and_then(|v| v.to_str().ok());
    let user = match token {
        Some("Bearer alice-token") => Some(User { name: "alice" }),
        Some("Bearer bob-token") => Some(User { name: "bob" }),
        _ => None,
    };
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

fn per_minute(n: u32, name: &str) -> Result<Rule, slidegate::Error> {
    Rule::per_minute(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)).named(name)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url =
        std::env::var("REDIS_URL").map_err(|_| "set REDIS_URL, e.g. REDIS_URL=redis://127.0.0.1:6380/")?;
    let limiter = Limiter::new(RedisStore::builder(url).prefix("example:").connect().await?);
    let client_ip = ClientIp::trusting(["10.0.0.0/8"])?;
    let layer = RateLimitLayer::new(limiter)
        .rule(per_minute(1000, "global")?, Global)
        .rule(per_minute(60, "per-ip")?, client_ip)
        .rule_or(
            per_minute(100, "per-user")?,
            FromExtension::new(|user: &User| user.name.to_owned()),
            MissingKey::Skip,
        )
        .degraded_header(true);
    // The last layer added runs first: authentication, then the limits.
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer)
        .layer(middleware::from_fn(authenticate));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
