//! `POST /json`: envoy ratelimit's JSON form of an RLS request and answer
//! (protobuf's JSON mapping: camelCase or snake_case field names, unknown
//! fields refused; 200 when OK, 429 when over the limit).

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use slidegate_tower::headers::Families;

use super::{AppState, bad_request, json_answer, parse_body};
use crate::api::rls::to_pb;
use crate::config::Unit;
use crate::decide::Decider;
use crate::decide::request::{CheckError, CheckRequest, LimitOverride, Mode, RequestDescriptor};
use crate::decide::stats::Edge;
use crate::runtime::telemetry::{Api, observe};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<Number>,
    #[serde(default, alias = "isNegativeHits")]
    is_negative_hits: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JsonEntry {
    pub(super) key: String,
    #[serde(default)]
    pub(super) value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOverride {
    #[serde(default, alias = "requestsPerUnit")]
    requests_per_unit: Number,
    #[serde(default)]
    unit: Option<UnitName>,
}

/// A protobuf JSON integer: a number or a decimal string.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Number {
    #[default]
    Zero,
    Int(u64),
    Text(String),
}

impl Number {
    fn value(&self, field: &str) -> Result<u64, CheckError> {
        match self {
            Number::Zero => Ok(0),
            Number::Int(n) => Ok(*n),
            Number::Text(text) => text
                .parse()
                .map_err(|_| CheckError::Invalid(format!("`{field}`: {text:?} is not a whole number"))),
        }
    }
}

/// A unit by name (`MINUTE`) or number (2).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum UnitName {
    Number(i32),
    Name(String),
}

impl UnitName {
    fn unit(&self, field: &str) -> Result<Unit, CheckError> {
        let unit = match self {
            UnitName::Number(n) => Unit::from_proto(*n),
            UnitName::Name(name) => Unit::parse(name),
        };
        unit.ok_or_else(|| CheckError::Invalid(format!("`{field}`: unknown unit {self:?}")))
    }
}

impl JsonRequest {
    fn into_check(self) -> Result<CheckRequest, CheckError> {
        let hits = self.hits_addend.as_ref().map_or(Ok(0), |h| h.value("hits_addend"))?;
        let hits_addend = u32::try_from(hits)
            .map_err(|_| CheckError::Invalid(format!("`hits_addend` {hits} is above {}", u32::MAX)))?;
        let mut descriptors = Vec::with_capacity(self.descriptors.len());
        for (i, d) in self.descriptors.into_iter().enumerate() {
            if d.is_negative_hits {
                return Err(CheckError::Invalid(format!(
                    "`descriptors[{i}].is_negative_hits` is not supported"
                )));
            }
            let limit = match d.limit {
                None => None,
                Some(o) => {
                    let rpu =
                        o.requests_per_unit.value(&format!("descriptors[{i}].limit.requests_per_unit"))?;
                    let unit_field = format!("descriptors[{i}].limit.unit");
                    Some(LimitOverride {
                        requests_per_unit: u32::try_from(rpu).map_err(|_| {
                            CheckError::Invalid(format!("`{unit_field}`: {rpu} is too large"))
                        })?,
                        unit: o
                            .unit
                            .ok_or_else(|| CheckError::Invalid(format!("`{unit_field}` is required")))?
                            .unit(&unit_field)?,
                    })
                }
            };
            let hits_addend = match &d.hits_addend {
                None => None,
                Some(h) => Some(h.value(&format!("descriptors[{i}].hits_addend"))?),
            };
            descriptors.push(RequestDescriptor {
                entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
                hits_addend,
                limit,
            });
        }
        Ok(CheckRequest { domain: self.domain, descriptors, hits_addend })
    }
}

/// `POST /json` (and `GET` with a body) through the router (the service
/// answers `POST` before the router: [`Api`](super::Api)).
pub(super) async fn handle(State(app): State<AppState>, body: Bytes) -> Response {
    answer(&app.decider, app.families, &body).await
}

/// The answer to a `/json` body.
pub(super) async fn answer(decider: &Decider, families: Families, body: &[u8]) -> Response {
    let started = Instant::now();
    let request: JsonRequest = match parse_body(body) {
        Ok(request) => request,
        Err(message) => {
            observe(Api::Json, &Err(CheckError::Invalid(message.clone())), started);
            return bad_request(message);
        }
    };
    let outcome = match request.into_check() {
        Ok(check) => decider.check(&check, Mode::Charge).await,
        Err(error) => Err(error),
    };
    observe(Api::Json, &outcome, started);
    decider.stats().answered(Edge::Http, &outcome);
    match outcome {
        Ok(answer) => {
            let pb = to_pb(&answer, families);
            let status = if pb.overall_code == PbCode::OverLimit as i32 {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::OK
            };
            let capacity = 64 + 256 * pb.statuses.len();
            json_answer(status, HeaderMap::new(), &to_json(&pb), capacity)
        }
        Err(error) => super::check_error(&error),
    }
}

