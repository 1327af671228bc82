//! `POST /v1/check`, `POST /v1/peek` and `POST /v1/charge`: slidegate's
//! own JSON API, for services that are not behind Envoy. A charge records
//! each weight whatever remains (every limit as a budget; the identity may
//! go into debt, each limit's `debt`) and answers 200 either way.
//!
//! ```json
//! {"domain": "api", "hits_addend": 1,
//!  "descriptors": [{"entries": [{"key": "user", "value": "alice"}]}]}
//! ```
//!
//! The answer says `allowed` and, per descriptor, the binding limit, what
//! it leaves, when to retry, when it resets and how it decided; 200 or 429
//! with the headers `slidegate-tower` writes, 400 naming a bad field.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use slidegate_tower::headers::Families;

use super::json::JsonEntry;
use super::{AppState, bad_request, json_answer, parse_body};
use crate::api::rls::headers_of;
use crate::config::Limit;
use crate::decide::Decider;
use crate::decide::request::{
    CheckAnswer, CheckError, CheckRequest, Code, DescriptorStatus, LimitStatus, Mode, RequestDescriptor,
};
use crate::decide::stats::Edge;
use crate::runtime::telemetry::{Api, observe};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckBody {
    domain: String,
    descriptors: Vec<CheckDescriptor>,
    #[serde(default)]
    hits_addend: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckDescriptor {
    entries: Vec<JsonEntry>,
    #[serde(default)]
    hits_addend: Option<u64>,
}

/// A `/v1/check` body as a request.
pub(super) fn parse_check(body: &[u8]) -> Result<CheckRequest, String> {
    let request: CheckBody = parse_body(body)?;
    Ok(CheckRequest {
        domain: request.domain,
        descriptors: request
            .descriptors
            .into_iter()
            .map(|d| RequestDescriptor {
                entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
                hits_addend: d.hits_addend,
                limit: None,
            })
            .collect(),
        hits_addend: request.hits_addend.unwrap_or(0),
    })
}

/// `POST /v1/check` through the router (the service answers it before
/// the router: [`Api`](super::Api)).
pub(super) async fn check(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app.decider, app.families, &body, Mode::Charge).await
}

/// `POST /v1/peek`: the same answer, nothing charged.
pub(super) async fn peek(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app.decider, app.families, &body, Mode::Peek).await
}

/// `POST /v1/charge`: each weight recorded whatever remains.
pub(super) async fn charge(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app.decider, app.families, &body, Mode::Record).await
}

/// The answer to a `/v1/check` (or, with [`Mode::Peek`], `/v1/peek`) body.
pub(super) async fn answer(decider: &Decider, families: Families, body: &[u8], mode: Mode) -> Response {
    let started = Instant::now();
    let api = match mode {
        Mode::Charge => Api::Check,
        Mode::Peek => Api::Peek,
        Mode::Record => Api::Charge,
    };
    let check = match parse_check(body) {
        Ok(check) => check,
        Err(message) => {
            observe(api, &Err(CheckError::Invalid(message.clone())), started);
            return bad_request(message);
        }
    };
    let outcome = decider.check(&check, mode).await;
    observe(api, &outcome, started);
    decider.stats().answered(Edge::Http, &outcome);
    match outcome {
        Ok(answer) => {
            // A charge landed whatever it answers: `allowed` says whether
            // the limits had room before it.
            let status = if answer.code == Code::Ok || mode == Mode::Record {
                StatusCode::OK
            } else {
                StatusCode::TOO_MANY_REQUESTS
            };
            // About 200 bytes per descriptor and 250 per limit.
            let capacity = 64 + answer.statuses.iter().map(|s| 200 + 250 * s.limits.len()).sum::<usize>();
            json_answer(status, headers_of(&answer, families), &view(&answer), capacity)
        }
        Err(error) => super::check_error(&error),
    }
}

#[derive(Debug, Serialize)]
struct AnswerView<'a> {
    allowed: bool,
    degraded: bool,
    descriptors: Vec<DescriptorView<'a>>,
}

#[derive(Debug, Serialize)]
struct DescriptorView<'a> {
    allowed: bool,
    limit: Option<LimitRef<'a>>,
    remaining: Option<u32>,
    retry_after_ms: u64,
    reset_after_ms: u64,
    state: Option<&'static str>,
    shadow_over_limit: bool,
    limits: Vec<LimitView<'a>>,
}

#[derive(Debug, Serialize)]
struct LimitRef<'a> {
    name: Option<&'a str>,
    /// The stats key: the descriptor path the limit is configured at.
    descriptor: &'a str,
    requests_per_unit: u32,
    window_ms: u64,
    unit: Option<&'static str>,
    algorithm: &'static str,
    shadow_mode: bool,
    budget: bool,
}

#[derive(Debug, Serialize)]
pub(super) struct LimitView<'a> {
    #[serde(flatten)]
    limit: LimitRef<'a>,
    allowed: bool,
    state: &'static str,
    remaining: u32,
    retry_after_ms: u64,
    reset_after_ms: u64,
    /// How far over the limit a budget's charge left it.
    debt: u32,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn state_name(state: slidegate::State) -> &'static str {
    match state {
        slidegate::State::Allowed => "allowed",
        slidegate::State::Warned => "warned",
        slidegate::State::Limited => "limited",
        slidegate::State::Banned => "banned",
        slidegate::State::Degraded => "degraded",
        slidegate::State::Disabled => "disabled",
        _ => "unknown",
    }
}

fn limit_ref(limit: &Limit) -> LimitRef<'_> {
    LimitRef {
        name: limit.name.as_deref(),
        descriptor: &limit.stat_key,
        requests_per_unit: limit.requests_per_unit(),
        window_ms: ms(limit.window()),
        unit: limit.unit.map(crate::config::Unit::name),
        algorithm: match &limit.enforcement {
            crate::config::Enforcement::Rule(rule) => rule.algorithm().short_name(),
            crate::config::Enforcement::Block(_) => "block",
            crate::config::Enforcement::Unlimited => "unlimited",
            crate::config::Enforcement::InFlight(_) => "in_flight",
        },
        shadow_mode: limit.shadow,
        budget: limit.rule().is_some_and(slidegate::Rule::is_budget),
    }
}

pub(super) fn limit_view(status: &LimitStatus) -> LimitView<'_> {
    LimitView {
        limit: limit_ref(&status.limit),
        allowed: status.allowed,
        state: state_name(status.state),
        remaining: status.remaining,
        retry_after_ms: ms(status.retry_after),
        reset_after_ms: ms(status.reset_after),
        debt: status.debt,
    }
}

fn descriptor_view(status: &DescriptorStatus) -> DescriptorView<'_> {
    DescriptorView {
        allowed: status.code == Code::Ok,
        limit: status.limit.as_deref().map(limit_ref),
        remaining: status.limit.as_ref().map(|_| status.remaining),
        retry_after_ms: ms(status.retry_after),
        reset_after_ms: ms(status.reset_after),
        state: status.state.map(state_name),
        shadow_over_limit: status.shadow_over_limit,
        limits: status.limits.iter().map(limit_view).collect(),
    }
}

fn view(answer: &CheckAnswer) -> AnswerView<'_> {
    AnswerView {
        allowed: answer.code == Code::Ok,
        degraded: answer.degraded,
        descriptors: answer.statuses.iter().map(descriptor_view).collect(),
    }
}
