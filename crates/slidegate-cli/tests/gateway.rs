//! `slidegate serve --gateway` as users run it: the real binary in front of
//! a real upstream (the testkit's, in this process), real sockets,
//! real Redis. Two gateways sharing one Redis admit exactly the limit
//! between them; gigabyte bodies stream both ways in flat memory; SIGHUP
//! reloads the routes and a broken file keeps them; `--check` lists every
//! problem; SIGTERM lets a request in flight finish and exits 0.
//!
//! The clients' HTTP is written by hand over `std::net` (a few dozen
//! lines): the tests see exactly what goes over the wire, and need no HTTP
//! library.

mod common;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use slidegate_testkit::{RedisServer, Upstream, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_slidegate");

/// How long any socket operation of a test may block before it fails (a
/// bound on hangs, not a performance threshold).
const IO_TIMEOUT: Duration = Duration::from_secs(300);

/// One gibibyte: the bodies streamed through the gateway.
const GIB: u64 = 1 << 30;

/// The most the gateway's resident set may ever reach while streaming a
/// gibibyte: a body held whole would blow it.
const PEAK_RSS_BOUND_KIB: u64 = 200 * 1024;

// ---------------------------------------------------------------------------
// HTTP/1.1 over std::net.

/// A response's head: its status line and its headers.
#[derive(Debug)]
struct Head {
    line: String,
    /// Names in lowercase.
    headers: Vec<(String, String)>,
}

impl Head {
    /// The next head on `reader`, or `None` at the end of the stream.
    fn read(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the head ended early"));
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, format!("bad header {header:?}"))
            })?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        Ok(Some(Head { line: line.trim_end().to_owned(), headers }))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// A response's status.
    fn status(&self) -> u16 {
        self.line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }
}

/// Reads the body of the response `head` into `sink` (chunked,
/// `Content-Length`, or until the connection closes); its length.
fn read_body(reader: &mut impl BufRead, head: &Head, sink: &mut impl Write) -> io::Result<u64> {
    let eof = || io::Error::new(io::ErrorKind::UnexpectedEof, "the body ended early");
    let chunked =
        head.header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        let mut total = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Err(eof());
            }
            let size = line.trim().split(';').next().unwrap_or("");
            let size = u64::from_str_radix(size, 16).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("bad chunk size {line:?}"))
            })?;
            if size == 0 {
                // Trailers, up to the empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        return Ok(total);
                    }
                }
            }
            if io::copy(&mut reader.by_ref().take(size), sink)? != size {
                return Err(eof());
            }
            total += size;
            line.clear();
            reader.read_line(&mut line)?;
        }
    }
    match head.header("content-length") {
        Some(length) => {
            let length: u64 = length
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?;
            if io::copy(&mut reader.by_ref().take(length), sink)? != length {
                return Err(eof());
            }
            Ok(length)
        }
        None => io::copy(reader, sink),
    }
}

/// A response, its body read whole (small ones only).
#[derive(Debug)]
struct Reply {
    head: Head,
    body: String,
}

impl Reply {
    fn status(&self) -> u16 {
        self.head.status()
    }
}

fn connect(port: u16) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

/// A bodiless request on a connection of its own.
fn send(port: u16, method: &str, path: &str) -> io::Result<Reply> {
    let mut stream = connect(port)?;
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n")?;
    read_reply(stream)
}

fn read_reply(stream: TcpStream) -> io::Result<Reply> {
    let mut reader = BufReader::new(stream);
    let head = Head::read(&mut reader)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no response"))?;
    let mut body = Vec::new();
    read_body(&mut reader, &head, &mut body)?;
    Ok(Reply { head, body: String::from_utf8_lossy(&body).into_owned() })
}

fn get(port: u16, path: &str) -> Reply {
    send(port, "GET", path).unwrap_or_else(|e| panic!("GET {path} on :{port}: {e}"))
}

