//! The bodies the gateway passes: a request body on its way upstream that
//! says how far it has come ([`Upload`]), and every response's body
//! ([`GatewayBody`]), the gateway's own answers included ([`plain`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body::Body as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Either, Empty, Full};
use hyper::body::Incoming;
use tokio::sync::oneshot;

/// Any error a body passed through may end with.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every gateway response: an upstream's, streamed, or one of
/// the gateway's own answers.
pub(crate) type GatewayBody = UnsyncBoxBody<Bytes, BoxError>;

/// How far a request body on its way upstream has come.
pub(crate) struct Sending {
    /// Completes when it has all been sent.
    pub(crate) sent: oneshot::Receiver<()>,
    /// Frames sent so far.
    pub(crate) progress: Arc<AtomicU64>,
}

/// A request body on its way upstream that says how far it has come.
pub(crate) struct Upload {
    body: Either<Incoming, Empty<Bytes>>,
    sent: Option<oneshot::Sender<()>>,
    /// `None` for a request without a body (nothing to follow, nothing
    /// allocated).
    progress: Option<Arc<AtomicU64>>,
}

impl Upload {
    /// The body, and what tells how far it has come (`None` when there is
    /// nothing to send).
    pub(crate) fn new(body: Either<Incoming, Empty<Bytes>>) -> (Upload, Option<Sending>) {
        if body.is_end_stream() {
            return (Upload { body, sent: None, progress: None }, None);
        }
        let progress = Arc::new(AtomicU64::new(0));
        let (sender, sent) = oneshot::channel();
        let sending = Sending { sent, progress: Arc::clone(&progress) };
        (Upload { body, sent: Some(sender), progress: Some(progress) }, Some(sending))
    }
}

impl http_body::Body for Upload {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let (Poll::Ready(Some(_)), Some(progress)) = (&polled, &this.progress) {
            progress.fetch_add(1, Ordering::Relaxed);
        }
        if (matches!(polled, Poll::Ready(None)) || this.body.is_end_stream())
            && let Some(sent) = this.sent.take()
        {
            let _ = sent.send(());
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// One of the gateway's own plain-text answers.
pub(crate) fn plain(status: StatusCode, message: &'static str) -> Response<GatewayBody> {
    let body =
        Full::new(Bytes::from_static(message.as_bytes())).map_err(|never| match never {}).boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let mut headers = HeaderMap::with_capacity(1);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    *response.headers_mut() = headers;
    response
}
