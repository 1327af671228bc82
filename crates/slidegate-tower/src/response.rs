//! The answer to a limited request: `429 Too Many Requests` (or the ban
//! status) with a body in the format the client accepts, or, for gRPC,
//! `RESOURCE_EXHAUSTED` with `RetryInfo`.

use std::borrow::Cow;
use std::sync::LazyLock;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt as _;
use slidegate::{Decision, State};

use crate::body_end::{BodyEnd, OnEnd};
use crate::headers::{ceil_secs, push_number, retry_after, with_scratch};

/// Response bodies the layer can build its own answers in.
///
/// Implemented for `String`, `Vec<u8>`, `Bytes`, `http_body_util::Full<Bytes>`,
/// `http_body_util`'s `BoxBody<Bytes, E>`, `UnsyncBoxBody<Bytes, E>` and
/// `Either<L, R>` (as `L`), `axum::body::Body` (feature `axum`) and
/// `tonic::body::Body` (feature `tonic`).
pub trait LimitedBody: Sized {
    /// A body holding `bytes`.
    fn from_bytes(bytes: Bytes) -> Self;

    /// This body, running `end` once it ends ([`BodyEnd`]): the boxed
    /// bodies (`BoxBody`, `UnsyncBoxBody`, axum's and tonic's) are wrapped
    /// in [`OnEnd`](crate::OnEnd), which runs it when their last frame is
    /// read or when they are dropped. The default runs it now: right for a
    /// body a response holds whole (`String`, `Bytes`, `Full`…); a
    /// streaming body of your own should wrap itself the same way.
    fn on_end(self, end: BodyEnd) -> Self {
        end.ended(None);
        self
    }
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

impl<E: 'static> LimitedBody for http_body_util::combinators::BoxBody<Bytes, E> {
    fn from_bytes(bytes: Bytes) -> Self {
        http_body_util::Full::new(bytes).map_err(|never| match never {}).boxed()
    }

    fn on_end(self, end: BodyEnd) -> Self {
        OnEnd::new(self, end).boxed()
    }
}

impl<E: 'static> LimitedBody for http_body_util::combinators::UnsyncBoxBody<Bytes, E> {
    fn from_bytes(bytes: Bytes) -> Self {
        http_body_util::Full::new(bytes).map_err(|never| match never {}).boxed_unsync()
    }

    fn on_end(self, end: BodyEnd) -> Self {
        OnEnd::new(self, end).boxed_unsync()
    }
}

impl<L: LimitedBody, R: LimitedBody> LimitedBody for http_body_util::Either<L, R> {
    fn from_bytes(bytes: Bytes) -> Self {
        http_body_util::Either::Left(L::from_bytes(bytes))
    }

    fn on_end(self, end: BodyEnd) -> Self {
        match self {
            http_body_util::Either::Left(left) => http_body_util::Either::Left(left.on_end(end)),
            http_body_util::Either::Right(right) => http_body_util::Either::Right(right.on_end(end)),
        }
    }
}

#[cfg(feature = "axum")]
impl LimitedBody for axum::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        axum::body::Body::from(bytes)
    }

    fn on_end(self, end: BodyEnd) -> Self {
        axum::body::Body::new(OnEnd::new(self, end))
    }
}

#[cfg(feature = "tonic")]
impl LimitedBody for tonic::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        tonic::body::Body::new(http_body_util::Full::new(bytes))
    }

    fn on_end(self, end: BodyEnd) -> Self {
        tonic::body::Body::new(OnEnd::new(self, end))
    }
}

/// Whether the client accepts JSON: an `Accept` media range
/// `application/json`, `application/*+json` (any case) whose `q` is not 0.
pub(crate) fn wants_json(request_headers: &HeaderMap) -> bool {
    request_headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
        |range| {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let json = media == "application/json"
                || (media.starts_with("application/") && media.ends_with("+json"));
            let refused = parts.filter_map(|p| p.split_once('=')).any(|(name, value)| {
                // A q of 0, or of nonsense (NaN), does not accept.
                name.trim().eq_ignore_ascii_case("q")
                    && value.trim().parse::<f32>().is_ok_and(|q| q.is_nan() || q <= 0.0)
            });
            json && !refused
        },
    )
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

