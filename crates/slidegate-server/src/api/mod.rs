//! The HTTP API (axum, with the checks answered before its router:
//! [`Api`]): `/json` (envoy ratelimit's JSON form),
//! `/v1/check`, `/v1/peek` and `/v1/charge` (slidegate's own), reservations
//! (`/v1/reserve`, `/v1/commit`, `/v1/cancel`) and leases (`/v1/acquire`,
//! `/v1/release`, `/v1/renew`), `/v1/status`, `/v1/stats`,
//! `/v1/rules`, `/v1/gateway`, `/healthz`, `/readyz`, `/metrics`, the status page (`/`),
//! and the admin surface
//! (`POST /v1/reload`, `DELETE /v1/state`), which exists only when a token
//! is configured.

mod admin;
#[cfg(test)]
mod bypass_twin;
mod check;
mod hold;
mod json;
mod page;
pub(crate) mod rls;
mod status;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::de::DeserializeOwned;
use slidegate_tower::headers::Families;
use tower_service::Service as _;

use crate::decide::Decider;
use crate::decide::request::{CheckError, Mode};
use crate::gateway::Gateway;
use crate::runtime::reload::Reloader;
use crate::runtime::status::ServiceStatus;

/// The largest request body (64 KiB): a rate-limit request is a few
/// hundred bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) decider: Decider,
    pub(crate) families: Families,
    pub(crate) status: Arc<ServiceStatus>,
    pub(crate) reloader: Reloader,
    pub(crate) metrics: Option<PrometheusHandle>,
    /// The admin token; no admin routes without one.
    pub(crate) admin_token: Option<Arc<str>>,
    pub(crate) store_kind: &'static str,
    /// The gateway, when the service is one (its routes on the status page).
    pub(crate) gateway: Option<Gateway>,
    /// The Redis servers' memory and keys, read at most every few seconds.
    pub(crate) server_stats: Arc<status::ServerStatsCache>,
}

/// The HTTP API's service. `POST /v1/check`, `/v1/peek` and `/json`, the
/// requests a busy service answers most, are answered here directly — no
/// route lookup, extractors, boxed handler futures or copy of the
/// handlers' state per request: about a sixth of the CPU an answer took
/// over HTTP/1.1. Every other request (those paths with another method
/// too: 405) goes to the router.
///
/// Every request body is read whole before it is answered, and must
/// arrive within `body_timeout` (a client that stops sending is answered
/// 408 and closed); a body declared larger than [`MAX_BODY_BYTES`] is
/// answered 413 before any of it is read.
#[derive(Clone)]
pub(crate) struct Api {
    router: Router,
    checks: Arc<Checks>,
}

/// What the direct answers need.
struct Checks {
    decider: Decider,
    families: Families,
    body_timeout: Duration,
}

impl Api {
    pub(crate) fn new(state: AppState, body_timeout: Duration) -> Api {
        let checks =
            Arc::new(Checks { decider: state.decider.clone(), families: state.families, body_timeout });
        Api { router: router(state), checks }
    }

    /// Answers a [`Direct`] request without the router.
    fn answer<B>(&self, direct: Direct, request: Request<B>) -> ApiFuture
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let checks = Arc::clone(&self.checks);
        Box::pin(async move {
            let body = match read_body(request.into_body(), checks.body_timeout).await {
                Ok(body) => body,
                Err(answer) => return Ok(answer),
            };
            let (decider, families) = (&checks.decider, checks.families);
            let answer = match direct {
                Direct::Check(mode) => check::answer(decider, families, &body, mode).await,
                Direct::EnvoyJson => json::answer(decider, families, &body).await,
            };
            Ok(with_length(answer))
        })
    }

    /// Passes `request` to the router, its body read first, so that the
    /// handlers get a body that is all there (the time bound is this
    /// service's).
    fn route<B>(&mut self, request: Request<B>) -> ApiFuture
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if request.body().is_end_stream() {
            return Box::pin(self.router.call(request));
        }
        let mut router = self.router.clone();
        let timeout = self.checks.body_timeout;
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            match read_body(body, timeout).await {
                Ok(body) => router.call(Request::from_parts(parts, Body::from(body))).await,
                Err(answer) => Ok(answer),
            }
        })
    }
}

/// The requests [`Api`] answers itself.
#[derive(Clone, Copy)]
enum Direct {
    /// `POST /v1/check`, `/v1/peek` (nothing charged) or `/v1/charge`
    /// (recorded whatever remains).
    Check(Mode),
    /// `POST /json`, envoy ratelimit's JSON form.
    EnvoyJson,
}

type ApiFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<B> tower_service::Service<Request<B>> for Api
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> ApiFuture {
        if let Some(refused) = declared_too_large(&request) {
            return refused;
        }
        match (request.uri().path(), request.method() == Method::POST) {
            ("/v1/check", true) => self.answer(Direct::Check(Mode::Charge), request),
            ("/v1/peek", true) => self.answer(Direct::Check(Mode::Peek), request),
            ("/v1/charge", true) => self.answer(Direct::Check(Mode::Record), request),
            ("/json", true) => self.answer(Direct::EnvoyJson, request),
            _ => self.route(request),
        }
    }
}

/// The answer to a request whose body is declared larger than
/// [`MAX_BODY_BYTES`] (hyper's body knows its `Content-Length`: nothing
/// to parse again), before any of it is read.
fn declared_too_large<B: http_body::Body>(request: &Request<B>) -> Option<ApiFuture> {
    let declared = request.body().size_hint().lower();
    (declared > MAX_BODY_BYTES as u64).then(|| -> ApiFuture { Box::pin(async { Ok(too_large()) }) })
}

