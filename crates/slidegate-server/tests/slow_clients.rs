//! Clients that start a request and never finish it, on every listener:
//! an HTTP/1.1 body that stalls, a body declared larger than any the API
//! takes, and an HTTP/2 header block that never ends. Each is answered or
//! closed within the header timeout, never held open.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RULES: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n";

const HEADER_TIMEOUT: Duration = Duration::from_millis(500);

/// Longer than anything here may take: a connection still open then was
/// held open.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// Reads what the server sends until it closes the connection; how long
/// that took.
async fn until_closed(stream: &mut TcpStream) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout(HANG_GUARD, stream.read(&mut chunk)).await {
            Err(_) => panic!("the connection was held open: {:?}", String::from_utf8_lossy(&answer)),
            Ok(Ok(0) | Err(_)) => return (answer, started.elapsed()),
            Ok(Ok(n)) => answer.extend_from_slice(&chunk[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_and_closed() {
    let service = support::start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |config| {
        config.header_timeout = HEADER_TIMEOUT;
    })
    .await;
    // The checks answered before the router, and a route of the router.
    for path in ["/v1/check", "/json", "/v1/state"] {
        let method = if path == "/v1/state" { "DELETE" } else { "POST" };
        let mut stream = TcpStream::connect(service.http).await.expect("connect");
        let head = format!("{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{{\"dom");
        stream.write_all(head.as_bytes()).await.expect("write");
        let (answer, took) = until_closed(&mut stream).await;
        let answer = String::from_utf8_lossy(&answer);
        if path == "/v1/state" {
            // No admin token: no such route, whatever the body.
            assert!(answer.starts_with("HTTP/1.1 4"), "{path}: {answer}");
        } else {
            assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
            assert!(answer.contains("did not arrive"), "{path}: {answer}");
        }
        assert!(took < HANG_GUARD / 2, "{path}: closed after {took:?}");
    }
    // The service goes on answering.
    let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u"}]}]}"#;
    let (status, _, answer) = support::post_json(&service.url("/v1/check"), body).await;
    assert_eq!((status, &answer["allowed"]), (200, &serde_json::json!(true)));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_too_large_is_413_before_it_is_sent() {
    let service = support::start(RULES).await;
    for path in ["/v1/check", "/v1/peek", "/json", "/v1/status"] {
        let mut stream = TcpStream::connect(service.http).await.expect("connect");
        let head = format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000000000\r\n\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        // Nothing of the body is sent: the answer must not wait for it.
        let (answer, took) = until_closed(&mut stream).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(took < HANG_GUARD / 2, "{path}: answered after {took:?}");
    }
    service.stop().await;
}

/// The HTTP/2 connection preface, an empty SETTINGS frame, and a HEADERS
/// frame of stream 1 without END_HEADERS: a header block begun and never
/// ended.
fn unended_header_block() -> Vec<u8> {
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    // `:method: GET` (HPACK static index 2), then nothing more.
    bytes.extend_from_slice(&[0, 0, 1, 0x1, 0x1, 0, 0, 0, 1, 0x82]);
    bytes
}

/// Starts a gateway too (its own listener), and returns every listener's address.
async fn every_listener()
-> (Vec<(&'static str, SocketAddr)>, tokio::sync::oneshot::Sender<()>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    let gateway = dir.path().join("gateway.yaml");
    support::write(&rules, RULES);
    support::write(&gateway, "routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n");
    let mut config = ServerConfig::new(&rules, ServiceStore::Memory(MemoryStore::new()));
    config.gateway = Some(gateway);
    config.header_timeout = HEADER_TIMEOUT;
    let bind = async || TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let (grpc, http, proxy) = (bind().await, bind().await, bind().await);
    let addrs = vec![
        ("gRPC", grpc.local_addr().expect("addr")),
        ("HTTP API", http.local_addr().expect("addr")),
        ("gateway", proxy.local_addr().expect("addr")),
    ];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listeners = Listeners::new(Some(grpc), Some(http)).with_gateway(proxy);
    tokio::spawn(serve(config, listeners, async {
        let _ = stopped.await;
    }));
    (addrs, stop, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_header_block_that_never_ends_is_closed() {
    let (listeners, stop, _dir) = every_listener().await;
    for (name, addr) in listeners {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(&unended_header_block()).await.expect("write");
        let (_, took) = until_closed(&mut stream).await;
        assert!(took >= HEADER_TIMEOUT / 2, "{name}: closed after {took:?}, before the timeout");
        assert!(took < HANG_GUARD / 2, "{name}: closed only after {took:?}");
    }
    let _ = stop.send(());
}
