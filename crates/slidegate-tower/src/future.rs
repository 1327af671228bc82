//! [`ResponseFuture`]: the future a [`RateLimit`](crate::RateLimit) service returns.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The response of a rate-limited call: the limiter's decision, then
/// either the inner service's response (with quota headers) or the
/// layer's own answer. A request the limiter answers without its store
/// (a denial from the deny cache, one no key could be found for) is
/// answered at once, without a task of its own.
pub struct ResponseFuture<R, E> {
    state: State<R, E>,
}

enum State<R, E> {
    Ready(Option<Result<R, E>>),
    Deciding(Pin<Box<dyn Future<Output = Result<R, E>> + Send>>),
}

impl<R, E> ResponseFuture<R, E> {
    pub(crate) fn new(inner: impl Future<Output = Result<R, E>> + Send + 'static) -> Self {
        ResponseFuture { state: State::Deciding(Box::pin(inner)) }
    }

    pub(crate) fn ready(answer: Result<R, E>) -> Self {
        ResponseFuture { state: State::Ready(Some(answer)) }
    }
}

// Neither state is structurally pinned: the boxed future is pinned in its box.
impl<R, E> Unpin for ResponseFuture<R, E> {}

impl<R, E> Future for ResponseFuture<R, E> {
    type Output = Result<R, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            State::Deciding(inner) => inner.as_mut().poll(cx),
            State::Ready(answer) => match answer.take() {
                Some(answer) => Poll::Ready(answer),
                None => panic!("ResponseFuture polled after it completed"),
            },
        }
    }
}

impl<R, E> fmt::Debug for ResponseFuture<R, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
