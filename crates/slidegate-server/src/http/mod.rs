//! The HTTP API (axum): `/json` (envoy ratelimit's JSON form),
//! `/v1/check` and `/v1/peek` (slidegate's own), `/v1/status`, `/v1/stats`,
//! `/v1/rules`, `/v1/gateway`, `/healthz`, `/readyz`, `/metrics`, the status page (`/`),
//! and the admin surface
//! (`POST /v1/reload`, `DELETE /v1/state`), which exists only when a token
//! is configured.

mod admin;
mod check;
mod envoy_json;
mod page;
mod status;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::de::DeserializeOwned;
use slidegate_tower::headers::Families;

use crate::Decider;
use crate::gateway::Gateway;
use crate::reload::Reloader;
use crate::request::CheckError;
use crate::status::ServiceStatus;

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

/// The router of the HTTP API.
pub(crate) fn router(state: AppState) -> Router {
    let mut router = Router::new()
        .route("/json", post(envoy_json::handle).get(envoy_json::handle))
        .route("/v1/check", post(check::check))
        .route("/v1/peek", post(check::peek))
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
