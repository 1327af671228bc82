//! The reverse proxy's floor for `scripts/bench`: HTTP/1.1 passed to one
//! upstream on the gateway's own stack (hyper's server and client
//! connections, the same multi-threaded tokio runtime), with nothing else —
//! no routes, limits, forwarding headers, metrics or timeouts; each client
//! connection gets one upstream connection of its own. What forwarding
//! costs on this machine before the gateway does anything of its own.
//! Bench-only: not a product mode, never shipped.
//!
//! `cargo run --release -p slidegate-server --example proxy_floor -- 127.0.0.1:8093 127.0.0.1:8080`

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

type Body = UnsyncBoxBody<Bytes, hyper::Error>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: proxy_floor LISTEN UPSTREAM (e.g. 127.0.0.1:8093 127.0.0.1:8080)";
    let listen: SocketAddr = args.next().ok_or(usage)?.parse().map_err(|e| format!("LISTEN: {e}"))?;
    let upstream: SocketAddr = args.next().ok_or(usage)?.parse().map_err(|e| format!("UPSTREAM: {e}"))?;
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                eprintln!("proxy_floor: accept: {error}");
                continue;
            }
        };
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let Ok(sender) = connect(upstream).await else { return };
            let sender = Arc::new(Mutex::new(sender));
            let service = service_fn(move |request: Request<Incoming>| {
                let sender = Arc::clone(&sender);
                async move { Ok::<_, Infallible>(forward(&sender, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// An upstream connection, driven by a task of its own.
async fn connect(upstream: SocketAddr) -> Result<SendRequest<Incoming>, Box<dyn std::error::Error>> {
    let stream = TcpStream::connect(upstream).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// `request` sent on as it came (head and streamed body), its answer
/// passed back; 502 when the upstream connection fails.
async fn forward(sender: &Mutex<SendRequest<Incoming>>, request: Request<Incoming>) -> Response<Body> {
    let mut sender = sender.lock().await;
    let answer = match sender.ready().await {
        Ok(()) => sender.send_request(request).await,
        Err(error) => Err(error),
    };
    match answer {
        Ok(response) => response.map(BodyExt::boxed_unsync),
        Err(_) => {
            let body = Full::new(Bytes::from_static(b"bad gateway\n")).map_err(|never| match never {});
            let mut response = Response::new(body.boxed_unsync());
            *response.status_mut() = StatusCode::BAD_GATEWAY;
            response
        }
    }
}
