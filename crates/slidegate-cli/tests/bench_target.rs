//! `slidegate bench --target` against real services: the `slidegate` binary
//! serving its rules over gRPC and HTTP, and as a gateway in front of the
//! testkit's upstream in this process. A closed-loop run over a few keys is
//! counted exactly (the sliding window admits `limit` per key, no more, no
//! less); errors the service answers are counted by kind, not fatal; bad
//! usage is refused with a message that says what is wrong.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use common::{collect_stderr, failure, slidegate, success};
use serde_json::Value;
use slidegate_testkit::Upstream;

const BIN: &str = env!("CARGO_BIN_EXE_slidegate");

/// 5 a minute per user: a run of a few seconds never sees the window move.
const RULES: &str = "
domain: test
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 5
";

/// How long a socket read of the test may block (a bound on hangs, not a
/// performance threshold).
const IO_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// The services driven.

/// A `slidegate serve` process, killed on drop; its stderr is collected
/// (and the pipe kept drained).
struct Service {
    child: Child,
    /// What the benchmark drives: the RLS gRPC port (`--rules`) or the
    /// proxy (`--gateway`).
    port: u16,
    /// The HTTP API (`/readyz`, `/v1/check`).
    http: u16,
    stderr: Arc<Mutex<String>>,
}

impl Service {
    /// `slidegate serve --rules RULES` on the memory store.
    fn rules(rules: &Path) -> Service {
        let mut command = Command::new(BIN);
        command.arg("serve").arg("--rules").arg(rules).args([
            "--store",
            "memory",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--no-watch",
        ]);
        Service::start(command, "Envoy RLS v3 (gRPC) on ")
    }

    /// `slidegate serve --rules RULES` on the memory store, on given ports
    /// (a server restarted where the previous one was).
    fn rules_on(rules: &Path, grpc: u16, http: u16) -> Service {
        let mut command = Command::new(BIN);
        command.arg("serve").arg("--rules").arg(rules).args(["--store", "memory", "--no-watch"]);
        command.arg("--grpc").arg(local(grpc)).arg("--http").arg(local(http));
        Service::start(command, "Envoy RLS v3 (gRPC) on ")
    }

    /// `slidegate serve --gateway FILE`.
    fn gateway(file: &Path) -> Service {
        let mut command = Command::new(BIN);
        command.arg("serve").arg("--gateway").arg(file).args([
            "--gateway-addr",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "off",
            "--no-watch",
        ]);
        Service::start(command, "gateway on ")
    }

