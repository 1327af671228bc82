//! The answer to a limited request: `429 Too Many Requests` (or the ban
//! status) with a body in the format the client accepts, or, for gRPC,
//! `RESOURCE_EXHAUSTED` with `RetryInfo`.

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use slidegate::{Decision, State};

use crate::headers::{ceil_secs, retry_after};

/// Response bodies the layer can build its own answers in.
///
/// Implemented for `String`, `Vec<u8>`, `Bytes`, `http_body_util::Full<Bytes>`,
/// `axum::body::Body` (feature `axum`) and `tonic::body::Body` (feature `tonic`).
pub trait LimitedBody: Sized {
    /// A body holding `bytes`.
    fn from_bytes(bytes: Bytes) -> Self;
}

impl LimitedBody for String {
    fn from_bytes(bytes: Bytes) -> Self {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl LimitedBody for Vec<u8> {
    fn from_bytes(bytes: Bytes) -> Self {
        bytes.to_vec()
    }
}

impl LimitedBody for Bytes {
    fn from_bytes(bytes: Bytes) -> Self {
        bytes
    }
}

impl LimitedBody for http_body_util::Full<Bytes> {
    fn from_bytes(bytes: Bytes) -> Self {
        http_body_util::Full::new(bytes)
    }
}

#[cfg(feature = "axum")]
impl LimitedBody for axum::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        axum::body::Body::from(bytes)
    }
}

#[cfg(feature = "tonic")]
impl LimitedBody for tonic::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        tonic::body::Body::new(http_body_util::Full::new(bytes))
    }
}

/// Whether the client prefers JSON (`Accept` names `application/json` or a
/// `+json` type).
pub(crate) fn wants_json(request_headers: &HeaderMap) -> bool {
    request_headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json") || v.contains("+json"))
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The HTTP answer to a denied request.
pub(crate) fn limited<B: LimitedBody>(
    denial: &Decision,
    message: &str,
    ban_status: StatusCode,
    json: bool,
) -> Response<B> {
    let banned = denial.state == State::Banned;
    let status = if banned { ban_status } else { StatusCode::TOO_MANY_REQUESTS };
    let retry = ceil_secs(denial.retry_after).max(1);
    let (body, content_type) = if json {
        let kind = if banned { "banned" } else { "rate_limited" };
        let body = format!(
            "{{\"error\":\"{kind}\",\"message\":{},\"retry_after_secs\":{retry},\"limit\":{},\"remaining\":{}}}",
            json_string(message),
            denial.limit,
            denial.remaining
        );
        (body, "application/json")
    } else {
        (format!("{message}\n"), "text/plain; charset=utf-8")
    };
    let mut response = Response::new(B::from_bytes(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(RETRY_AFTER, retry_after(denial.retry_after));
    response
}

/// The gRPC answer to a denied request: `RESOURCE_EXHAUSTED` (or
/// `PERMISSION_DENIED` for a ban answered with 403), with
/// `google.rpc.RetryInfo` carrying `retry_after`.
#[cfg(feature = "tonic")]
pub(crate) fn limited_grpc<B: LimitedBody>(
    denial: &Decision,
    message: &str,
    ban_status: StatusCode,
) -> Response<B> {
    use tonic_types::{ErrorDetails, StatusExt};

    let code = if denial.state == State::Banned && ban_status == StatusCode::FORBIDDEN {
        tonic::Code::PermissionDenied
    } else {
        tonic::Code::ResourceExhausted
    };
    let details = ErrorDetails::with_retry_info(Some(denial.retry_after));
    let status = tonic::Status::with_error_details(code, message, details);
    let (parts, ()) = status.into_http::<()>().into_parts();
    let mut response = Response::from_parts(parts, B::from_bytes(Bytes::new()));
    response.headers_mut().insert(RETRY_AFTER, retry_after(denial.retry_after));
    response
}

/// The answer to a request none of whose keys could be extracted, under
/// [`MissingKey::Reject`](crate::MissingKey::Reject).
pub(crate) fn unidentified<B: LimitedBody>() -> Response<B> {
    let mut response = Response::new(B::from_bytes(Bytes::from_static(b"cannot identify the client\n")));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn text_or_json_by_accept() {
        let denial = Decision::limited(10, 0, Duration::from_millis(1500), Duration::from_secs(9));
        assert!(!wants_json(&HeaderMap::new()));
        let text: Response<String> = limited(&denial, "slow down", StatusCode::FORBIDDEN, false);
        assert_eq!(text.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(text.headers()[RETRY_AFTER], "2");
        assert_eq!(text.body(), "slow down\n");

        let mut accept = HeaderMap::new();
        accept.insert(ACCEPT, HeaderValue::from_static("application/json"));
        assert!(wants_json(&accept));
        let json: Response<String> = limited(&denial, "say \"hi\"", StatusCode::FORBIDDEN, true);
        let body: serde_json::Value = serde_json::from_str(json.body()).unwrap();
        assert_eq!(body["message"], "say \"hi\"");
        assert_eq!(body["retry_after_secs"], 2);
        assert_eq!(json.headers()[CONTENT_TYPE], "application/json");

        let mut ban = denial;
        ban.state = State::Banned;
        let banned: Response<String> = limited(&ban, "banned", StatusCode::FORBIDDEN, false);
        assert_eq!(banned.status(), StatusCode::FORBIDDEN);
    }
}