// ---------------------------------------------------------------------------
// The upstream: the testkit's, in this process (it echoes as JSON, counts
// bodies at `/count`, streams at `/stream/<n>`, waits at `/sleep/<ms>`).

/// A field of the upstream's echo in `reply` (not an echo: none).
fn echoed(reply: &Reply, field: &str) -> Option<String> {
    let echo: serde_json::Value = serde_json::from_str(&reply.body).ok()?;
    echo[field].as_str().map(str::to_owned)
}

// ---------------------------------------------------------------------------
// The gateway process.

/// A `slidegate serve --gateway` process, killed on drop; its stderr is
/// collected (and the pipe kept drained).
struct Gateway {
    child: Child,
    /// The proxy.
    port: u16,
    /// The HTTP API.
    http: u16,
    stderr: Arc<Mutex<String>>,
}

impl Gateway {
    fn start(file: &Path, extra: &[&str]) -> Gateway {
        let (port, http) = (free_port().expect("port"), free_port().expect("port"));
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--gateway")
            .arg(file)
            .args(["--gateway-addr", &format!("127.0.0.1:{port}"), "--http", &format!("127.0.0.1:{http}")])
            .args(["--grpc", "off"])
            .args(extra)
            .env_remove("SLIDEGATE_RULES")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn slidegate serve --gateway");
        let stderr = common::collect_stderr(&mut child);
        let mut gateway = Gateway { child, port, http, stderr };
        for _ in 0..200 {
            if gateway.api("/readyz").is_some_and(|r| r.status() == 200) {
                return gateway;
            }
            if let Some(status) = gateway.child.try_wait().expect("wait") {
                panic!("slidegate serve exited ({status}) before it was ready:\n{}", gateway.stderr());
            }
            thread::sleep(Duration::from_millis(50));
        }
        panic!("slidegate serve did not become ready:\n{}", gateway.stderr());
    }

    /// A GET on the HTTP API, or `None` when nothing listens.
    fn api(&self, path: &str) -> Option<Reply> {
        send(self.http, "GET", path).ok()
    }

    /// `/v1/status`, parsed.
    fn status(&self) -> serde_json::Value {
        let reply = self.api("/v1/status").expect("/v1/status");
        serde_json::from_str(&reply.body).expect("/v1/status is JSON")
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").arg(signal).arg(self.child.id().to_string()).status().expect("kill");
        assert!(status.success(), "kill {signal}");
    }

    /// The most memory the process has held resident (`VmHWM`), in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("/proc");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    /// Waits (boundedly) for the process to exit.
    fn wait_exit(&mut self) -> ExitStatus {
        for _ in 0..1200 {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            thread::sleep(Duration::from_millis(25));
        }
        panic!("slidegate serve did not exit:\n{}", self.stderr());
    }

    fn terminate(&mut self) -> ExitStatus {
        self.signal("-TERM");
        self.wait_exit()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `done` (at most 10 s) until it holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not happen");
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn two_gateways_sharing_one_redis_admit_exactly_the_limit() {
    let redis = RedisServer::start().expect("redis-server");
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        format!(
            "routes:\n  - name: api\n    upstreams: [http://127.0.0.1:{}]\n    limits:\n      \
             - {{ key: global, requests_per_unit: 50, unit: minute }}\n",
            upstream.addr().port()
        ),
    )
    .expect("write");
    let prefix = format!("t:gateway:{}:", std::process::id());
    // A generous store deadline: the count is what is tested, and a store
    // call timed out on a loaded machine would be answered by each process's
    // local fallback instead of the shared count.
    let args = ["--store", &redis.url(), "--prefix", &prefix, "--deadline", "5s"];
    let (mut a, mut b) = (Gateway::start(&file, &args), Gateway::start(&file, &args));

    // 200 requests at once, half on each gateway, each on its own
    // connection, for a limit of 50.
    let callers = 200;
    let start = Arc::new(Barrier::new(callers));
    let threads: Vec<_> = (0..callers)
        .map(|i| {
            let port = if i % 2 == 0 { a.port } else { b.port };
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let reply = send(port, "GET", &format!("/items/{i}")).expect("request");
                (reply.status(), echoed(&reply, "upstream"))
            })
        })
        .collect();
    let replies: Vec<(u16, Option<String>)> =
        threads.into_iter().map(|t| t.join().expect("caller")).collect();
    let ok = replies.iter().filter(|(status, _)| *status == 200).count();
    let limited = replies.iter().filter(|(status, _)| *status == 429).count();
    let others: Vec<_> = replies.iter().filter(|(status, _)| !matches!(status, 200 | 429)).collect();
    assert!(others.is_empty(), "only 200 and 429: {others:?}");
    assert_eq!((ok, limited), (50, 150), "exactly the limit, across both gateways");
    assert!(replies.iter().filter(|(s, _)| *s == 200).all(|(_, echo)| echo.as_deref() == Some("upstream")));
    assert_eq!(upstream.requests(), 50, "only admitted requests reach the upstream");

    assert!(a.terminate().success(), "SIGTERM drains and exits 0");
    assert!(b.terminate().success());
}

