//! The layer entry points of `slidegate bench`: every check an HTTP
//! request through a [`RateLimitLayer`] around a service that answers
//! `200 ok`, driven by a tower `oneshot` loop in-process (no socket, no
//! router), so the run measures what the layer adds to a web service's
//! requests — header extraction, the layer's check, the quota headers and
//! the response — on the same limiter and store as `Limiter::check_n`.

use std::fmt::Write as _;

use anyhow::Context as _;
use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};

use axum::body::Body;
use http::{HeaderName, HeaderValue, StatusCode};
use slidegate::{Algorithm, Limiter, MultiDecision, Rule, Source, Store};
use slidegate_tower::headers::X_RATELIMIT_DEGRADED;
use slidegate_tower::{Global, Header, RateLimit, RateLimitLayer};
use tower::{Layer, Service, ServiceExt};

use super::plan::BenchPlan;
use crate::cli::Entry;

const USER: HeaderName = HeaderName::from_static("x-user");
const ADDRESS: HeaderName = HeaderName::from_static("x-ip");

/// Client addresses of [`Entry::LayerThreeRules`].
const ADDRESSES: u64 = 1000;

/// The app of `plan`'s entry point, or `None` for `Limiter::check_n`.
///
/// # Errors
///
/// A rule the layer refuses.
pub(super) fn app<S: Store>(limiter: &Limiter<S>, plan: &BenchPlan) -> anyhow::Result<Option<App<S>>> {
    let layer = RateLimitLayer::new(limiter.clone()).degraded_header(true);
    let user = Header::new(USER);
    let layer = match plan.entry {
        Entry::Check | Entry::Charge | Entry::Acquire | Entry::Reserve => return Ok(None),
        Entry::Layer => layer.try_rule_or(plan.rule.clone(), user, Default::default())?,
        Entry::LayerThreeRules => {
            // Counters with room to spare: they cost Redis a few buckets,
            // and the rule per user decides.
            let wide = |name: &str| {
                Rule::new(1_000_000_000, plan.rule.window())
                    .and_then(|r| r.with_algorithm(Algorithm::SLIDING_COUNTER))
                    .and_then(|r| r.named(name))
            };
            let address = Header::new(ADDRESS);
            layer
                .try_rule_or(wide("bench-global").context("global rule")?, Global, Default::default())?
                .try_rule_or(wide("bench-ip").context("address rule")?, address, Default::default())?
                .try_rule_or(plan.rule.clone(), user, Default::default())?
        }
    };
    Ok(Some(layer.layer(Ok200)))
}

/// Whether `entry`'s rules read the client address header.
pub(super) fn reads_address(entry: Entry) -> bool {
    matches!(entry, Entry::LayerThreeRules)
}

/// A layer's app: the layer around [`Ok200`].
pub(super) type App<S> = RateLimit<Ok200, S>;

/// The service behind the layer: answers `200 ok` at once.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ok200;

impl Service<http::Request<Body>> for Ok200 {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Body>) -> Self::Future {
        ready(Ok(http::Response::new(Body::from("ok"))))
    }
}

/// What one request through the layer came to.
pub(super) struct Answer {
    pub(super) allowed: bool,
    /// Answered by the failure policy (`X-RateLimit-Degraded`).
    pub(super) degraded: bool,
    /// Denied from the deny cache.
    pub(super) cached: bool,
}

/// Sends the request of key `index` (named `key`) through `app`, with a
/// client address header (in `address`) when the entry point reads one.
///
/// # Errors
///
/// A response that is neither 200 nor 429 (its status).
pub(super) async fn ask<S: Store>(
    app: &App<S>,
    key: &str,
    index: u64,
    address: Option<&mut String>,
) -> Result<Answer, String> {
    // What a server hands the layer: a parsed request (GET / by default).
    let mut request = http::Request::new(Body::empty());
    let headers = request.headers_mut();
    headers.insert(USER, HeaderValue::from_str(key).map_err(|e| e.to_string())?);
    if let Some(address) = address {
        address.clear();
        let spread = index % ADDRESSES;
        let _ = write!(address, "10.0.{}.{}", spread / 256, spread % 256);
        headers.insert(ADDRESS, HeaderValue::from_str(address).map_err(|e| e.to_string())?);
    }
    let response = match app.clone().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let allowed = match response.status() {
        StatusCode::OK => true,
        StatusCode::TOO_MANY_REQUESTS => false,
        other => return Err(format!("the layer answered {other}")),
    };
    let degraded = response.headers().contains_key(X_RATELIMIT_DEGRADED);
    let cached = response
        .extensions()
        .get::<MultiDecision>()
        .and_then(MultiDecision::binding)
        .is_some_and(|d| d.source == Source::DenyCache);
    Ok(Answer { allowed, degraded, cached })
}
