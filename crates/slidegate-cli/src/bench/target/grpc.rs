//! The gRPC side of `bench --target grpc://…`: Envoy RLS v3
//! `ShouldRateLimit` calls over a few HTTP/2 connections.
//!
//! Written on `h2` directly, not through a tonic `Channel`: the load
//! generator shares this machine's cores with the server it measures, so
//! every microsecond it spends is taken from the server. A call here is a
//! stream with one pre-framed message out and one in — the protocol, and
//! no more (no tower buffer task, no per-call codec setup).

use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::{HeaderMap, Method, Request, Uri};
use prost::Message;
use tokio::net::TcpStream;

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

/// Opens one HTTP/2 connection to `authority`; its driver runs as a task.
///
/// # Errors
///
/// The connection or the HTTP/2 handshake failed.
pub(super) async fn connect(authority: &str) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let stream = TcpStream::connect(authority).await?;
    stream.set_nodelay(true)?;
    let (send, connection) = h2::client::Builder::new()
        // Answers are small; a window this size never stalls them.
        .initial_window_size(1 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake(stream)
        .await?;
    tokio::spawn(async move {
        // Its errors reach the calls on it.
        let _ = connection.await;
    });
    Ok(send)
}

/// One of the run's HTTP/2 connections, shared by several callers, and
/// opened again when it breaks (a server restarted mid-run).
pub(super) struct Link {
    authority: String,
    /// The connection and its generation; `None` once it broke.
    state: tokio::sync::Mutex<Option<(u64, h2::client::SendRequest<Bytes>)>>,
}

impl Link {
    /// A link over `send`, already open to `authority`.
    pub(super) fn new(authority: &str, send: h2::client::SendRequest<Bytes>) -> Link {
        Link { authority: authority.to_owned(), state: tokio::sync::Mutex::new(Some((0, send))) }
    }

    /// The connection, opened again if it broke.
    async fn get(&self) -> Result<(u64, h2::client::SendRequest<Bytes>), Failure> {
        let mut state = self.state.lock().await;
        if let Some((generation, send)) = &*state {
            return Ok((*generation, send.clone()));
        }
        let send = connect(&self.authority).await.map_err(|e| Failure::transport(format!("{e:#}")))?;
        let generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *state = Some((generation, send.clone()));
        Ok((generation, send))
    }

    /// Notes that connection `generation` broke (unless it was replaced already).
    async fn broken(&self, generation: u64) {
        let mut state = self.state.lock().await;
        if matches!(&*state, Some((current, _)) if *current == generation) {
            *state = None;
        }
    }
}

/// Generations of reopened connections (0 is every first one).
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One task's caller: its connection, and its request written anew per key.
pub(super) struct GrpcCaller {
    link: std::sync::Arc<Link>,
    /// The link's connection as this caller last got it.
    send: Option<(u64, h2::client::SendRequest<Bytes>)>,
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
            link,
            send: None,
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
        let (generation, send) = match &self.send {
            Some(send) => send.clone(),
            None => self.send.insert(self.link.get().await?).clone(),
        };
        let sent = async {
            let mut send = send.ready().await?;
            let (response, mut stream) = send.send_request(request, false)?;
            stream.send_data(body, true)?;
            response.await
        };
        let response = match sent.await {
            Ok(response) => response,
            Err(error) => {
                // A broken connection is opened again for the next call.
                if error.is_io() || error.is_go_away() || !error.is_remote() {
                    self.send = None;
                    self.link.broken(generation).await;
                }
                return Err(Failure::from(error));
            }
        };
        let (parts, mut body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(Failure::new(format!("HTTP {}", parts.status.as_u16()), "the server answered HTTP"));
        }
        // A trailers-only answer carries its status in the headers.
        if let Some(failure) = status_failure(&parts.headers) {
            return Err(failure);
        }
        let mut message = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(Failure::from)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            if message.len() + chunk.len() > MAX_MESSAGE + 5 {
                return Err(Failure::transport("the answer is larger than 4 MiB".to_owned()));
            }
            message.extend_from_slice(&chunk);
        }
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

impl From<h2::Error> for Failure {
    fn from(error: h2::Error) -> Failure {
        Failure::transport(error.to_string())
    }
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
