//! The gRPC side of `bench --target grpc://…`: Envoy RLS v3
//! `ShouldRateLimit` calls over a few HTTP/2 connections.
//!
//! Written on `h2` directly, not through a tonic `Channel`: the load
//! generator shares this machine's cores with the server it measures, so
//! every microsecond it spends is taken from the server. A call here is a
//! stream with one pre-framed message out and one in — the protocol, and
//! no more (no tower buffer task, no per-call codec setup).

use bytes::{BufMut, BytesMut};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::{HeaderMap, Method, Request, Uri};
use prost::Message;

use super::link::{Hold, Link, read_body};
use super::template::EntryTemplate;
use super::{Answer, Failure};

/// The RLS method.
const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The longest answer message accepted (a real RLS answer is far smaller).
const MAX_MESSAGE: usize = 4 << 20;

/// gRPC status codes by number, for the report.
const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// One task's caller: its connection, and its request written anew per key.
pub(super) struct GrpcCaller {
    link: Hold,
    uri: Uri,
    request: RateLimitRequest,
    descriptors: Vec<Vec<EntryTemplate>>,
    frame: BytesMut,
}

impl GrpcCaller {
    /// A caller on `send` for `authority`, asking in `domain`.
    pub(super) fn new(
        link: std::sync::Arc<Link>,
        authority: &str,
        domain: &str,
        descriptors: &[Vec<EntryTemplate>],
        hits_addend: u32,
    ) -> anyhow::Result<GrpcCaller> {
        let uri = Uri::builder().scheme("http").authority(authority).path_and_query(PATH).build()?;
        let request = RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: descriptors
                .iter()
                .map(|entries| RateLimitDescriptor {
                    entries: entries.iter().map(|_| Entry::default()).collect(),
                    ..RateLimitDescriptor::default()
                })
                .collect(),
            hits_addend,
        };
        Ok(GrpcCaller {
            link: Hold::new(link),
            uri,
            request,
            descriptors: descriptors.to_vec(),
            frame: BytesMut::new(),
        })
    }

    /// Asks for `key`.
    pub(super) async fn call(&mut self, key: u64) -> Result<Answer, Failure> {
        for (descriptor, templates) in self.request.descriptors.iter_mut().zip(&self.descriptors) {
            for (entry, (name, value)) in descriptor.entries.iter_mut().zip(templates) {
                name.write(key, &mut entry.key);
                value.write(key, &mut entry.value);
            }
        }
        // The gRPC frame: uncompressed, its length, the message.
        let len = self.request.encoded_len();
        self.frame.reserve(5 + len);
        self.frame.put_u8(0);
        self.frame.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        self.request.encode(&mut self.frame).map_err(|e| Failure::transport(e.to_string()))?;
        let body = self.frame.split().freeze();

        let request = Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .body(())
            .map_err(|e| Failure::transport(e.to_string()))?;
        let response = self.link.exchange(request, Some(body)).await?;
        let (parts, mut body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(Failure::new(format!("HTTP {}", parts.status.as_u16()), "the server answered HTTP"));
        }
        // A trailers-only answer carries its status in the headers.
        if let Some(failure) = status_failure(&parts.headers) {
            return Err(failure);
        }
        let message = read_body(&mut body, MAX_MESSAGE + 5).await?;
        let trailers = body.trailers().await.map_err(Failure::from)?;
        match trailers.as_ref().and_then(status_failure) {
            Some(failure) => return Err(failure),
            None if trailers.as_ref().is_none_or(|t| !t.contains_key("grpc-status")) => {
                return Err(Failure::transport("the answer has no grpc-status".to_owned()));
            }
            None => {}
        }
        if message.len() < 5 || message[0] != 0 {
            return Err(Failure::transport("the answer is not one uncompressed message".to_owned()));
        }
        let answer = RateLimitResponse::decode(&message[5..])
            .map_err(|e| Failure::transport(format!("the answer is not a RateLimitResponse: {e}")))?;
        match Code::try_from(answer.overall_code) {
            Ok(Code::Ok) => Ok(Answer::Allowed),
            Ok(Code::OverLimit) => Ok(Answer::Denied),
            _ => Err(Failure::new("UNKNOWN_CODE".to_owned(), "the answer's overall_code is UNKNOWN")),
        }
    }
}

/// The failure a `grpc-status` other than 0 in `headers` says, if any.
fn status_failure(headers: &HeaderMap) -> Option<Failure> {
    let status = headers.get("grpc-status")?;
    let code: usize = status.to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    if code == 0 {
        return None;
    }
    let name = CODES.get(code).map_or_else(|| format!("code {code}"), |name| (*name).to_owned());
    let message = headers.get("grpc-message").map_or_else(String::new, |m| percent_decode(m.as_bytes()));
    Some(Failure::new(name.clone(), &format!("{name}: {message}")))
}

/// `grpc-message` as written: gRPC percent-encodes it.
fn percent_decode(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (text[i], text.get(i + 1).copied().and_then(hex), text.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_grpc_messages() {
        assert_eq!(percent_decode(b"%60a%60%20is%20bad"), "`a` is bad");
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%zz ok"), "%zz ok");
        assert_eq!(percent_decode(b"%C3%A9"), "é");
    }
}