    /// Starts `command` and waits until it is ready. Its listeners bind
    /// port 0 and are found in the addresses `serve` announces (the line
    /// `slidegate: {driven}…`, and the HTTP API's): a port picked
    /// free beforehand could be taken meanwhile by another test's
    /// benchmark, whose client sockets draw from the same ephemeral range.
    fn start(mut command: Command, driven: &str) -> Service {
        // The counts are what is tested: a store call past the default 50 ms
        // deadline on a loaded machine would be answered by the local
        // fallback instead of the count.
        let mut child = command
            .args(["--deadline", "5s"])
            .env_remove("SLIDEGATE_RULES")
            .env_remove("SLIDEGATE_GATEWAY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn slidegate serve");
        let stderr = collect_stderr(&mut child);
        let mut service = Service { child, port: 0, http: 0, stderr };
        for _ in 0..400 {
            let announced = service.stderr();
            if let (Some(port), Some(http)) =
                (announced_port(&announced, driven), announced_port(&announced, "HTTP API on http://"))
                && ready(http)
            {
                (service.port, service.http) = (port, http);
                return service;
            }
            if let Some(status) = service.child.try_wait().expect("wait") {
                panic!("slidegate serve exited ({status}) before it was ready:\n{}", service.stderr());
            }
            thread::sleep(Duration::from_millis(50));
        }
        panic!("slidegate serve did not become ready:\n{}", service.stderr());
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port of the address `serve` announced in its log line
/// `… slidegate: {what}<address>`, once it has.
fn announced_port(stderr: &str, what: &str) -> Option<u16> {
    let line = stderr.lines().find_map(|line| line.split_once("slidegate: ")?.1.strip_prefix(what))?;
    line.split_whitespace().next()?.parse::<std::net::SocketAddr>().ok().map(|address| address.port())
}

fn local(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Whether `GET /readyz` on `port` answers 200.
fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    if stream.set_read_timeout(Some(IO_TIMEOUT)).is_err() {
        return false;
    }
    let asked = write!(stream, "GET /readyz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    asked.is_ok() && stream.read_to_string(&mut response).is_ok() && response.starts_with("HTTP/1.1 200")
}

/// Writes the rules file into `dir`.
fn rules_file(dir: &Path) -> PathBuf {
    let path = dir.join("rules.yaml");
    std::fs::write(&path, RULES).expect("write the rules");
    path
}

// ---------------------------------------------------------------------------
// The benchmark.

/// `slidegate bench ARGS --json`, which must succeed: its report.
fn bench(args: &[&str]) -> Value {
    let args: Vec<&str> = ["bench"].iter().chain(args).chain(&["--json"]).copied().collect();
    let out = success(&args, "");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"))
}

fn count(report: &Value, field: &str) -> u64 {
    report[field].as_u64().unwrap_or_else(|| panic!("{field} missing in {report}"))
}

/// The report's allowed, denied and errors.
fn outcome(report: &Value) -> (u64, u64, u64) {
    (count(report, "allowed"), count(report, "denied"), count(report, "errors"))
}

/// The requests of the report's per-second timeline, added up.
fn timeline_requests(report: &Value) -> u64 {
    let seconds = report["seconds"].as_array().unwrap_or_else(|| panic!("no seconds in {report}"));
    assert!(!seconds.is_empty(), "{report}");
    seconds.iter().map(|second| count(second, "requests")).sum()
}

/// 30 requests round robin over 3 keys, 4 at a time: 10 per key.
const EXACT_RUN: [&str; 8] =
    ["--keys", "3", "--key-order", "round-robin", "--requests", "30", "--concurrency", "4"];

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn grpc_against_serve_admits_exactly_the_limit_per_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::rules(&rules_file(dir.path()));
    let target = format!("grpc://{}", local(service.port));
    let pid = service.pid().to_string();
    let mut args = vec!["--target", &target, "--domain", "test", "--descriptor", "user={key}", "--pid", &pid];
    args.extend(EXACT_RUN);
    let report = bench(&args);

    assert_eq!(outcome(&report), (15, 15, 0), "5 of each key's 10: {report}");
    assert_eq!(count(&report, "requests"), 30);
    assert_eq!((&report["protocol"], &report["target"]), (&Value::from("grpc"), &Value::from(target)));
    assert_eq!(report["errors_by_kind"], serde_json::json!({}));
    assert_eq!(report["stopped_at_time_limit"], false);
    assert_eq!(timeline_requests(&report), 30, "{report}");
    let latency = &report["latency_us"];
    assert!(count(latency, "p50") <= count(latency, "p99") && count(latency, "p99") <= count(latency, "max"));

    let processes = report["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 1, "{report}");
    let process = &processes[0];
    assert_eq!(count(process, "pid"), u64::from(service.pid()));
    assert_eq!(process["name"], "slidegate");
    assert!(process["cpu_secs"].as_f64().is_some_and(|cpu| cpu >= 0.0), "{process}");
    assert!(count(process, "rss_bytes") > 0, "{process}");
    assert!(count(process, "peak_rss_bytes") >= count(process, "rss_bytes"), "{process}");
}

#[test]
fn http_check_against_serve_admits_exactly_the_limit_and_shares_it_with_grpc() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::rules(&rules_file(dir.path()));
    let http = format!("http://{}/v1/check", local(service.http));
    let mut args = vec!["--target", &http, "--domain", "test", "--descriptor", "user=h{key}"];
    args.extend(EXACT_RUN);
    let report = bench(&args);
    assert_eq!(outcome(&report), (15, 15, 0), "5 of each key's 10: {report}");
    assert_eq!(report["protocol"], "http");
    assert_eq!(timeline_requests(&report), 30, "{report}");

    // The same keys over gRPC: the two APIs decide on one count, used up.
    let grpc = format!("grpc://{}", local(service.port));
    let mut args = vec!["--target", &grpc, "--domain", "test", "--descriptor", "user=h{key}"];
    args.extend(EXACT_RUN);
    assert_eq!(outcome(&bench(&args)), (0, 30, 0));
}

/// The JSON check over HTTP/2 without TLS: the same requests on a few shared
/// connections, the same exact count as over HTTP/1.1.
#[test]
fn h2c_check_against_serve_admits_exactly_the_limit_over_shared_connections() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::rules(&rules_file(dir.path()));
    let h2c = format!("h2c://{}/v1/check", local(service.http));
    let pid = service.pid().to_string();
    let mut args = vec![
        "--target",
        &h2c,
        "--domain",
        "test",
        "--descriptor",
        "user=k{key}",
        "--connections",
        "2",
        "--pid",
        &pid,
    ];
    args.extend(EXACT_RUN);
    let report = bench(&args);
    assert_eq!(outcome(&report), (15, 15, 0), "5 of each key's 10: {report}");
    assert_eq!((&report["protocol"], &report["target"]), (&Value::from("h2c"), &Value::from(h2c.clone())));
    assert_eq!(report["connections"], 2, "{report}");
    assert_eq!(timeline_requests(&report), 30, "{report}");

    // Over HTTP/1.1 the same keys are used up: one count behind both.
    let http = format!("http://{}/v1/check", local(service.http));
    let mut args = vec!["--target", &http, "--domain", "test", "--descriptor", "user=k{key}"];
    args.extend(EXACT_RUN);
    assert_eq!(outcome(&bench(&args)), (0, 30, 0));

    // An unknown path is an error counted by its status, not a decision.
    let missing = format!("h2c://{}/v1/nothing", local(service.http));
    let report = bench(&["--target", &missing, "--requests", "3", "--concurrency", "1"]);
    assert_eq!(outcome(&report), (0, 0, 3), "{report}");
    assert_eq!(report["errors_by_kind"]["404"], 3, "{report}");
}

#[test]
fn hits_addend_charges_every_request_that_much() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::rules(&rules_file(dir.path()));
    // A cost of 5 is the whole limit: each key's first request is allowed,
    // its second denied.
    let run = ["--hits-addend", "5", "--keys", "3", "--key-order", "round-robin", "--requests", "6"];
    let grpc = format!("grpc://{}", local(service.port));
    let mut args = vec!["--target", &grpc, "--domain", "test", "--descriptor", "user=g{key}"];
    args.extend(run);
    let report = bench(&args);
    assert_eq!(outcome(&report), (3, 3, 0), "{report}");
    assert_eq!(report["hits_addend"], 5);