/// Reads a request body whole: at most [`MAX_BODY_BYTES`], within `timeout`.
///
/// # Errors
///
/// The answer instead: 413 past the size, 408 when it stalls (the
/// connection is closed: the rest of the body would be read as the next
/// request), 400 when it breaks off.
async fn read_body<B>(body: B, timeout: Duration) -> Result<bytes::Bytes, Response>
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut collect = std::pin::pin!(Limited::new(body, MAX_BODY_BYTES).collect());
    // A check's body has usually come with its head: read at once, without
    // a timer (one costs a clock read and the runtime's handle).
    let first = std::future::poll_fn(|cx| Poll::Ready(collect.as_mut().poll(cx))).await;
    let collected = match first {
        Poll::Ready(collected) => Ok(collected),
        Poll::Pending => tokio::time::timeout(timeout, collect).await,
    };
    match collected {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(too_large()),
        Ok(Err(error)) => {
            Err((StatusCode::BAD_REQUEST, format!("Failed to buffer the request body: {error}"))
                .into_response())
        }
        Err(_) => {
            let mut answer = error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {timeout:?}"),
            );
            answer.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
            Err(answer)
        }
    }
}

/// `answer` with its `content-length`, as the router sets it on its
/// handlers' answers: the same headers in the same order (hyper would
/// write a missing one after those it adds, such as `connection: close`).
fn with_length(mut answer: Response) -> Response {
    if let Some(length) = http_body::Body::size_hint(answer.body()).exact()
        && !answer.headers().contains_key(axum::http::header::CONTENT_LENGTH)
    {
        answer.headers_mut().insert(axum::http::header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    answer
}

/// 413, as axum's `Bytes` extractor words it; the connection is closed
/// (the body left unread would be read as the next request).
fn too_large() -> Response {
    let mut answer =
        (StatusCode::PAYLOAD_TOO_LARGE, "Failed to buffer the request body: length limit exceeded")
            .into_response();
    answer.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
    answer
}

/// A JSON answer: `value` written once into a body of `capacity` bytes
/// (enough for it, so that it is not copied as it grows), after `headers`.
fn json_answer(
    status: StatusCode,
    mut headers: HeaderMap,
    value: &impl serde::Serialize,
    capacity: usize,
) -> Response {
    let mut body = Vec::with_capacity(capacity);
    if let Err(e) = serde_json::to_writer(&mut body, value) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, format!("the answer cannot be written: {e}"));
    }
    headers.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// The router of the HTTP API, complete on its own: it answers the
/// checks' other methods (405, with `Allow`). Their `POST`s never reach it
/// in service ([`Api`] answers them first); its handlers for them are the
/// general path the bypass is tested against, byte for byte
/// (`bypass_twin`).
fn router(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/json", post(json::handle).get(json::handle))
        .route("/v1/check", post(check::check))
        .route("/v1/peek", post(check::peek))
        .route("/v1/charge", post(check::charge))
        .route("/v1/reserve", post(hold::reserve))
        .route("/v1/commit", post(hold::commit))
        .route("/v1/cancel", post(hold::cancel))
        .route("/v1/acquire", post(hold::acquire))
        .route("/v1/release", post(hold::release))
        .route("/v1/renew", post(hold::renew))
        .route("/v1/status", get(status::status))
        .route("/v1/rules", get(status::rules))
        .route("/v1/stats", get(status::stats))
        .route("/v1/gateway", get(status::gateway))
        .route("/healthz", get(status::healthz))
        .route("/readyz", get(status::readyz))
        .route("/metrics", get(status::metrics))
        .route("/", get(page::index))
        .route("/ui/page.js", get(page::script))
        .route("/ui/page.css", get(page::style));
    if state.admin_token.is_some() {
        router = router.route("/v1/reload", post(admin::reload)).route("/v1/state", delete(admin::reset));
    }
    router.layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

/// A JSON error body with `status`.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message.into() }))).into_response()
}

pub(crate) fn bad_request(message: impl Into<String>) -> Response {
    error(StatusCode::BAD_REQUEST, message)
}

pub(crate) fn check_error(error: &CheckError) -> Response {
    match error {
        CheckError::Invalid(message) => bad_request(message.clone()),
        CheckError::Unavailable(message) => error_unavailable(message),
    }
}

fn error_unavailable(message: &str) -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, message)
}

/// Parses a JSON body, naming what is wrong.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    if let Err(e) = std::str::from_utf8(body) {
        return Err(format!("the body is not UTF-8 (byte {} is invalid)", e.valid_up_to()));
    }
    // The plain parser first: tracking the path costs a fifth of a check's
    // time, and only a bad body needs it, for its message.
    if let Ok(parsed) = serde_json::from_slice(body) {
        return Ok(parsed);
    }
    parse_tracked(body)
}

/// [`parse_body`] tracking the path to what is wrong: the general path,
/// which the plain parser before it must agree with.
fn parse_tracked<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let mut json = serde_json::Deserializer::from_slice(body);
    let parsed: T = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            format!("bad JSON: {inner}")
        } else {
            format!("bad JSON at `{path}`: {inner}")
        }
    })?;
    json.end().map_err(|e| format!("bad JSON: {e}"))?;
    Ok(parsed)
}
