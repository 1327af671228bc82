//! `slidegate serve` as users run it: the real binary, real Redis, a real
//! gRPC client. Two services sharing one Redis admit exactly the limit
//! between them; `--check` lists every problem; SIGTERM drains and exits 0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use slidegate_testkit::{Pki, RedisServer, TlsServer, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_slidegate");

const RULES: &str = "
domain: shared
descriptors:
  - key: api
    rate_limit:
      unit: hour
      requests_per_unit: 50
";

/// A `slidegate serve` process, killed on drop.
struct Serve {
    child: Child,
    grpc: u16,
    http: u16,
}

impl Serve {
    fn start(rules: &Path, extra: &[&str]) -> Serve {
        let (grpc, http) = (free_port().expect("port"), free_port().expect("port"));
        let child = Command::new(BIN)
            .arg("serve")
            .arg("--rules")
            .arg(rules)
            .args(["--grpc", &format!("127.0.0.1:{grpc}"), "--http", &format!("127.0.0.1:{http}")])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn slidegate serve");
        let serve = Serve { child, grpc, http };
        for _ in 0..200 {
            if serve.get("/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
                return serve;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("slidegate serve did not become ready");
    }

    /// A plain HTTP/1.1 GET over a socket: the response, or `None` when
    /// nothing listens.
    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.http)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        Some(response)
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let status =
            Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().expect("kill");
        assert!(status.success());
        for _ in 0..400 {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("slidegate serve did not exit after SIGTERM");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request() -> RateLimitRequest {
    RateLimitRequest {
        domain: "shared".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry { key: "api".into(), value: "v1".into() }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_sharing_one_redis_admit_exactly_the_limit() {
    let redis = RedisServer::start().expect("redis-server");
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    let prefix = format!("t:serve:{}:", std::process::id());
    // A deadline no loaded test machine misses: a store call abandoned at
    // it would be answered by the failure policy, which admits locally.
    let args = ["--store", &redis.url(), "--prefix", &prefix, "--deadline", "2s"];
    let (mut a, mut b) = (Serve::start(&rules, &args), Serve::start(&rules, &args));

    // 64 concurrent callers, half on each service, 4 requests each: 256
    // requests for a limit of 50.
    let mut callers = Vec::new();
    for i in 0..64 {
        let port = if i % 2 == 0 { a.grpc } else { b.grpc };
        callers.push(tokio::spawn(async move {
            let mut client =
                RateLimitServiceClient::connect(format!("http://127.0.0.1:{port}")).await.expect("connect");
            let mut admitted = 0;
            for _ in 0..4 {
                let answer = client.should_rate_limit(request()).await.expect("answer").into_inner();
                admitted += usize::from(answer.overall_code == 1);
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for caller in callers {
        admitted += caller.await.expect("caller");
    }
    assert_eq!(admitted, 50, "exactly the limit, across both services");

    assert!(a.terminate().success(), "SIGTERM drains and exits 0");
    assert!(b.terminate().success());
}

#[test]
fn check_lists_every_problem_and_exits_1() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, RULES).expect("write");
    let ok = Command::new(BIN).args(["serve", "--check", "--rules"]).arg(&good).output().expect("run");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("domains: shared"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  \
         - key: b\n    rate_limit: {unit: second, requests_per_unit: -3}\n",
    )
    .expect("write");
    let failed = Command::new(BIN).args(["serve", "--check", "--rules"]).arg(&bad).output().expect("run");
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("2 problems"), "{stderr}");
    assert!(stderr.contains("bad.yaml:4:") && stderr.contains("unknown unit `fortnight`"), "{stderr}");
    assert!(stderr.contains("bad.yaml:6:") && stderr.contains("0 or more, got -3"), "{stderr}");
}

#[test]
fn runs_on_the_embedded_store_without_redis() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    let mut serve = Serve::start(&rules, &[]);
    let status = serve.get("/v1/status").expect("status");
    assert!(status.contains("\"kind\":\"memory\""), "{status}");
    assert!(serve.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_from_redis_over_tls_as_an_acl_user() {
    let dir = tempfile::tempdir().expect("temp dir");
    let redis = TlsServer::start(dir.path(), &Pki::new()).expect("redis-server with TLS");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    let ca = redis.ca_file.to_string_lossy().into_owned();
    let mut serve = Serve::start(&rules, &["--store", &redis.url(), "--tls-ca-file", &ca]);
    let mut client =
        RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", serve.grpc)).await.expect("connect");
    let answer = client.should_rate_limit(request()).await.expect("answer").into_inner();
    assert_eq!((answer.overall_code, answer.statuses[0].limit_remaining), (1, 49));
    let status = serve.get("/v1/status").expect("status");
    assert!(status.contains("\"kind\":\"redis\""), "{status}");
    assert!(serve.terminate().success());

    // A CA that did not sign the server's certificate: `serve` refuses to
    // start, saying why, instead of hanging.
    let other = dir.path().join("other.pem");
    std::fs::write(&other, Pki::new().ca_pem).expect("write");
    let output = Command::new(BIN)
        .arg("serve")
        .arg("--rules")
        .arg(&rules)
        .args(["--store", &redis.url(), "--tls-ca-file"])
        .arg(&other)
        .args(["--grpc", "off", "--http", "off"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "no password in messages: {stderr}");
}

/// An admin token is sent in an HTTP header: one of other characters
/// than printable ASCII could never be given, and one of 14 Cyrillic
/// letters (26 bytes) is short however its bytes are counted.
#[test]
fn an_admin_token_no_client_could_send_stops_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    let token = dir.path().join("token");
    for (text, says) in [
        ("ключ-ключ-ключ-ключ\n", "printable ASCII"),
        ("a token with spaces", "printable ASCII"),
        ("short-token", "11 characters; at least 16"),
    ] {
        std::fs::write(&token, text).expect("write");
        let output = Command::new(BIN)
            .arg("serve")
            .arg("--rules")
            .arg(&rules)
            .arg("--admin-token-file")
            .arg(&token)
            .args(["--grpc", "off", "--http", "off"])
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(1), "{text}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&token.display().to_string()) && stderr.contains(says), "{text}: {stderr}");
    }
}

/// A plain HTTP/1.1 POST of `body` over a socket: the response.
fn post(port: u16, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

/// Redis down when `serve` starts (both restarted together): it starts,
/// answers degraded at once, says so, and uses Redis once it is up.
#[test]
fn starts_without_its_redis_and_uses_it_once_up() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    let mut redis = RedisServer::start().expect("redis-server");
    redis.kill();
    let mut serve = Serve::start(&rules, &["--store", &redis.url()]);
    let check = r#"{"domain":"shared","descriptors":[{"entries":[{"key":"api","value":"x"}]}]}"#;
    let answer = post(serve.http, "/v1/check", check);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("\"degraded\":true"), "{answer}");
    let status = serve.get("/v1/status").expect("status");
    assert!(status.contains("\"connected\":false") && status.contains("Connection refused"), "{status}");
    redis.restart().expect("restart");
    let back = std::time::Instant::now();
    loop {
        if post(serve.http, "/v1/check", check).contains("\"degraded\":false") {
            break;
        }
        assert!(back.elapsed() < Duration::from_secs(5), "Redis not used 5 s after it came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(serve.get("/v1/status").expect("status").contains("\"connected\":true"));
    assert!(serve.terminate().success());
}

#[test]
fn sighup_reloads_the_rules() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    // Not watching: only the signal can reload.
    let mut serve = Serve::start(&rules, &["--no-watch"]);
    assert!(serve.get("/v1/rules").expect("rules").contains("\"requests_per_unit\":50"));
    std::fs::write(&rules, RULES.replace("requests_per_unit: 50", "requests_per_unit: 7")).expect("write");
    let status = Command::new("kill").arg("-HUP").arg(serve.child.id().to_string()).status().expect("kill");
    assert!(status.success());
    let mut reloaded = false;
    for _ in 0..200 {
        if serve.get("/v1/rules").is_some_and(|r| r.contains("\"requests_per_unit\":7")) {
            reloaded = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(reloaded, "SIGHUP reloaded the rules");
    assert!(serve.terminate().success());
}