    let http = format!("http://{}/v1/check", local(service.http));
    let mut args = vec!["--target", &http, "--domain", "test", "--descriptor", "user=j{key}"];
    args.extend(run);
    assert_eq!(outcome(&bench(&args)), (3, 3, 0));
}

#[test]
fn through_the_gateway_2xx_is_allowed_and_429_denied() {
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        format!(
            "routes:\n  - name: api\n    upstreams: [http://127.0.0.1:{}]\n    limits:\n      \
             - {{ key: \"header:x-user\", requests_per_unit: 5, unit: minute }}\n",
            upstream.addr().port()
        ),
    )
    .expect("write the gateway file");
    let gateway = Service::gateway(&file);
    let target = format!("http://{}/items", local(gateway.port));
    let mut args = vec!["--target", &target, "--header", "x-user: {key}"];
    args.extend(EXACT_RUN);
    let report = bench(&args);

    assert_eq!(outcome(&report), (15, 15, 0), "5 of each key's 10: {report}\n{}", gateway.stderr());
    assert_eq!(report["protocol"], "http");
    assert!(report["domain"].is_null(), "a GET, not a JSON check: {report}");
    assert_eq!(upstream.requests(), 15, "only the allowed requests reach the upstream");
}

#[test]
fn errors_the_service_answers_are_counted_by_kind_not_fatal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::rules(&rules_file(dir.path()));

    // An entry value longer than the service accepts (4096 bytes).
    let long = format!("user={}{{key}}", "x".repeat(5000));
    let grpc = format!("grpc://{}", local(service.port));
    let args = [
        "--target",
        &grpc,
        "--domain",
        "test",
        "--descriptor",
        &long,
        "--requests",
        "20",
        "--concurrency",
        "2",
    ];
    let report = bench(&args);
    assert_eq!(outcome(&report), (0, 0, 20), "{report}");
    assert_eq!(report["errors_by_kind"], serde_json::json!({"INVALID_ARGUMENT": 20}));
    let message = report["error_messages"]["INVALID_ARGUMENT"].as_str().expect("the first message");
    assert!(message.contains("4096"), "the service's reason: {message}");
    let errors: u64 = report["seconds"].as_array().expect("seconds").iter().map(|s| count(s, "errors")).sum();
    assert_eq!(errors, 20, "{report}");

    // A path nothing answers.
    let missing = format!("http://{}/v1/nowhere", local(service.http));
    let args = ["--target", &missing, "--header", "x-user: {key}", "--requests", "20", "--concurrency", "2"];
    let report = bench(&args);
    assert_eq!(outcome(&report), (0, 0, 20), "{report}");
    assert_eq!(report["errors_by_kind"], serde_json::json!({"404": 20}));
}

