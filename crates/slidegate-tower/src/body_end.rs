//! Work done when a response's body ends — the charge of what the response
//! cost ([`ResponseCost`](crate::ResponseCost)): [`BodyEnd`], and the body
//! that runs it ([`OnEnd`]).

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

/// What runs once when a response body ends: when its last frame has been
/// read (with its trailers, if it ends with some), when it fails, or when
/// it is dropped before its end (a client gone mid-stream). Given to
/// [`LimitedBody::on_end`](crate::LimitedBody::on_end).
pub struct BodyEnd(Option<Run>);

/// What a [`BodyEnd`] runs, given the body's trailers if it had some.
type Run = Box<dyn FnOnce(Option<&HeaderMap>) + Send + Sync>;

impl BodyEnd {
    pub(crate) fn new(run: impl FnOnce(Option<&HeaderMap>) + Send + Sync + 'static) -> BodyEnd {
        BodyEnd(Some(Box::new(run)))
    }

    /// Runs it now: the body has ended, with `trailers` if it had some.
    pub fn ended(mut self, trailers: Option<&HeaderMap>) {
        if let Some(run) = self.0.take() {
            run(trailers);
        }
    }
}

impl Drop for BodyEnd {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run(None);
        }
    }
}

impl fmt::Debug for BodyEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyEnd").field("pending", &self.0.is_some()).finish()
    }
}

/// A body that runs a [`BodyEnd`] when it ends (see there); its frames are
/// the inner body's, untouched.
#[derive(Debug)]
pub struct OnEnd<B> {
    inner: B,
    end: Option<BodyEnd>,
}

impl<B> OnEnd<B> {
    /// `inner`, running `end` when it ends.
    pub fn new(inner: B, end: BodyEnd) -> OnEnd<B> {
        OnEnd { inner, end: Some(end) }
    }

    fn finish(&mut self, trailers: Option<&HeaderMap>) {
        if let Some(end) = self.end.take() {
            end.ended(trailers);
        }
    }
}

impl<B: Body + Unpin> Body for OnEnd<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    this.finish(Some(trailers));
                } else if this.inner.is_end_stream() {
                    this.finish(None);
                }
            }
            Poll::Ready(Some(Err(_)) | None) => this.finish(None),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
