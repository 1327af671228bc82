//! The twin of the kept HTTP/1.1 connections ([`Conns`]): a route's
//! requests forwarded through them reach the upstream, and come back,
//! exactly as through hyper-util's pooled client (the general path the
//! pool replaces for HTTP/1.1 upstreams; `http2: true` routes use it).
//!
//! Two [`Target`]s of one route to one real upstream (the testkit's,
//! which echoes what it received) differ only in how they reach it; each
//! serves a loopback port as the gateway serves a route's admitted
//! requests ([`Proxy`], the client's address in the request). The same
//! requests, written byte for byte, go to both; what comes back —
//! status, every header in order but `date`, the body (a chunked one
//! decoded), with the upstream's echo of the method, URI, version and
//! every header it received (by name, each one's values in order), or
//! the length of the body it read — must be the same bytes.

use std::net::SocketAddr;
use std::path::Path;

use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use slidegate_testkit::Upstream;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tower_service::Service as _;

use super::{Clients, IDLE_TIMEOUT, Proxy, Target};
use crate::config::GatewayConfig;

/// The route's two targets: through [`Conns`](super::Conns), and through
/// hyper-util's pooled HTTP/1.1 client.
fn targets(yaml: &str) -> (Target, Target) {
    let config = GatewayConfig::from_text(Path::new("gateway.yaml"), yaml)
        .unwrap_or_else(|e| panic!("the gateway file loads: {e}"));
    let (route, settings) = (&config.routes[0], &config.settings);
    let clients = Clients::new(settings);
    let trust = slidegate_tower::ClientIp::trusting(&settings.trusted_proxies).expect("no proxies");
    let pool = Target::new(route, settings, &clients, trust.clone(), Default::default());
    let mut client = Target::new(route, settings, &clients, trust, Default::default());
    assert!(pool.upstreams.iter().all(|upstream| upstream.conns.is_some()), "an HTTP/1.1 route");
    for upstream in &mut client.upstreams {
        upstream.conns = None;
    }
    client.client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .build(super::UpstreamConnector::new(clients.connector.clone(), None, settings.connect_timeout));
    (pool, client)
}

/// Serves `target` on a loopback port: HTTP/1.1, each request carrying
/// its client's address, as the gateway's routing passes it on.
async fn front(target: Target) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let proxy = Proxy::new(target);
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            let proxy = proxy.clone();
            let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
                request.extensions_mut().insert(peer);
                proxy.clone().call(request)
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// A request as written on the wire: its head (`Host` and
/// `Connection: close` added) and its body, sent in two writes.
struct Wire {
    head: String,
    body: Vec<u8>,
}

fn wire(head: &str, body: impl Into<Vec<u8>>) -> Wire {
    Wire {
        head: head.replacen("\r\n", "\r\nhost: gateway.test\r\nconnection: close\r\n", 1),
        body: body.into(),
    }
}

/// `body` in chunks of `size` bytes, in HTTP/1.1's chunked coding.
fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut coded = Vec::new();
    for chunk in body.chunks(size) {
        coded.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        coded.extend_from_slice(chunk);
        coded.extend_from_slice(b"\r\n");
    }
    coded.extend_from_slice(b"0\r\n\r\n");
    coded
}

/// The requests both paths forward, in the same order.
fn requests() -> Vec<Wire> {
    let upload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    vec![
        wire("GET /hello?q=1&q=2 HTTP/1.1\r\naccept: */*\r\nx-user: a\r\nx-user: b\r\n\r\n", ""),
        wire("POST /form HTTP/1.1\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\n", "hello"),
        wire("POST /up/count HTTP/1.1\r\ncontent-length: 200000\r\n\r\n", upload.clone()),
        wire("PUT /up/count HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n", chunked(&upload, 4096)),
        wire("PUT /empty HTTP/1.1\r\ncontent-length: 0\r\n\r\n", ""),
        wire("DELETE /thing/7 HTTP/1.1\r\n\r\n", ""),
        wire("HEAD /hello HTTP/1.1\r\n\r\n", ""),
        wire("HEAD /big/stream/100000?sized HTTP/1.1\r\n\r\n", ""),
        wire("GET /big/stream/1000000 HTTP/1.1\r\n\r\n", ""),
        wire("GET /big/stream/1000000?sized HTTP/1.1\r\n\r\n", ""),
        wire(
            "GET /hop HTTP/1.1\r\nconnection: x-secret\r\nx-secret: 1\r\nkeep-alive: timeout=5\r\n\
             te: trailers\r\nproxy-authorization: basic eA==\r\nx-forwarded-for: 192.0.2.1\r\n\r\n",
            "",
        ),
        wire("OPTIONS /thing HTTP/1.1\r\n\r\n", ""),
    ]
}

