//! Tower middleware for slidegate: put a [`RateLimitLayer`] in front of an
//! axum router, a tonic server or any `tower::Service` over `http` requests.
//!
//! * Several rules per request — e.g. global, per client IP, per user —
//!   checked at once: admitted only if all admit, then all charged.
//! * Keys from a [`KeyExtractor`]: [`Global`], [`PeerIp`], [`ClientIp`]
//!   (proxy headers believed only from trusted proxies), [`Header`],
//!   [`Path`], `MatchedPath` (feature `axum`), [`FromExtension`] (e.g. the
//!   authenticated user), or any closure over the request head.
//! * Limited requests get a response, not an error: `429` with
//!   `Retry-After`, the IETF `RateLimit-Policy` / `RateLimit` headers and the
//!   legacy `X-RateLimit-*` ones; gRPC gets `RESOURCE_EXHAUSTED` with
//!   `RetryInfo` (feature `tonic`).
//!
//! ```
//! use std::net::SocketAddr;
//! use std::num::NonZeroU32;
//! use axum::{Router, body::Body, extract::ConnectInfo, http::{Request, StatusCode}, routing::get};
//! use slidegate::{Limiter, Rule};
//! use slidegate_tower::{PeerIp, RateLimitLayer};
//! use tower::ServiceExt;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let rule = Rule::per_minute(NonZeroU32::new(2).unwrap()).named("per-ip").unwrap();
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(Limiter::in_memory()).rule(rule, PeerIp));
//! // Served with `app.into_make_service_with_connect_info::<SocketAddr>()`,
//! // every request carries its peer address, which `PeerIp` keys by.
//! let request = || {
//!     let mut request = Request::get("/").body(Body::empty()).unwrap();
//!     request.extensions_mut().insert(ConnectInfo("192.0.2.1:4000".parse::<SocketAddr>().unwrap()));
//!     request
//! };
//! let first = app.clone().oneshot(request()).await.unwrap();
//! assert_eq!(first.status(), StatusCode::OK);
//! assert_eq!(first.headers()["ratelimit"], r#""per-ip";r=1;t=60"#);
//! app.clone().oneshot(request()).await.unwrap();
//! let third = app.oneshot(request()).await.unwrap();
//! assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(third.headers()["retry-after"], "60");
//! # });
//! ```
//!
//! Per-route limits: add a layer to a route (`.route("/login", post(login).layer(…))`)
//! or a nested router.

mod body_end;
mod charge;
mod client_ip;
mod config;
mod future;
pub mod headers;
mod key;
mod layer;
mod leases;
mod observe;
mod response;
mod service;
mod shape;
mod waiting;

pub use body_end::{BodyEnd, OnEnd};
pub use charge::{Cost, ResponseCost};
pub use client_ip::ForwardedHeader;
pub use config::MissingKey;
pub use future::ResponseFuture;
#[cfg(feature = "axum")]
pub use key::MatchedPath;
pub use key::{ClientIp, FromExtension, Global, Header, KeyExtractor, Path, PeerIp, peer_addr};
pub use layer::RateLimitLayer;
pub use leases::InFlight;
pub use observe::Observer;
pub use response::LimitedBody;
pub use service::{AppliedRules, LimitedKeys, RateLimit};

/// The README's Rust examples, compiled as doctests so they cannot rot
/// (here, where the core, Redis store and layer are all at hand).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of the docs pages, compiled as doctests like the README's.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryDocDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/service.md")]
pub struct ServiceDocDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/budgets.md")]
pub struct BudgetsDocDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/gateway.md")]
pub struct GatewayDocDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/operations.md")]
pub struct OperationsDocDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/cli.md")]
pub struct CliDocDoctests;
