//! Reservations and leases over HTTP: `POST /v1/reserve`, `/v1/commit`,
//! `/v1/cancel` (an estimate held against a rate limit or budget, settled
//! at the real cost) and `POST /v1/acquire`, `/v1/release`, `/v1/renew`
//! (a lease of a `max_in_flight` limit). Each names one descriptor:
//!
//! ```json
//! {"domain": "llm", "descriptors": [{"entries": [{"key": "tenant", "value": "acme"}]}],
//!  "estimate": 800, "ttl_ms": 30000}
//! ```
//!
//! A reservation or lease taken answers 200 with its `id` (32 hex
//! digits, to settle or give it back), one refused 429 with `id: null`;
//! settling or giving back one that is not held (settled already, its ttl
//! passed, or never taken) answers 404. 400 names a bad field.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use slidegate::{Decision, LeaseId};

use super::check::{LimitView, limit_view};
use super::json::JsonEntry;
use super::{AppState, bad_request, check_error, json_answer, parse_body};
use crate::decide::hold::{Held, Taken};
use crate::decide::request::{CheckRequest, LimitStatus, RequestDescriptor};

/// A reservation's ttl when the body gives none.
const DEFAULT_TTL_MS: u64 = 60_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldBody {
    domain: String,
    descriptors: Vec<HoldDescriptor>,
    /// `/v1/reserve`: the estimate (1 to the limit).
    #[serde(default)]
    estimate: Option<u32>,
    /// `/v1/reserve`: how long it is held unsettled.
    #[serde(default)]
    ttl_ms: Option<u64>,
    /// `/v1/commit`, `/v1/cancel`, `/v1/release`, `/v1/renew`.
    #[serde(default)]
    id: Option<String>,
    /// `/v1/commit`: the real cost.
    #[serde(default)]
    actual: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldDescriptor {
    entries: Vec<JsonEntry>,
}

/// What each endpoint reads of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Reserve,
    Commit,
    Cancel,
    Acquire,
    Release,
    Renew,
}

impl Call {
    fn path(self) -> &'static str {
        match self {
            Call::Reserve => "/v1/reserve",
            Call::Commit => "/v1/commit",
            Call::Cancel => "/v1/cancel",
            Call::Acquire => "/v1/acquire",
            Call::Release => "/v1/release",
            Call::Renew => "/v1/renew",
        }
    }
}

/// A parsed body: the request, and the fields its call reads.
struct Parsed {
    request: CheckRequest,
    body: HoldBody,
    id: Option<LeaseId>,
}

fn parse(body: &[u8], call: Call) -> Result<Parsed, String> {
    let mut body: HoldBody = parse_body(body)?;
    let path = call.path();
    let takes = |field: &str| match field {
        "estimate" | "ttl_ms" => call == Call::Reserve,
        "actual" => call == Call::Commit,
        _ => matches!(call, Call::Commit | Call::Cancel | Call::Release | Call::Renew),
    };
    let given = [
        ("estimate", body.estimate.is_some()),
        ("ttl_ms", body.ttl_ms.is_some()),
        ("actual", body.actual.is_some()),
        ("id", body.id.is_some()),
    ];
    for (field, is_given) in given {
        if is_given && !takes(field) {
            return Err(format!("`{field}` is not a field of {path}"));
        }
    }
    if call == Call::Reserve && body.estimate.is_none() {
        return Err(format!("{path} needs an `estimate` (1 to the limit)"));
    }
    if call == Call::Commit && body.actual.is_none() {
        return Err(format!("{path} needs the real cost, `actual` (0 gives it all back)"));
    }
    let id = match body.id.take() {
        Some(id) => Some(LeaseId::parse(&id).map_err(|e| format!("`id`: {e}"))?),
        None if takes("id") => return Err(format!("{path} needs the `id` it was given")),
        None => None,
    };
    let descriptors = std::mem::take(&mut body.descriptors);
    let request = CheckRequest {
        domain: std::mem::take(&mut body.domain),
        descriptors: descriptors
            .into_iter()
            .map(|d| RequestDescriptor {
                entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
                hits_addend: None,
                limit: None,
            })
            .collect(),
        hits_addend: 0,
    };
    Ok(Parsed { request, body, id })
}

