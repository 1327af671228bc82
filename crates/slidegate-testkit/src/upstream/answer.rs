//! What an [`Upstream`](super::Upstream) answers (its table is in its
//! docs).

use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

/// The size of a `/stream/<n>` answer's frames.
const FRAME: u64 = 65_536;

pub(super) type AnswerBody = BoxBody<Bytes, Infallible>;

/// One upstream's answers.
pub(super) struct Answers {
    /// Echoed, and sent as `x-upstream`.
    pub(super) name: HeaderValue,
    /// Added to every answer.
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
}

impl Answers {
    /// The answer to `request`, by the end of its path.
    pub(super) async fn answer(
        &self,
        request: Request<Incoming>,
    ) -> Result<Response<AnswerBody>, Infallible> {
        let path = request.uri().path().to_owned();
        let tail = |marker: &str| path.rsplit_once(marker).and_then(|(_, n)| n.parse::<u64>().ok());
        if let Some(ms) = tail("/sleep/") {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let mut response = if is_websocket(&request) {
            self.websocket(request)
        } else if path.ends_with("/count") {
            count(request.into_body()).await
        } else if let Some(tokens) = tail("/usage/") {
            usage(tokens, request.uri().query().unwrap_or(""))
        } else if let Some(total) = tail("/stream/") {
            let sized = request.uri().query() == Some("sized");
            Response::new(Pattern { sent: 0, total, sized }.boxed())
        } else {
            self.echo(&request)
        };
        let headers = response.headers_mut();
        headers.insert("x-upstream", self.name.clone());
        for (name, value) in &self.headers {
            headers.append(name, value.clone());
        }
        Ok(response)
    }

    /// `{"upstream", "method", "uri", "version", "headers"}` of `request`.
    fn echo(&self, request: &Request<Incoming>) -> Response<AnswerBody> {
        let mut headers = Map::new();
        for name in request.headers().keys() {
            let values = request.headers().get_all(name).iter();
            let values = values.map(|v| Value::from(String::from_utf8_lossy(v.as_bytes()).into_owned()));
            headers.insert(name.as_str().to_owned(), Value::Array(values.collect()));
        }
        let echo = json!({
            "upstream": String::from_utf8_lossy(self.name.as_bytes()),
            "method": request.method().as_str(),
            "uri": request.uri().path_and_query().map_or("", |p| p.as_str()),
            "version": format!("{:?}", request.version()),
            "headers": headers,
        });
        let mut response = Response::new(full(echo.to_string()));
        response.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
        response
    }

    /// `101 Switching Protocols`, then (on the upgraded connection) the
    /// name as a greeting and an echo of every data message.
    fn websocket(&self, mut request: Request<Incoming>) -> Response<AnswerBody> {
        let key = request.headers().get("sec-websocket-key").map(|key| derive_accept_key(key.as_bytes()));
        let Some(accept) = key else {
            return status(StatusCode::BAD_REQUEST, "a WebSocket handshake needs sec-websocket-key");
        };
        let greeting = String::from_utf8_lossy(self.name.as_bytes()).into_owned();
        let upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let Ok(upgraded) = upgrade.await else { return };
            let mut socket =
                WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
            if socket.send(Message::text(greeting)).await.is_err() {
                return;
            }
            while let Some(Ok(message)) = socket.next().await {
                if message.is_text() || message.is_binary() {
                    if socket.send(message).await.is_err() {
                        return;
                    }
                } else if message.is_close() {
                    return;
                }
            }
        });
        let mut response = Response::new(full(Bytes::new()));
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert("connection", HeaderValue::from_static("upgrade"));
        headers.insert("upgrade", HeaderValue::from_static("websocket"));
        headers.insert("sec-websocket-accept", HeaderValue::from_str(&accept).expect("base64"));
        response
    }
}

/// The byte at offset `at` of a `/stream/<n>` answer.
pub(super) fn stream_byte(at: u64) -> u8 {
    u8::try_from(at / FRAME % 251).unwrap_or(0)
}

fn is_websocket(request: &Request<Incoming>) -> bool {
    request.headers().get("upgrade").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
}

/// The length of `body` in decimal, once read to its end.
async fn count(mut body: Incoming) -> Response<AnswerBody> {
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => bytes += frame.data_ref().map_or(0, |d| d.len() as u64),
            Err(error) => return status(StatusCode::INTERNAL_SERVER_ERROR, &format!("body failed: {error}")),
        }
    }
    Response::new(full(bytes.to_string()))
}

fn full(bytes: impl Into<Bytes>) -> AnswerBody {
    Full::new(bytes.into()).boxed()
}

fn status(status: StatusCode, text: &str) -> Response<AnswerBody> {
    let mut response = Response::new(full(text.to_owned()));
    *response.status_mut() = status;
    response
}

/// A `/usage/<n>` answer: what an LLM server does, the tokens a response
/// used in `x-usage-tokens` — a header, or with `trailer` in the query a
/// trailer after the body; `frames=<k>` sends the body in `k` frames,
/// `every=<ms>` apart (a slow stream).
fn usage(tokens: u64, query: &str) -> Response<AnswerBody> {
    let param = |name: &str| {
        query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('=')?.parse::<u64>().ok())
    };
    let trailer = query.split('&').any(|pair| pair == "trailer");
    let value = HeaderValue::from(tokens);
    let body = Usage {
        frames: param("frames").unwrap_or(1),
        every: Duration::from_millis(param("every").unwrap_or(0)),
        wait: None,
        trailer: trailer.then(|| value.clone()),
    };
    let mut response = Response::new(body.boxed());
    if trailer {
        // Declared, as HTTP/1.1 servers send only the trailers they declare.
        response.headers_mut().insert("trailer", HeaderValue::from_static("x-usage-tokens"));
    } else {
        response.headers_mut().insert("x-usage-tokens", value);
    }
    response
}

/// A `/usage/<n>` answer's body: `frames` frames of `usage\n`, `every`
/// apart, then the trailer, if any.
struct Usage {
    frames: u64,
    every: Duration,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    trailer: Option<HeaderValue>,
}

impl Body for Usage {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.frames == 0 {
            let Some(value) = self.trailer.take() else { return Poll::Ready(None) };
            let mut trailers = hyper::HeaderMap::new();
            trailers.insert("x-usage-tokens", value);
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        if !self.every.is_zero() {
            let every = self.every;
            let wait = self.wait.get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
        }
        self.frames -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"usage\n")))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames == 0 && self.trailer.is_none()
    }
}

/// A `/stream/<n>` answer, made frame by frame as it is sent.
struct Pattern {
    sent: u64,
    total: u64,
    /// Its length is known (`content-length`), or not (chunked).
    sized: bool,
}

impl Body for Pattern {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let len = FRAME.min(self.total - self.sent);
        if len == 0 {
            return Poll::Ready(None);
        }
        let frame = vec![stream_byte(self.sent); usize::try_from(len).expect("a frame fits in memory")];
        self.sent += len;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(frame)))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == self.total
    }

    fn size_hint(&self) -> SizeHint {
        if self.sized { SizeHint::with_exact(self.total - self.sent) } else { SizeHint::default() }
    }
}
