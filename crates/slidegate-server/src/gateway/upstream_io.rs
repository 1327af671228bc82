//! Connections to upstreams: TCP, then TLS for an `https://` upstream (its
//! route's [`UpstreamTls`]: whom to trust, the client certificate, the
//! name asked for — the upstream's host unless set).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tower_service::Service;

use super::body::{BoxError, Upload};
use crate::config::{GatewaySettings, UpstreamTls};

/// The pooled client of HTTP/2 upstreams.
pub(crate) type HttpClient = Client<UpstreamConnector, Upload>;

/// How long an upstream connection may stay idle before it is closed.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How one configuration reaches its upstreams: the TCP connector of
/// every connection, and the pooled client of HTTP/2 without TLS (h2c)
/// for routes with `http2: true` (HTTP/1.1 upstreams keep their own
/// connections, `Conns`; a route with TLS to HTTP/2 upstreams has its own
/// client).
#[derive(Clone)]
pub(crate) struct Clients {
    pub(crate) connector: HttpConnector,
    pub(crate) http2: HttpClient,
}

impl Clients {
    pub(crate) fn new(settings: &GatewaySettings) -> Clients {
        let mut connector = HttpConnector::new();
        // `https://` upstreams too: the TLS is the route's connector's.
        connector.enforce_http(false);
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(settings.connect_timeout));
        connector.set_keepalive(Some(Duration::from_secs(60)));
        let http2 = http2_client(UpstreamConnector::new(connector.clone(), None, settings.connect_timeout));
        Clients { connector, http2 }
    }
}

/// A pooled HTTP/2 client connecting by `connector`.
pub(crate) fn http2_client(connector: UpstreamConnector) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .http2_only(true)
        .build(connector)
}

/// Connects to a route's upstreams.
#[derive(Clone)]
pub(crate) struct UpstreamConnector {
    tcp: HttpConnector,
    /// How long the TLS handshake may take (the TCP connect has its own).
    handshake_timeout: Duration,
    /// For `https://` upstreams: the connector and the name to ask for
    /// instead of the host.
    tls: Option<(TlsConnector, Option<ServerName<'static>>)>,
}

impl UpstreamConnector {
    /// Over `tcp` (which must take any scheme), with `tls` for `https://`
    /// upstreams.
    pub(crate) fn new(
        tcp: HttpConnector,
        tls: Option<&UpstreamTls>,
        handshake_timeout: Duration,
    ) -> UpstreamConnector {
        let tls = tls.map(|tls| (TlsConnector::from(Arc::clone(&tls.config)), tls.server_name.clone()));
        UpstreamConnector { tcp, handshake_timeout, tls }
    }

    /// A connection to `uri`'s authority (TLS for `https`).
    pub(crate) async fn connect(&self, uri: Uri) -> Result<UpstreamIo, BoxError> {
        let https = uri.scheme_str() == Some("https");
        let host = uri.host().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned());
        let tcp = self.tcp.clone().call(uri).await?;
        if !https {
            return Ok(UpstreamIo::Plain(tcp));
        }
        let Some((tls, name)) = &self.tls else {
            return Err("an https:// upstream without its route's TLS".into());
        };
        let name = match (name, host) {
            (Some(name), _) => name.clone(),
            (None, Some(host)) => ServerName::try_from(host)?,
            (None, None) => return Err("an https:// upstream without a host".into()),
        };
        let handshake = tokio::time::timeout(self.handshake_timeout, tls.connect(name, tcp.into_inner()));
        let stream = handshake
            .await
            .map_err(|_| "the upstream's TLS handshake was not done within connect_timeout")??;
        Ok(UpstreamIo::Tls(Box::new(TokioIo::new(stream))))
    }
}

impl Service<Uri> for UpstreamConnector {
    type Response = UpstreamIo;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<UpstreamIo, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move { connector.connect(uri).await })
    }
}

/// A connection to an upstream.
pub(crate) enum UpstreamIo {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for UpstreamIo {
    fn connected(&self) -> Connected {
        match self {
            UpstreamIo::Plain(tcp) => tcp.connected(),
            UpstreamIo::Tls(tls) => {
                let (tcp, session) = tls.inner().get_ref();
                let connected = tcp.connected();
                if session.alpn_protocol() == Some(b"h2") { connected.negotiated_h2() } else { connected }
            }
        }
    }
}

impl Read for UpstreamIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_read(cx, buf),
            UpstreamIo::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for UpstreamIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_write(cx, buf),
            UpstreamIo::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_flush(cx),
            UpstreamIo::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_shutdown(cx),
            UpstreamIo::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            UpstreamIo::Plain(io) => io.is_write_vectored(),
            UpstreamIo::Tls(io) => io.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            UpstreamIo::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}