/// The answer to `request` through the gateway at `addr`, read to the
/// connection's end, the value of `date` blanked out.
async fn answer(addr: SocketAddr, request: &Wire) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.head.as_bytes()).await.expect("write the head");
    stream.flush().await.expect("flush");
    stream.write_all(&request.body).await.expect("write the body");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read the answer");
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |at| at + 4);
    let head = String::from_utf8_lossy(&answer[..end]).into_owned();
    let head: Vec<&str> = head
        .split("\r\n")
        .map(|line| if line.to_ascii_lowercase().starts_with("date: ") { "date: -" } else { line })
        .collect();
    let chunked = head.iter().any(|line| line.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let mut text = head.join("\r\n").into_bytes();
    // How a streamed body is cut into chunks depends on how it was read.
    if chunked {
        text.extend_from_slice(&dechunked(&answer[end..]));
    } else {
        text.extend_from_slice(&answer[end..]);
    }
    text
}

/// The data of a chunked body, and its trailers.
fn dechunked(mut coded: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    loop {
        let line = coded.windows(2).position(|w| w == b"\r\n").expect("a chunk size line");
        let size = std::str::from_utf8(&coded[..line]).ok().and_then(|s| usize::from_str_radix(s, 16).ok());
        let size = size.expect("a chunk size");
        coded = &coded[line + 2..];
        if size == 0 {
            data.extend_from_slice(coded);
            return data;
        }
        data.extend_from_slice(&coded[..size]);
        coded = &coded[size + 2..];
    }
}

/// Panics with where `pool` and `client` first differ.
fn assert_same(pool: &[u8], client: &[u8], what: &str) {
    if pool == client {
        return;
    }
    let at = pool.iter().zip(client).position(|(a, b)| a != b).unwrap_or(pool.len().min(client.len()));
    let around = |bytes: &[u8]| {
        String::from_utf8_lossy(&bytes[at.saturating_sub(300)..(at + 300).min(bytes.len())]).into_owned()
    };
    panic!(
        "{what}: the pool's answer ({} bytes) and the client's ({} bytes) differ at byte {at}:\n\
         pool:   {}\nclient: {}",
        pool.len(),
        client.len(),
        around(pool),
        around(client),
    );
}

async fn forward_alike(yaml: &str, upstream: &Upstream) {
    let (pool, client) = targets(yaml);
    let (pool, client) = (front(pool).await, front(client).await);
    for request in requests() {
        let what = request.head.lines().next().unwrap_or_default().to_owned();
        let before = upstream.requests();
        let through_pool = answer(pool, &request).await;
        assert_eq!(upstream.requests(), before + 1, "{what}: the pool forwarded it once");
        let through_client = answer(client, &request).await;
        assert_eq!(upstream.requests(), before + 2, "{what}: the client forwarded it once");
        assert!(
            through_pool.starts_with(b"HTTP/1.1 200 OK\r\n"),
            "{what}: {}",
            String::from_utf8_lossy(&through_pool)
        );
        assert_same(&through_pool, &through_client, &what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_forwards_as_hyper_utils_client() {
    // Repeated and hop-by-hop headers in every answer.
    let upstream = Upstream::builder()
        .http1_only()
        .header("set-cookie", "a=1")
        .header("set-cookie", "b=2")
        .header("keep-alive", "timeout=5")
        .start();
    let addr = upstream.addr();
    forward_alike(&format!("routes:\n  - name: r\n    upstreams: [http://{addr}]\n"), &upstream).await;
    // The upstream's own host, under a base path.
    forward_alike(
        &format!("routes:\n  - name: r\n    preserve_host: false\n    upstreams: [http://{addr}/base/]\n"),
        &upstream,
    )
    .await;
}
