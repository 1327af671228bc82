//! [`Conns`]: the HTTP/1.1 connections to one upstream kept open between
//! requests. A request takes the most recently used idle one (or opens
//! one), and its [`Lease`] gives it back when the answer's body has been
//! read to its end. Nothing runs per request but a lock, a check that the
//! connection is ready, and the send — hyper-util's pooled client also
//! spawns a task per HTTP/1.1 request to wait for its connection to become
//! idle again, which cost the gateway about a tenth of its throughput.
//!
//! HTTP/2 upstreams (`http2: true` routes) keep hyper-util's client: one
//! connection carries many requests at once there.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Uri};
use http_body::Body as _;
use http_body_util::{Either, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};

use super::body::{BoxError, Upload};
use super::upstream_io::UpstreamConnector;

/// Idle connections kept per upstream at most; more are closed. As many as
/// requests a busy gateway has in flight to one upstream, so that a steady
/// load does not open and close connections (each closed one waits out
/// TIME_WAIT on this side).
const MAX_IDLE: usize = 1024;

/// A kept connection idle at least this long may be closed by its
/// upstream (its keep-alive timeout: 5 s for Node.js, Apache and uvicorn,
/// 2 s for gunicorn) just as a request goes out on it. A request without a
/// body and with an idempotent method sent on one is then sent once more,
/// on a new connection, as nginx does: a copy of its head is kept until
/// the answer comes. Under load connections idle for far less, and no
/// copy is made.
const STALE_AFTER: Duration = Duration::from_millis(250);

/// Why an upstream gave no answer.
pub(crate) enum Failure {
    /// No connection could be opened: the next upstream may be tried.
    Connect(BoxError),
    /// The request was sent (or partly) and the exchange failed.
    Failed(BoxError),
}

/// One upstream's HTTP/1.1 connections.
pub(crate) struct Conns {
    /// `http(s)://authority`, what the connector connects to.
    address: Uri,
    connector: UpstreamConnector,
    /// Most recently used last.
    idle: Mutex<VecDeque<Idle>>,
    /// How long a connection may stay idle before it is closed.
    idle_timeout: Duration,
    /// How many idle ones are kept at most ([`MAX_IDLE`]).
    max_idle: usize,
    /// Whether the task closing connections idle too long has started
    /// (with the first connection kept).
    reaping: AtomicBool,
}

struct Idle {
    since: Instant,
    sender: SendRequest<Upload>,
}

impl Conns {
    pub(crate) fn new(address: Uri, connector: UpstreamConnector, idle_timeout: Duration) -> Conns {
        Conns {
            address,
            connector,
            idle: Mutex::default(),
            idle_timeout,
            max_idle: MAX_IDLE,
            reaping: AtomicBool::new(false),
        }
    }

    /// Sends `request` (origin-form, with its `Host`) on an idle
    /// connection or a new one. A kept connection found closed before the
    /// request went out is skipped, and the request sent on another.
    ///
    /// A request without a body and with an idempotent method, sent on a
    /// connection kept idle for [`STALE_AFTER`] or more that then closes
    /// without an answer, is sent once more on a new connection.
    pub(crate) async fn send(self: &Arc<Self>, mut request: Request<Upload>) -> Result<Answer, Failure> {
        let mut fresh = false;
        loop {
            let (mut sender, idled) = match if fresh { None } else { self.take() } {
                Some((sender, idled)) => (sender, Some(idled)),
                // Boxed: the handshake's state is large, and rarely needed.
                None => (Box::pin(self.open()).await?, None),
            };
            if idled.is_some() && sender.ready().await.is_err() {
                continue;
            }
            let again = idled.filter(|idled| *idled >= STALE_AFTER).and_then(|_| resendable(&request));
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let lease = Some(Lease { conns: Arc::clone(self), sender: Some(sender) });
                    return Ok(Answer { response, lease });
                }
                Err(mut error) => match (error.take_message(), again) {
                    (Some(unsent), _) if idled.is_some() => request = unsent,
                    (_, Some(copy)) if closed_unanswered(error.error()) => {
                        request = copy;
                        fresh = true;
                    }
                    _ => return Err(Failure::Failed(error.into_error().into())),
                },
            }
        }
    }

    /// The most recently used idle connection still open, and how long it
    /// has been idle.
    fn take(&self) -> Option<(SendRequest<Upload>, Duration)> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(Idle { since, sender }) = idle.pop_back() {
            let idled = since.elapsed();
            if idled > self.idle_timeout {
                // The others have waited longer still.
                idle.clear();
                return None;
            }
            if !sender.is_closed() {
                return Some((sender, idled));
            }
        }
        None
    }

    /// Keeps `sender` for the next request; closes those idle too long.
    fn put(self: &Arc<Self>, sender: SendRequest<Upload>) {
        if sender.is_closed() {
            return;
        }
        if !self.reaping.swap(true, Ordering::Relaxed) {
            self.reap(Arc::downgrade(self));
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        expire(&mut idle, self.idle_timeout);
        if idle.len() < self.max_idle {
            idle.push_back(Idle { since: Instant::now(), sender });
        }
    }

    /// Closes the connections idle too long every half of the idle
    /// timeout, also when no request comes to do it; ends with `conns`.
    fn reap(&self, conns: Weak<Conns>) {
        let every = (self.idle_timeout / 2).max(Duration::from_millis(10));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(conns) = conns.upgrade() else { return };
                expire(&mut conns.idle.lock().unwrap_or_else(PoisonError::into_inner), conns.idle_timeout);
            }
        });
    }

    /// A new connection, driven by a task of its own.
    async fn open(&self) -> Result<SendRequest<Upload>, Failure> {
        let io = self.connector.connect(self.address.clone()).await.map_err(Failure::Connect)?;
        let (sender, connection) =
            http1::Builder::new().handshake(io).await.map_err(|e| Failure::Connect(e.into()))?;
        tokio::spawn(async move {
            if let Err(error) = connection.with_upgrades().await {
                tracing::debug!(target: "slidegate", %error, "upstream connection ended");
            }
        });
        Ok(sender)
    }
}

