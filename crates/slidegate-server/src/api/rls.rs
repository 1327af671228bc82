//! Envoy's rate-limit service, v3: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`.
//!
//! One status per request descriptor, in order, with the limit that binds
//! it, what it leaves and when it resets, so Envoy can build its own
//! `X-RateLimit-*` headers and `Retry-After`; with `--headers`, the answer
//! also carries the quota headers the tower layer writes.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus, RateLimit as PbLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use slidegate::{MultiDecision, Rule};
use slidegate_tower::headers::{Families, for_each_quota_header, quota_headers};
use tonic::{Request, Response, Status};

use crate::config::Unit;
use crate::decide::Decider;
use crate::decide::request::{
    CheckAnswer, CheckError, CheckRequest, Code, LimitOverride, Mode, RequestDescriptor,
};
use crate::decide::stats::Edge;
use crate::runtime::telemetry::{Api, observe};

/// The gRPC service: a [`Decider`] behind Envoy's protocol.
#[derive(Debug, Clone)]
pub(crate) struct Rls {
    decider: Decider,
    families: Families,
}

impl Rls {
    /// Answers with `decider`; `families` are the quota headers added to
    /// every answer (none: Envoy builds its own from the statuses).
    pub(crate) fn new(decider: Decider, families: Families) -> Rls {
        Rls { decider, families }
    }
}

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let started = Instant::now();
        let outcome = match from_pb(request.into_inner()) {
            Ok(check) => self.decider.check(&check, Mode::Charge).await,
            Err(error) => Err(error),
        };
        observe(Api::Rls, &outcome, started);
        self.decider.stats().answered(Edge::Rls, &outcome);
        match outcome {
            Ok(answer) => Ok(Response::new(to_pb(&answer, self.families))),
            Err(CheckError::Invalid(message)) => Err(Status::invalid_argument(message)),
            Err(CheckError::Unavailable(message)) => Err(Status::unavailable(message)),
        }
    }
}

/// The request an RLS message makes.
///
/// # Errors
///
/// [`CheckError::Invalid`] for what slidegate cannot honour: negative hits,
/// a limit override with an unknown unit.
pub(crate) fn from_pb(request: RateLimitRequest) -> Result<CheckRequest, CheckError> {
    let mut descriptors = Vec::with_capacity(request.descriptors.len());
    for (i, descriptor) in request.descriptors.into_iter().enumerate() {
        if descriptor.is_negative_hits {
            return Err(CheckError::Invalid(format!(
                "descriptors[{i}]: `is_negative_hits` is not supported (a sliding window takes back \
                 no charge it admitted)"
            )));
        }
        let limit = match descriptor.limit {
            None => None,
            Some(given) => Some(LimitOverride {
                requests_per_unit: given.requests_per_unit,
                unit: Unit::from_proto(given.unit).ok_or_else(|| {
                    CheckError::Invalid(format!("descriptors[{i}].limit.unit: unknown unit {}", given.unit))
                })?,
            }),
        };
        descriptors.push(RequestDescriptor {
            entries: descriptor.entries.into_iter().map(|e| (e.key, e.value)).collect(),
            hits_addend: descriptor.hits_addend.map(|h| h.value),
            limit,
        });
    }
    Ok(CheckRequest { domain: request.domain, descriptors, hits_addend: request.hits_addend })
}

/// The RLS message of `answer`.
pub(crate) fn to_pb(answer: &CheckAnswer, families: Families) -> RateLimitResponse {
    let statuses = answer
        .statuses
        .iter()
        .map(|status| {
            let code = match status.code {
                Code::Ok => PbCode::Ok,
                Code::OverLimit => PbCode::OverLimit,
            };
            let Some(limit) = status.limit.as_ref() else {
                return DescriptorStatus { code: code as i32, ..DescriptorStatus::default() };
            };
            if limit.is_unlimited() {
                return DescriptorStatus {
                    code: code as i32,
                    limit_remaining: u32::MAX,
                    ..DescriptorStatus::default()
                };
            }
            let until = if status.code == Code::OverLimit || status.shadow_over_limit {
                status.retry_after
            } else {
                status.reset_after
            };
            DescriptorStatus {
                code: code as i32,
                current_limit: Some(PbLimit {
                    name: limit.name.clone().unwrap_or_else(|| limit.stat_key.clone()),
                    requests_per_unit: limit.requests_per_unit(),
                    // A `window:` that is no unit is UNKNOWN (0): the
                    // quota headers carry the exact window.
                    unit: limit.unit.map_or(0, Unit::proto),
                }),
                limit_remaining: status.remaining,
                duration_until_reset: Some(pb_duration(until)),
                ..DescriptorStatus::default()
            }
        })
        .collect();
    let overall = match answer.code {
        Code::Ok => PbCode::Ok,
        Code::OverLimit => PbCode::OverLimit,
    };
    RateLimitResponse {
        overall_code: overall as i32,
        statuses,
        response_headers_to_add: header_options(answer, families),
        ..RateLimitResponse::default()
    }
}

/// The quota headers of `answer` (none when no family is on).
pub(crate) fn headers_of(answer: &CheckAnswer, families: Families) -> http::HeaderMap {
    let Some((rules, multi)) = quota_decisions(answer, families) else {
        return http::HeaderMap::new();
    };
    let mut headers = quota_headers(&rules, &multi, families);
    if answer.code == Code::Ok {
        // Shadow limits deny nothing.
        headers.remove(http::header::RETRY_AFTER);
    }
    headers
}

/// The quota headers of `answer` as RLS header options, written as text
/// straight into them (no header map in between: every answer has them).
fn header_options(answer: &CheckAnswer, families: Families) -> Vec<HeaderValue> {
    let mut options = Vec::new();
    if let Some((rules, multi)) = quota_decisions(answer, families) {
        // Shadow limits deny nothing.
        let admitted = answer.code == Code::Ok;
        for_each_quota_header(&rules, &multi, families, |key, value| {
            if !(admitted && key == http::header::RETRY_AFTER) {
                options.push(HeaderValue {
                    key: key.to_owned(),
                    value: value.to_owned(),
                    ..HeaderValue::default()
                });
            }
        });
    }
    options
}

/// The rules that decided `answer` and their decisions, when it has
/// quota headers to write.
fn quota_decisions(answer: &CheckAnswer, families: Families) -> Option<(Vec<&Rule>, MultiDecision)> {
    if !(families.ietf || families.legacy) {
        return None;
    }
    let (rules, decisions): (Vec<&Rule>, Vec<_>) = answer.decisions().unzip();
    (!rules.is_empty()).then(|| (rules, MultiDecision::from_decisions(decisions)))
}

fn pb_duration(d: Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A gRPC message over [`MAX_BODY_BYTES`] is refused by tonic, before it
/// is parsed, with `OUT_OF_RANGE`; slidegate answers every malformed
/// request `INVALID_ARGUMENT` (Envoy and clients treat the two alike, but
/// one code is one thing to look for). The RLS service itself never
/// answers `OUT_OF_RANGE`.
pub(crate) fn oversized_is_invalid(mut response: axum::response::Response) -> axum::response::Response {
    const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    if let Some(status) = response.headers_mut().get_mut(GRPC_STATUS)
        && status == "11"
    {
        *status = http::HeaderValue::from_static("3");
    }
    response
}
