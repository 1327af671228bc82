//! A test upstream: a real HTTP server on a free loopback port (HTTP/1.1
//! and h2c) that answers every request `200` with `<METHOD> <path?query>`
//! as its body, and counts what it received.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running upstream; dropping it stops accepting.
#[derive(Debug)]
pub struct Upstream {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    accepting: JoinHandle<()>,
}

impl Upstream {
    /// Starts one on `127.0.0.1:0`.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound (the test cannot run).
    pub async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let addr = listener.local_addr().expect("its address");
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
                        let body = format!("{} {target}", request.method());
                        async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Upstream { addr, requests, accepting }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many requests it has received.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}
