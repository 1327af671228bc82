//! Connections to upstreams: TCP, then TLS for an `https://` upstream (its
//! route's [`UpstreamTls`]: whom to trust, the client certificate, the
//! name asked for — the upstream's host unless set).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tower_service::Service;

use super::body::BoxError;
use crate::config::UpstreamTls;

/// Connects to a route's upstreams.
#[derive(Clone)]
pub(crate) struct UpstreamConnector {
    tcp: HttpConnector,
    /// For `https://` upstreams: the connector and the name to ask for
    /// instead of the host.
    tls: Option<(TlsConnector, Option<ServerName<'static>>)>,
}

impl UpstreamConnector {
    /// Over `tcp` (which must take any scheme), with `tls` for `https://`
    /// upstreams.
    pub(crate) fn new(tcp: HttpConnector, tls: Option<&UpstreamTls>) -> UpstreamConnector {
        let tls = tls.map(|tls| (TlsConnector::from(Arc::clone(&tls.config)), tls.server_name.clone()));
        UpstreamConnector { tcp, tls }
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
        let stream = tls.connect(name, tcp.into_inner()).await?;
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
