//! A test upstream: a real HTTP server on a free loopback port, on a
//! thread and runtime of its own (so async and blocking tests use it
//! alike), that answers as [`Upstream`] says and counts what it received.

mod answer;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use hyper::Request;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::sync::oneshot;

use answer::Answers;

/// A running upstream; dropping it stops it and closes its port and
/// every connection it has.
///
/// It answers every request `200` with an echo of what it received (a
/// JSON object), except a few paths that read the body, stream a large
/// answer or wait first; it accepts WebSocket handshakes and echoes the
/// messages. Every answer carries `x-upstream: <name>`.
///
/// | path ends with | answer |
/// |---|---|
/// | `/count` | reads the body; its length in bytes, in decimal |
/// | `/stream/<n>` | `n` bytes in 64 KiB frames, byte `i` being [`Upstream::stream_byte`]`(i)`: chunked, or with `content-length` when the query is `sized` |
/// | `/sleep/<ms>` | waits `ms` milliseconds, then echoes |
/// | `/usage/<n>` | `x-usage-tokens: n` (an LLM server's token count); with `trailer` in the query as a trailer after the body; `frames=<k>&every=<ms>`: the body in `k` frames `ms` apart |
/// | anything else | `{"upstream": name, "method": "GET", "uri": "/path?query", "version": "HTTP/1.1", "headers": {"name": ["value", …]}}` |
///
/// A WebSocket handshake (HTTP/1.1 `upgrade: websocket`, any path) is
/// accepted: the upstream sends its name as a text message, then sends
/// back every text and binary message it receives.
///
/// ```
/// let upstream = slidegate_testkit::Upstream::builder().name("a").start();
/// println!("proxy to http://{}", upstream.addr());
/// assert_eq!(upstream.requests(), 0);
/// ```
#[derive(Debug)]
pub struct Upstream {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    serving: Option<JoinHandle<()>>,
}

/// Which HTTP versions an upstream speaks (both unless a test needs to
/// show which one a proxy chose).
#[derive(Debug, Clone, Copy)]
enum Versions {
    Both,
    Http1,
    Http2,
}

/// How an [`Upstream`] is set up; [`UpstreamBuilder::start`] starts it.
#[derive(Debug, Clone)]
pub struct UpstreamBuilder {
    name: HeaderValue,
    versions: Versions,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Upstream {
    /// Starts one with the defaults: named `upstream`, speaking HTTP/1.1
    /// and h2c (HTTP/2 without TLS).
    ///
    /// # Panics
    ///
    /// As [`UpstreamBuilder::start`].
    pub fn start() -> Upstream {
        Upstream::builder().start()
    }

    /// A builder, with the defaults of [`Upstream::start`].
    pub fn builder() -> UpstreamBuilder {
        UpstreamBuilder {
            name: HeaderValue::from_static("upstream"),
            versions: Versions::Both,
            headers: Vec::new(),
        }
    }

    /// Where it listens (`127.0.0.1`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many requests it has received (counted as they arrive, before
    /// they are answered; a WebSocket handshake is one).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// How many connections it has accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The byte at offset `at` of a `/stream/<n>` answer: each 64 KiB
    /// frame is one value, and the values cycle through 251 (a prime, so
    /// a frame lost, repeated or reordered shows).
    pub fn stream_byte(at: u64) -> u8 {
        answer::stream_byte(at)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Its runtime ends with its thread, and every connection with it.
        if let Some(serving) = self.serving.take() {
            let _ = serving.join();
        }
    }
}

impl UpstreamBuilder {
    /// The name it echoes and sends in `x-upstream` (default `upstream`),
    /// so that a test behind a proxy sees which upstream answered.
    ///
    /// # Panics
    ///
    /// When `name` cannot be a header value.
    #[must_use]
    pub fn name(mut self, name: &str) -> UpstreamBuilder {
        self.name = HeaderValue::from_str(name).unwrap_or_else(|_| panic!("{name:?} is no header value"));
        self
    }

    /// Speaks HTTP/1.1 only (a client's HTTP/2 preface is an error).
    #[must_use]
    pub fn http1_only(mut self) -> UpstreamBuilder {
        self.versions = Versions::Http1;
        self
    }

    /// Speaks HTTP/2 only, without TLS (h2c with prior knowledge).
    #[must_use]
    pub fn http2_only(mut self) -> UpstreamBuilder {
        self.versions = Versions::Http2;
        self
    }

    /// Adds `name: value` to every answer, as given (hop-by-hop headers
    /// included: what a proxy must not pass on).
    ///
    /// # Panics
    ///
    /// When `name` or `value` cannot be a header's.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> UpstreamBuilder {
        let header =
            HeaderName::from_bytes(name.as_bytes()).unwrap_or_else(|_| panic!("header name {name:?}"));
        let value = HeaderValue::from_str(value).unwrap_or_else(|_| panic!("header value {value:?}"));
        self.headers.push((header, value));
        self
    }

    /// Starts it on `127.0.0.1:0`, on a thread of its own.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound or no thread started (the test
    /// cannot run).
    pub fn start(self) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("its address");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let requests = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = oneshot::channel();
        let counters = (Arc::clone(&requests), Arc::clone(&connections));
        let serving = std::thread::Builder::new()
            .name(format!("upstream-{}", addr.port()))
            .spawn(move || self.serve(listener, counters, stopped))
            .expect("start the upstream's thread");
        Upstream { addr, requests, connections, stop: Some(stop), serving: Some(serving) }
    }

    /// Accepts and serves connections until `stopped`.
    fn serve(
        self,
        listener: TcpListener,
        (requests, connections): (Arc<AtomicUsize>, Arc<AtomicUsize>),
        stopped: oneshot::Receiver<()>,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the upstream's runtime");
        let versions = self.versions;
        let answers = Arc::new(Answers { name: self.name, headers: self.headers });
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (requests, answers) = (Arc::clone(&requests), Arc::clone(&answers));
                    tokio::spawn(async move {
                        let service = service_fn(move |request: Request<Incoming>| {
                            requests.fetch_add(1, Ordering::SeqCst);
                            let answers = Arc::clone(&answers);
                            async move { answers.answer(request).await }
                        });
                        let builder = auto::Builder::new(TokioExecutor::new());
                        let builder = match versions {
                            Versions::Both => builder,
                            Versions::Http1 => builder.http1_only(),
                            Versions::Http2 => builder.http2_only(),
                        };
                        let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await;
                    });
                }
            });
            // Dropped (or its sender gone): the runtime's end drops every task.
            let _ = stopped.await;
        });
    }
}