/// Streams a `length`-byte chunked body, generated as it goes, to `path`;
/// the response.
fn upload(port: u16, path: &str, length: u64) -> io::Result<Reply> {
    let mut stream = connect(port)?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: gateway.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )?;
    let block = vec![b'y'; 256 * 1024];
    let mut left = length;
    while left > 0 {
        let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
        write!(stream, "{n:x}\r\n")?;
        stream.write_all(&block[..n])?;
        stream.write_all(b"\r\n")?;
        left -= n as u64;
    }
    stream.write_all(b"0\r\n\r\n")?;
    read_reply(stream)
}

#[test]
fn gigabyte_bodies_stream_both_ways_in_flat_memory() {
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    // A response timeout far above any transfer here: the memory is tested.
    std::fs::write(
        &file,
        format!(
            "response_timeout: 1h\nroutes:\n  - name: files\n    upstreams: [http://127.0.0.1:{}]\n    \
             limits:\n      - {{ key: client_ip, requests_per_unit: 100, unit: minute }}\n",
            upstream.addr().port()
        ),
    )
    .expect("write");
    let mut gateway = Gateway::start(&file, &[]);
    let at_start = gateway.peak_rss_kib();

    // Up: the client streams 1 GiB; the upstream counts what arrives.
    let reply = upload(gateway.port, "/count", GIB).expect("upload");
    assert_eq!(reply.status(), 200, "{reply:?}");
    assert_eq!(reply.body, GIB.to_string(), "every byte reached the upstream");
    let after_upload = gateway.peak_rss_kib();
    assert!(
        after_upload < PEAK_RSS_BOUND_KIB,
        "peak RSS {after_upload} KiB after a 1 GiB upload (at start: {at_start} KiB)"
    );

    // Down: the upstream streams 1 GiB; the client counts what arrives.
    let mut stream = connect(gateway.port).expect("connect");
    write!(stream, "GET /stream/{GIB}?sized HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut reader = BufReader::with_capacity(256 * 1024, stream);
    let head = Head::read(&mut reader).expect("head").expect("a response");
    assert_eq!(head.status(), 200, "{head:?}");
    let received = read_body(&mut reader, &head, &mut io::sink()).expect("body");
    assert_eq!(received, GIB, "every byte reached the client");
    let after_download = gateway.peak_rss_kib();
    assert!(
        after_download < PEAK_RSS_BOUND_KIB,
        "peak RSS {after_download} KiB after a 1 GiB download (at start: {at_start} KiB)"
    );

    assert!(gateway.terminate().success());
}

/// A route `api` to `upstream`, its requests limited per path.
fn reload_file(upstream: u16, limit: &str) -> String {
    format!(
        "routes:\n  - name: api\n    upstreams: [http://127.0.0.1:{upstream}]\n    limits:\n      \
         - {{ key: path, requests_per_unit: {limit}, unit: minute }}\n"
    )
}

#[test]
fn sighup_reloads_the_routes_and_a_broken_file_keeps_them() {
    let (first, second) =
        (Upstream::builder().name("first").start(), Upstream::builder().name("second").start());
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, reload_file(first.addr().port(), "100")).expect("write");
    // Not watching: only the signal reloads.
    let mut gateway = Gateway::start(&file, &["--no-watch"]);
    let reply = get(gateway.port, "/before");
    assert_eq!((reply.status(), echoed(&reply, "upstream").as_deref()), (200, Some("first")));
    let hash = gateway.status()["gateway"]["hash"].clone();

    // Another upstream and a lower limit.
    std::fs::write(&file, reload_file(second.addr().port(), "3")).expect("write");
    gateway.signal("-HUP");
    eventually("the reload", || gateway.status()["gateway"]["hash"] != hash);
    let replies: Vec<Reply> = (0..5).map(|_| get(gateway.port, "/limited")).collect();
    let statuses: Vec<u16> = replies.iter().map(Reply::status).collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429], "the new limit");
    assert!(
        replies[..3].iter().all(|r| echoed(r, "upstream").as_deref() == Some("second")),
        "the new upstream: {replies:?}"
    );
    assert_eq!(first.requests(), 1, "nothing more went to the old upstream");

    // A broken file (which also names the old upstream): refused, the
    // routes in force stay, and the problem is reported where it is.
    std::fs::write(&file, reload_file(first.addr().port(), "lots")).expect("write");
    let reloaded = gateway.status()["gateway"]["hash"].clone();
    gateway.signal("-HUP");
    eventually("the refused reload", || gateway.status()["last_reload"]["result"] == "error");
    let status = gateway.status();
    assert_eq!(status["gateway"]["hash"], reloaded, "the routes in force stay: {status}");
    let errors = status["last_reload"]["errors"].to_string();
    assert!(errors.contains("gateway.yaml:5:"), "the error names its line: {errors}");
    assert!(errors.contains("requests_per_unit"), "{errors}");
    // The log line was written before the status changed; its reader
    // thread may not have collected it yet.
    eventually("the error on stderr", || {
        let stderr = gateway.stderr();
        stderr.contains("reload refused") && stderr.contains("gateway.yaml:5:")
    });
    let reply = get(gateway.port, "/after");
    assert_eq!(
        (reply.status(), echoed(&reply, "upstream").as_deref()),
        (200, Some("second")),
        "still proxied as before"
    );
    assert_eq!(get(gateway.port, "/limited").status(), 429, "still limited as before");
    assert_eq!(first.requests(), 1);

    assert!(gateway.terminate().success());
}

