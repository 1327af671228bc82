//! The listeners' accept loop: each accepted connection served (HTTP/1 or
//! HTTP/2, with protocol switches) in a task of the service's set, closed
//! when it sends nothing in time, and asked to finish at shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use slidegate::telemetry::{LogThrottle, THROTTLED_NOTE};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::connection_io::{HeaderBlocks, Unvectored};
use crate::gateway::{ConnectionSlot, Tasks};

/// Completes once `stop` says so.
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How one accepted connection is served.
pub(crate) struct Connection<S> {
    pub(crate) service: S,
    pub(crate) builder: auto::Builder<TokioExecutor>,
    /// Its place under a per-address cap, held while it is open.
    pub(crate) slot: Option<Arc<ConnectionSlot>>,
    /// The TLS it speaks (the gateway's, with a `tls:` block), if any.
    pub(crate) tls: Option<TlsAcceptor>,
}

/// An API's connections: all served alike, uncapped; a request's head
/// over HTTP/1.1 must arrive within `header_timeout`.
pub(crate) fn api<S: Clone>(
    app: S,
    header_timeout: Duration,
) -> impl FnMut(SocketAddr) -> Option<Connection<S>> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
    move |_| Some(Connection { service: app.clone(), builder: builder.clone(), slot: None, tls: None })
}

/// Accepts connections on `listener` until `stop`, each served (HTTP/1 or
/// HTTP/2, which gRPC speaks, with protocol switches such as WebSocket)
/// as `make` says — or closed at once when it says `None` — in a task of
/// `connections`; then asks them to finish gracefully. A connection that
/// sends nothing within `header_timeout` is closed, and so is one whose
/// HTTP/2 header block does not end within it ([`HeaderBlocks`]).
pub(crate) async fn accept<M, S, B>(
    listener: TcpListener,
    mut make: M,
    mut stop: watch::Receiver<bool>,
    connections: Tasks,
    header_timeout: Duration,
) where
    M: FnMut(SocketAddr) -> Option<Connection<S>>,
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let graceful = GracefulShutdown::new();
    let (accept_failed, started) = (LogThrottle::new(), std::time::Instant::now());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors or a connection reset before it
                    // was accepted: keep serving the others (and say so
                    // once per interval, not a hundred times a second).
                    let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    if let Some(held_back) = accept_failed.pass(now, LogThrottle::EVERY_MS) {
                        tracing::warn!(
                            target: "slidegate",
                            %error,
                            held_back,
                            "accept failed{THROTTLED_NOTE}"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let Some(Connection { service, builder, slot, tls }) = make(peer) else {
            tracing::debug!(target: "slidegate", %peer, "connection refused: too many from this address");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (watcher, mut closing) = (graceful.watcher(), stop.clone());
        let mut set = lock(&connections);
        // Finished connections leave the set as new ones come.
        while set.try_join_next().is_some() {}
        set.spawn(async move {
            let _slot = slot;
            // hyper waits for the first bytes (HTTP/1 or HTTP/2?) without
            // a timeout of its own: a client that connects and says
            // nothing would hold the connection until shutdown.
            // (Peeked: `readable` may answer before anything arrived.)
            let mut first = [0; 1];
            tokio::select! {
                waited = tokio::time::timeout(header_timeout, stream.peek(&mut first)) => {
                    if waited.is_err() {
                        tracing::debug!(target: "slidegate", %peer, "connection closed: nothing sent in time");
                        return;
                    }
                }
                () = stopped(&mut closing) => return,
            }
            let service = TowerToHyperService::new(service);
            let Some(tls) = tls else {
                return serve(stream, &builder, service, watcher, header_timeout).await;
            };
            // The handshake, bounded as a request's head is.
            let handshake = tokio::select! {
                done = tokio::time::timeout(header_timeout, tls.accept(stream)) => done,
                () = stopped(&mut closing) => return,
            };
            match handshake {
                Ok(Ok(stream)) => serve(stream, &builder, service, watcher, header_timeout).await,
                Ok(Err(error)) => tracing::debug!(target: "slidegate", %peer, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(target: "slidegate", %peer, "connection closed: TLS handshake not done in time"),
            }
        });
    }
    drop(listener);
    // Signals every connection; they end in their own tasks.
    tokio::spawn(graceful.shutdown());
}

/// Serves HTTP (1 or 2, with protocol switches) on `io` until it closes
/// or the graceful shutdown `watcher` ends it.
async fn serve<IO, S, B>(
    io: IO,
    builder: &auto::Builder<TokioExecutor>,
    service: TowerToHyperService<S>,
    watcher: Watcher,
    header_timeout: Duration,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = Unvectored(TokioIo::new(HeaderBlocks::new(io, header_timeout)));
    let connection = builder.serve_connection_with_upgrades(io, service).into_owned();
    let _ = watcher.watch(connection).await;
}