/// The message of limited responses, with the parts of their bodies that
/// do not change built once.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    text: Cow<'static, str>,
    /// The plain-text body: the message and a newline.
    body: Bytes,
    /// The message as a JSON string.
    json: Box<str>,
}

impl Message {
    pub(crate) fn new(text: Cow<'static, str>) -> Message {
        let body = Bytes::from(format!("{text}\n"));
        let json = json_string(&text).into_boxed_str();
        Message { text, body, json }
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

/// The HTTP answer to a denied request.
pub(crate) fn limited<B: LimitedBody>(
    denial: &Decision,
    message: &Message,
    ban_status: StatusCode,
    json: bool,
) -> Response<B> {
    let banned = denial.state == State::Banned;
    let status = if banned { ban_status } else { StatusCode::TOO_MANY_REQUESTS };
    let retry = ceil_secs(denial.retry_after).max(1);
    let (body, content_type) = if json {
        let kind: &[u8] = if banned { b"banned" } else { b"rate_limited" };
        let write = |out: &mut Vec<u8>| {
            out.extend_from_slice(b"{\"error\":\"");
            out.extend_from_slice(kind);
            out.extend_from_slice(b"\",\"message\":");
            out.extend_from_slice(message.json.as_bytes());
            out.extend_from_slice(b",\"retry_after_secs\":");
            push_number(out, retry);
            out.extend_from_slice(b",\"limit\":");
            push_number(out, u64::from(denial.limit));
            out.extend_from_slice(b",\"remaining\":");
            push_number(out, u64::from(denial.remaining));
            out.push(b'}');
        };
        (with_scratch(write, Bytes::copy_from_slice), "application/json")
    } else {
        (message.body.clone(), "text/plain; charset=utf-8")
    };
    let mut response = Response::new(B::from_bytes(body));
    *response.status_mut() = status;
    // Room for these two and the quota headers, allocated once.
    let headers = response.headers_mut();
    *headers = HeaderMap::with_capacity(LIMITED_HEADERS);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(RETRY_AFTER, retry_after(denial.retry_after));
    response
}

/// The headers a limited response usually carries: its own two, the two
/// IETF and the three legacy quota headers, and one to spare.
const LIMITED_HEADERS: usize = 8;

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
/// [`MissingKey::Reject`](crate::MissingKey::Reject): `400 Bad Request`, or
/// for gRPC `INVALID_ARGUMENT`.
pub(crate) fn unidentified<B: LimitedBody>(grpc: bool, why: &str) -> Response<B> {
    plain(grpc, StatusCode::BAD_REQUEST, why)
}

/// The default text of a ban's answer under `status`.
pub(crate) fn banned_message(status: StatusCode) -> &'static Message {
    static FORBIDDEN: LazyLock<Message> =
        LazyLock::new(|| Message::new(Cow::Borrowed("Forbidden: banned for repeated violations")));
    static TOO_MANY: LazyLock<Message> =
        LazyLock::new(|| Message::new(Cow::Borrowed("Too Many Requests: banned for repeated violations")));
    if status == StatusCode::FORBIDDEN { &FORBIDDEN } else { &TOO_MANY }
}

/// The answer to a request whose cost a rule can never admit: 429 without
/// `Retry-After` (waiting would not help), or for gRPC `RESOURCE_EXHAUSTED`
/// without `RetryInfo`.
pub(crate) fn cost_above_limit<B: LimitedBody>(
    limit: u32,
    message: &str,
    json: bool,
    grpc: bool,
) -> Response<B> {
    if grpc || !json {
        return plain(grpc, StatusCode::TOO_MANY_REQUESTS, message);
    }
    let body = format!(
        "{{\"error\":\"cost_above_limit\",\"message\":{},\"retry_after_secs\":null,\"limit\":{limit},\"remaining\":0}}",
        json_string(message)
    );
    let mut response = Response::new(B::from_bytes(Bytes::from(body)));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The answer when the check itself failed (a bug, not the client's
/// doing): `500`, or for gRPC `INTERNAL`.
pub(crate) fn internal_error<B: LimitedBody>(grpc: bool) -> Response<B> {
    plain(grpc, StatusCode::INTERNAL_SERVER_ERROR, "rate limit check failed")
}

/// The answer when the store failed and the limiter's failure policy is
/// [`Fail`](slidegate::FailurePolicy::Fail): `503`, or for gRPC
/// `UNAVAILABLE`, so the caller's own failure handling decides.
pub(crate) fn unavailable<B: LimitedBody>(grpc: bool) -> Response<B> {
    plain(grpc, StatusCode::SERVICE_UNAVAILABLE, "rate limit store unavailable")
}

/// A plain-text answer with `status`, or for gRPC the status's gRPC code
/// (HTTP 200 with `grpc-status`, as gRPC clients expect).
fn plain<B: LimitedBody>(grpc: bool, status: StatusCode, message: &str) -> Response<B> {
    #[cfg(feature = "tonic")]
    if grpc {
        let code = match status {
            StatusCode::BAD_REQUEST => tonic::Code::InvalidArgument,
            StatusCode::TOO_MANY_REQUESTS => tonic::Code::ResourceExhausted,
            StatusCode::SERVICE_UNAVAILABLE => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        };
        let (parts, ()) = tonic::Status::new(code, message).into_http::<()>().into_parts();
        return Response::from_parts(parts, B::from_bytes(Bytes::new()));
    }
    let _ = grpc;
    let mut response = Response::new(B::from_bytes(Bytes::from(format!("{message}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// Milliseconds since this process first asked (the warning gate's clock).
pub(crate) fn process_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    u64::try_from(EPOCH.get_or_init(std::time::Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn text_or_json_by_accept() {
        let denial = Decision::limited(10, 0, Duration::from_millis(1500), Duration::from_secs(9));
        assert!(!wants_json(&HeaderMap::new()));
        let text: Response<String> =
            limited(&denial, &Message::new("slow down".into()), StatusCode::FORBIDDEN, false);
        assert_eq!(text.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(text.headers()[RETRY_AFTER], "2");
        assert_eq!(text.body(), "slow down\n");

        let mut accept = HeaderMap::new();
        accept.insert(ACCEPT, HeaderValue::from_static("application/json"));
        assert!(wants_json(&accept));
        let json: Response<String> =
            limited(&denial, &Message::new("say \"hi\"".into()), StatusCode::FORBIDDEN, true);
        let body: serde_json::Value = serde_json::from_str(json.body()).unwrap();
        assert_eq!(body["message"], "say \"hi\"");
        assert_eq!(body["retry_after_secs"], 2);
        assert_eq!(
            (&body["error"], &body["limit"], &body["remaining"]),
            (&"rate_limited".into(), &10.into(), &0.into())
        );
        let control: Response<String> =
            limited(&denial, &Message::new("tab\there\u{1}".into()), StatusCode::FORBIDDEN, true);
        let body: serde_json::Value = serde_json::from_str(control.body()).unwrap();
        assert_eq!(body["message"], "tab\there\u{1}");
        assert_eq!(json.headers()[CONTENT_TYPE], "application/json");

        let mut ban = denial;
        ban.state = State::Banned;
        let banned: Response<String> =
            limited(&ban, &Message::new("banned".into()), StatusCode::FORBIDDEN, false);
        assert_eq!(banned.status(), StatusCode::FORBIDDEN);
    }
}