#[test]
fn open_loop_offers_the_rate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let service = Service::rules(&rules_file(dir.path()));
    let target = format!("grpc://{}", local(service.port));
    let args = [
        "--target",
        &target,
        "--domain",
        "test",
        "--descriptor",
        "user={key}",
        "--rate",
        "200",
        "--duration",
        "1s",
        "--concurrency",
        "8",
    ];
    let report = bench(&args);
    let requests = count(&report, "requests");
    assert!((150..=250).contains(&requests), "about 200 in a second at 200/s: {report}");
    assert_eq!(report["offered_per_sec"], 200.0);
    assert_eq!(count(&report, "errors"), 0, "{report}");
    assert_eq!(count(&report, "allowed") + count(&report, "denied"), requests);
    assert_eq!(timeline_requests(&report), requests, "{report}");
}

#[test]
fn bad_usage_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Nothing listens on port 1.
    let nowhere = "grpc://127.0.0.1:1";
    let refused = |args: &[&str], says: &[&str]| {
        let args: Vec<&str> = ["bench"].iter().chain(args).chain(&["--requests", "5"]).copied().collect();
        let stderr = failure(&args, "");
        for fragment in says {
            assert!(stderr.contains(fragment), "slidegate {args:?} should say {fragment:?}: {stderr}");
        }
    };

    refused(
        &["--target", nowhere, "--domain", "test", "--descriptor", "user={key}"],
        &["cannot connect to grpc://127.0.0.1:1"],
    );
    refused(&["--target", nowhere, "--descriptor", "user={key}"], &["a grpc:// target needs --domain"]);
    refused(
        &["--target", nowhere, "--domain", "test"],
        &["a grpc:// target needs at least one --descriptor"],
    );
    refused(&["--descriptor", "user={key}"], &["--descriptor only applies with --target"]);
    refused(
        &[
            "--target",
            nowhere,
            "--domain",
            "test",
            "--descriptor",
            "user={key}",
            "--limit",
            "5",
            "--window",
            "1s",
        ],
        &["--limit/--window/--algorithm", "not --target"],
    );
    refused(&["--target", "https://127.0.0.1:1/"], &["TLS targets are not supported"]);
    refused(&["--target", "h2c://127.0.0.1:1/v1/check"], &["cannot connect to h2c://127.0.0.1:1/v1/check"]);
    refused(
        &["--target", "h2c://127.0.0.1:1/v1/check", "--descriptor", "user={key}"],
        &["--descriptor on an http:// or h2c:// target (a JSON check) needs --domain"],
    );
    refused(
        &["--target", "http://127.0.0.1:1/x", "--connections", "2"],
        &["--connections applies to grpc://"],
    );
    // The flags are checked before anything is connected to: a service
    // that listens changes none of these answers.
    let service = Service::rules(&rules_file(dir.path()));
    let grpc = format!("grpc://{}", local(service.port));
    refused(&["--target", &grpc, "--descriptor", "user={key}"], &["a grpc:// target needs --domain"]);
    let http = format!("http://{}/v1/check", local(service.http));
    refused(&["--target", &http, "--connections", "2"], &["--connections applies to grpc://"]);

    // A usage error of clap's own is exit status 2, the others 1.
    let tls = slidegate(&["bench", "--target", "https://127.0.0.1:1/", "--requests", "5"], "");
    assert_eq!(tls.status.code(), Some(2));
    let unreachable = slidegate(
        &["bench", "--target", nowhere, "--domain", "t", "--descriptor", "u=1", "--requests", "5"],
        "",
    );
    assert_eq!(unreachable.status.code(), Some(1));
}

/// A server restarted mid-run: the gRPC requests fail while it is down, and
/// the connections are opened again once it is back.
#[test]
fn grpc_connections_are_reopened_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = rules_file(dir.path());
    let first = Service::rules(&rules);
    let (grpc, http) = (first.port, first.http);
    let target = format!("grpc://{}", local(grpc));
    let run = Command::new(BIN)
        .args(["bench", "--json", "--target", &target, "--domain", "test", "--descriptor", "user={key}"])
        .args([
            "--keys",
            "1000",
            "--rate",
            "200",
            "--duration",
            "4s",
            "--concurrency",
            "8",
            "--connections",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn slidegate bench");
    thread::sleep(Duration::from_millis(800));
    drop(first);
    let _second = Service::rules_on(&rules, grpc, http);
    let output = run.wait_with_output().expect("bench output");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert!(count(&report, "errors") > 0, "requests failed while the server was down: {report}");
    let seconds = report["seconds"].as_array().expect("timeline");
    let last = seconds.last().expect("a last second");
    assert!(last["requests"].as_u64().unwrap_or(0) > 0, "{report}");
    assert_eq!(last["errors"], 0, "the last second ran on reopened connections: {report}");
}