/// An RLS answer in protobuf's JSON mapping: camelCase names, enums by
/// name, durations as `"1.5s"`, zero values left out.
pub(crate) fn to_json(response: &RateLimitResponse) -> Value {
    let code = |n: i32| PbCode::try_from(n).unwrap_or(PbCode::Unknown).as_str_name();
    let mut out = Map::new();
    out.insert("overallCode".into(), json!(code(response.overall_code)));
    let statuses: Vec<Value> = response
        .statuses
        .iter()
        .map(|s| {
            let mut status = Map::new();
            status.insert("code".into(), json!(code(s.code)));
            if let Some(limit) = &s.current_limit {
                let mut current = Map::new();
                if !limit.name.is_empty() {
                    current.insert("name".into(), json!(limit.name));
                }
                if limit.requests_per_unit != 0 {
                    current.insert("requestsPerUnit".into(), json!(limit.requests_per_unit));
                }
                let unit = Unit::from_proto(limit.unit).map_or("UNKNOWN", |u| unit_name(u));
                current.insert("unit".into(), json!(unit));
                status.insert("currentLimit".into(), Value::Object(current));
            }
            if s.limit_remaining != 0 {
                status.insert("limitRemaining".into(), json!(s.limit_remaining));
            }
            if let Some(d) = &s.duration_until_reset {
                status.insert("durationUntilReset".into(), json!(duration(d.seconds, d.nanos)));
            }
            Value::Object(status)
        })
        .collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    let headers: Vec<Value> =
        response.response_headers_to_add.iter().map(|h| json!({ "key": h.key, "value": h.value })).collect();
    if !headers.is_empty() {
        out.insert("responseHeadersToAdd".into(), Value::Array(headers));
    }
    Value::Object(out)
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Second => "SECOND",
        Unit::Minute => "MINUTE",
        Unit::Hour => "HOUR",
        Unit::Day => "DAY",
        Unit::Week => "WEEK",
        Unit::Month => "MONTH",
        Unit::Year => "YEAR",
    }
}

/// protobuf JSON's duration: seconds with 0, 3, 6 or 9 fractional digits.
fn duration(seconds: i64, nanos: i32) -> String {
    if nanos == 0 {
        format!("{seconds}s")
    } else if nanos % 1_000_000 == 0 {
        format!("{seconds}.{:03}s", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!("{seconds}.{:06}s", nanos / 1_000)
    } else {
        format!("{seconds}.{nanos:09}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_protobuf_json() {
        assert_eq!(duration(60, 0), "60s");
        assert_eq!(duration(1, 500_000_000), "1.500s");
        assert_eq!(duration(0, 1_000), "0.000001s");
        assert_eq!(duration(0, 7), "0.000000007s");
    }

    #[test]
    fn reads_both_spellings() {
        let body = r#"{"domain":"d","hitsAddend":2,"descriptors":[{"entries":[{"key":"k","value":"v"}],
            "limit":{"requestsPerUnit":"5","unit":"MINUTE"},"hits_addend":"3"}]}"#;
        let request: JsonRequest = serde_json::from_str(body).unwrap();
        let check = request.into_check().unwrap();
        assert_eq!(check.hits_addend, 2);
        assert_eq!(check.descriptors[0].hits_addend, Some(3));
        assert_eq!(check.descriptors[0].limit.unwrap().unit, Unit::Minute);
        let err = serde_json::from_str::<JsonRequest>(r#"{"domain":"d","descriptorz":[]}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `descriptorz`"), "{err}");
    }

    /// The plain parser [`parse_body`] tries first accepts what the
    /// path-tracking one accepts, as the same value, and nothing else.
    #[test]
    fn the_plain_parser_agrees_with_the_tracking_one() {
        let bodies = [
            r#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#,
            r#"  {"domain":"d","hitsAddend":"2"}  "#,
            "{}",
            r#"{"domain":"d"} x"#,
            r#"{"domain":"d"}{}"#,
            r#"{"domain":"d","domain":"e"}"#,
            r#"{"descriptors":[{"limit":{"requests_per_unit":-1}}]}"#,
            r#"{"descriptors":[{"entries":[{"key":"k","extra":1}]}]}"#,
            r#"{"hits_addend":1.5}"#,
            "[]",
            "",
            "null",
        ];
        for body in bodies {
            let plain = serde_json::from_slice::<JsonRequest>(body.as_bytes()).ok();
            let tracked = super::super::parse_tracked::<JsonRequest>(body.as_bytes());
            assert_eq!(format!("{plain:?}"), format!("{:?}", tracked.as_ref().ok()), "{body}");
            let parsed = super::super::parse_body::<JsonRequest>(body.as_bytes());
            assert_eq!(format!("{parsed:?}"), format!("{tracked:?}"), "{body}");
        }
    }
}