#[derive(Debug, Serialize)]
struct TakenView<'a> {
    allowed: bool,
    /// The reservation's or lease's id: null when refused, or admitted
    /// without one (the store failed, or shadow mode).
    id: Option<&'a str>,
    limit: LimitView<'a>,
}

#[derive(Debug, Serialize)]
struct SettledView<'a> {
    held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<LimitView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

fn status_of(held: &Held, decision: &Decision) -> LimitStatus {
    LimitStatus {
        limit: std::sync::Arc::clone(&held.limit),
        allowed: decision.allowed,
        state: decision.state,
        remaining: decision.remaining,
        retry_after: decision.retry_after,
        reset_after: decision.reset_after,
        violations: 0,
        debt: decision.debt,
        source: decision.source,
    }
}

/// 200 with the id, or 429 (with `Retry-After`) without one.
fn taken(taken: &Taken) -> Response {
    let status = status_of(&taken.held, &taken.decision);
    let view = TakenView {
        allowed: taken.decision.allowed,
        id: taken.id.as_ref().map(LeaseId::as_str),
        limit: limit_view(&status),
    };
    let mut headers = HeaderMap::new();
    let code = if taken.decision.allowed {
        StatusCode::OK
    } else {
        let seconds = taken.decision.retry_after.as_millis().div_ceil(1000);
        headers.insert(
            axum::http::header::RETRY_AFTER,
            HeaderValue::from(u64::try_from(seconds).unwrap_or(u64::MAX)),
        );
        StatusCode::TOO_MANY_REQUESTS
    };
    json_answer(code, headers, &view, 512)
}

/// 200 when it was held (with the limit's state after, if known), else 404.
fn settled(held: Option<&Held>, decision: Option<&Decision>, was_held: bool) -> Response {
    let status = held.zip(decision).map(|(held, decision)| status_of(held, decision));
    let view = SettledView {
        held: was_held,
        limit: status.as_ref().map(limit_view),
        error: (!was_held)
            .then_some("not held: settled or given back already, its ttl passed, or never taken"),
    };
    let code = if was_held { StatusCode::OK } else { StatusCode::NOT_FOUND };
    json_answer(code, HeaderMap::new(), &view, 512)
}

async fn answer(app: &AppState, body: &[u8], call: Call) -> Response {
    let parsed = match parse(body, call) {
        Ok(parsed) => parsed,
        Err(message) => return bad_request(message),
    };
    let decider = &app.decider;
    let (request, id) = (&parsed.request, parsed.id.as_ref());
    let outcome = match (call, id) {
        (Call::Reserve, _) => {
            let estimate = parsed.body.estimate.unwrap_or(0);
            let ttl = Duration::from_millis(parsed.body.ttl_ms.unwrap_or(DEFAULT_TTL_MS));
            decider.reserve(request, estimate, ttl).await.map(|t| taken(&t))
        }
        (Call::Acquire, _) => decider.acquire(request).await.map(|t| taken(&t)),
        (Call::Commit | Call::Cancel, Some(id)) => {
            let actual = parsed.body.actual.unwrap_or(0);
            decider
                .settle(request, id, actual)
                .await
                .map(|(held, after)| settled(Some(&held), after.as_ref(), after.is_some()))
        }
        (Call::Release | Call::Renew, Some(id)) => {
            decider.release(request, id, call == Call::Renew).await.map(|was| settled(None, None, was))
        }
        // `parse` asks these calls for an id.
        (_, None) => return bad_request(format!("{} needs the `id` it was given", call.path())),
    };
    outcome.unwrap_or_else(|error| check_error(&error))
}

/// `POST /v1/reserve`.
pub(super) async fn reserve(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app, &body, Call::Reserve).await
}

/// `POST /v1/commit`.
pub(super) async fn commit(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app, &body, Call::Commit).await
}

/// `POST /v1/cancel`.
pub(super) async fn cancel(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app, &body, Call::Cancel).await
}

/// `POST /v1/acquire`.
pub(super) async fn acquire(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app, &body, Call::Acquire).await
}

/// `POST /v1/release`.
pub(super) async fn release(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app, &body, Call::Release).await
}

/// `POST /v1/renew`.
pub(super) async fn renew(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app, &body, Call::Renew).await
}