#[test]
fn rewriting_the_file_reloads_the_routes() {
    let (first, second) =
        (Upstream::builder().name("first").start(), Upstream::builder().name("second").start());
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, reload_file(first.addr().port(), "1000")).expect("write");
    let mut gateway = Gateway::start(&file, &[]);
    assert_eq!(echoed(&get(gateway.port, "/"), "upstream").as_deref(), Some("first"));
    // Replaced as editors and ConfigMaps do: a new file renamed over it.
    let next = dir.path().join(".gateway.yaml.new");
    std::fs::write(&next, reload_file(second.addr().port(), "1000")).expect("write");
    std::fs::rename(&next, &file).expect("rename");
    eventually("the watched reload", || {
        echoed(&get(gateway.port, "/"), "upstream").as_deref() == Some("second")
    });
    assert_eq!(gateway.status()["last_reload"]["result"], "ok");
    assert!(gateway.terminate().success());
}

#[test]
fn check_lists_every_problem_of_the_gateway_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "routes:\n  - name: api\n    upstreams: [ftp://127.0.0.1:9000]\n    limits:\n      \
         - { key: nobody, requests_per_unit: 5, unit: minute }\n  - name: second\n    path_prefix: nope\n    \
         upstreams: [http://127.0.0.1:9000]\n",
    )
    .expect("write");
    let failed = Command::new(BIN).args(["serve", "--check", "--gateway"]).arg(&bad).output().expect("run");
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("3 problems"), "{stderr}");
    assert!(
        stderr.contains("bad.yaml:3:17: upstream `ftp://127.0.0.1:9000` must start with http://"),
        "{stderr}"
    );
    assert!(stderr.contains("bad.yaml:5:16: unknown key `nobody`"), "{stderr}");
    assert!(stderr.contains("bad.yaml:7:18: `path_prefix: nope` must be a path"), "{stderr}");

    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        "routes:\n  - name: api\n    upstreams: [http://127.0.0.1:9000]\n  - name: login\n    \
         path_prefix: /login\n    upstreams: [http://127.0.0.1:9001]\n",
    )
    .expect("write");
    let ok = Command::new(BIN).args(["serve", "--check", "--gateway"]).arg(&good).output().expect("run");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(stdout.contains("good.yaml: ok (routes: api, login, hash "), "{stdout}");
}