/// A copy of `request` to send again if it is not answered: only of one
/// without a body and with an idempotent method (no upload is consumed by
/// sending, and sending it twice changes nothing more than once).
fn resendable(request: &Request<Upload>) -> Option<Request<Upload>> {
    if !request.method().is_idempotent() || !request.body().is_end_stream() {
        return None;
    }
    let (empty, _) = Upload::new(Either::Right(Empty::new()));
    let mut copy = Request::new(empty);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    Some(copy)
}

/// Whether the upstream closed the connection instead of answering: with
/// a FIN after reading the request, or a reset for the request it did not
/// read (it had closed the connection as the request came).
fn closed_unanswered(error: &hyper::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    error.is_incomplete_message()
        || std::error::Error::source(error)
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .is_some_and(|io| matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted))
}

/// Closes the connections of `idle` idle longer than `timeout` (the oldest
/// are first).
fn expire(idle: &mut VecDeque<Idle>, timeout: Duration) {
    while idle.front().is_some_and(|oldest| oldest.since.elapsed() > timeout) {
        idle.pop_front();
    }
}

/// A connection lent to one request: given back when the answer has been
/// read to its end, closed when dropped before.
pub(crate) struct Lease {
    conns: Arc<Conns>,
    sender: Option<SendRequest<Upload>>,
}

impl Lease {
    fn give_back(&mut self) {
        if let Some(sender) = self.sender.take() {
            self.conns.put(sender);
        }
    }

    /// `body`, giving the connection back once it has been read to its end.
    pub(crate) fn returning(mut self, body: Incoming) -> Returning {
        if body.is_end_stream() {
            self.give_back();
            return Returning { body, lease: None };
        }
        Returning { body, lease: Some(self) }
    }
}

/// An upstream's answer body that gives its connection back at its end.
pub(crate) struct Returning {
    body: Incoming,
    lease: Option<Lease>,
}

impl http_body::Body for Returning {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.give_back(),
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.give_back(),
            // A failed body leaves the connection in an unknown state.
            Poll::Ready(Some(Err(_))) => this.lease = None,
            _ => {}
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

impl Returning {
    fn give_back(&mut self) {
        if let Some(mut lease) = self.lease.take() {
            lease.give_back();
        }
    }
}

/// An upstream's response, and the lease on its kept connection.
pub(crate) struct Answer {
    pub(crate) response: http::Response<Incoming>,
    /// `None` through the HTTP/2 client, or when the connection cannot
    /// take another request (its request body was still being sent).
    pub(crate) lease: Option<Lease>,
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt as _;
    use hyper_util::rt::TokioIo;
    use tokio::net::TcpListener;

    use super::*;

    fn plain() -> UpstreamConnector {
        UpstreamConnector::new(
            hyper_util::client::legacy::connect::HttpConnector::new(),
            None,
            Duration::from_secs(5),
        )
    }

    /// An HTTP/1.1 server answering `ok` on 127.0.0.1, counting its connections.
    async fn server() -> (Uri, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address: Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(|_| async {
                        Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                            Bytes::from_static(b"ok"),
                        )))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (address, accepted)
    }

    async fn get(conns: &Arc<Conns>, address: &Uri) -> Bytes {
        let (body, _) = Upload::new(Either::Right(Empty::new()));
        let mut request = Request::new(body);
        *request.uri_mut() = Uri::from_static("/");
        let host = address.authority().unwrap().as_str().parse().unwrap();
        request.headers_mut().insert(http::header::HOST, host);
        let Ok(Answer { response, lease }) = conns.send(request).await else { panic!("no answer") };
        let body = lease.unwrap().returning(response.into_body());
        body.collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn a_connection_read_to_its_end_is_kept_until_it_has_idled_too_long() {
        let (address, accepted) = server().await;
        let idle = Duration::from_millis(100);
        let conns = Arc::new(Conns::new(address.clone(), plain(), idle));
        assert_eq!(get(&conns, &address).await, "ok");
        assert_eq!(get(&conns, &address).await, "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "the second request took the kept connection");
        assert_eq!(conns.idle.lock().unwrap().len(), 1);
        // Closed by the reaper, with no request to find it too old.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !conns.idle.lock().unwrap().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(idle / 4).await;
        }
        assert!(conns.idle.lock().unwrap().is_empty(), "idle too long: closed");
        assert!(conns.take().is_none());
        assert_eq!(get(&conns, &address).await, "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn no_more_than_the_cap_are_kept() {
        let (address, _) = server().await;
        let conns = Arc::new(Conns { max_idle: 4, ..Conns::new(address, plain(), Duration::from_secs(60)) });
        for _ in 0..7 {
            let sender = conns.open().await.unwrap_or_else(|_| panic!("connect"));
            conns.put(sender);
        }
        assert_eq!(conns.idle.lock().unwrap().len(), 4);
    }
}