#[test]
fn serve_without_rules_or_gateway_is_a_usage_error_naming_both() {
    let output = Command::new(BIN)
        .args(["serve", "--grpc", "off", "--http", "off"])
        .env_remove("SLIDEGATE_RULES")
        .env_remove("SLIDEGATE_GATEWAY")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Either flag will do: the message must not say `--rules` is required.
    assert!(stderr.contains("--rules") && stderr.contains("--gateway"), "{stderr}");
}

#[test]
fn sigterm_lets_a_request_in_flight_finish_and_exits_0() {
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        format!("routes:\n  - name: api\n    upstreams: [http://127.0.0.1:{}]\n", upstream.addr().port()),
    )
    .expect("write");
    let mut gateway = Gateway::start(&file, &["--grace", "60s"]);
    let port = gateway.port;
    let caller = thread::spawn(move || send(port, "GET", "/sleep/2000"));
    // The request is in flight once the upstream has it (and takes 2 s to
    // answer it).
    eventually("the slow request reaching the upstream", || upstream.requests() == 1);
    gateway.signal("-TERM");
    let reply = caller.join().expect("caller").expect("the request in flight is answered");
    assert_eq!((reply.status(), echoed(&reply, "uri").as_deref()), (200, Some("/sleep/2000")));
    let status = gateway.wait_exit();
    assert!(status.success(), "exits 0 after draining: {status}\n{}", gateway.stderr());
    assert!(gateway.stderr().contains("shutting down"), "{}", gateway.stderr());
}

#[test]
fn a_slow_upload_is_not_an_upstream_timeout() {
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        format!(
            "response_timeout: 1s\nroutes:\n  - name: api\n    upstreams: [http://127.0.0.1:{}]\n",
            upstream.addr().port()
        ),
    )
    .expect("write");
    let mut gateway = Gateway::start(&file, &[]);
    // The client takes three times the response timeout to send its body
    // (on a slow link, say); the upstream answers as soon as it has it. The
    // timeout is the upstream's to answer, not the client's to upload.
    let mut stream = connect(gateway.port).expect("connect");
    let sent = (|| -> io::Result<()> {
        write!(
            stream,
            "POST /count HTTP/1.1\r\nHost: gateway.test\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n"
        )?;
        for _ in 0..6 {
            stream.write_all(b"5\r\nhello\r\n")?;
            thread::sleep(Duration::from_millis(500));
        }
        stream.write_all(b"0\r\n\r\n")
    })();
    let reply = read_reply(stream);
    assert!(sent.is_ok(), "the gateway cut the upload ({sent:?}) and answered {reply:?}");
    let reply = reply.expect("reply");
    assert_eq!((reply.status(), reply.body.as_str()), (200, "30"), "{reply:?}");
    assert!(gateway.terminate().success());
}
