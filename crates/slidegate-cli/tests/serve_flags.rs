//! `slidegate serve`'s flags and logs as an operator meets them: listen
//! addresses by name or bare port, switches spelled `1`/`yes`, a service
//! listening on nothing refused, JSON logs that are JSON only (a domain
//! no rules file defines warned about among them).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use slidegate_testkit::free_port;

const RULES: &str =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n";

/// A `slidegate serve` of [`RULES`] with `args` and `env`, its stderr
/// collected; killed on drop.
struct Serve {
    child: Child,
    stderr: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Serve {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Serve {
        let dir = tempfile::tempdir().expect("temp dir");
        let rules = dir.path().join("rules.yaml");
        std::fs::write(&rules, RULES).expect("write the rules");
        let mut child = Command::new(env!("CARGO_BIN_EXE_slidegate"))
            .arg("serve")
            .arg("--rules")
            .arg(&rules)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn slidegate serve");
        let stderr = common::collect_stderr(&mut child);
        Serve { child, stderr, _dir: dir }
    }

    /// Waits until `GET /readyz` on 127.0.0.1:`port` answers 200.
    fn ready(&mut self, port: u16) {
        for _ in 0..200 {
            if get(port, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
                return;
            }
            assert!(self.child.try_wait().expect("wait").is_none(), "exited: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("not ready on {port}: {}", self.stderr());
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// SIGTERM, then waits for the exit and the last of its stderr.
    fn terminate(&mut self) -> String {
        let status = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        assert!(status.expect("kill").success());
        for _ in 0..400 {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "{status}: {}", self.stderr());
                // The collecting thread reads to the pipe's end.
                std::thread::sleep(Duration::from_millis(100));
                return self.stderr();
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("no exit after SIGTERM: {}", self.stderr());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET over a socket: the response, or `None`.
fn get(port: u16, path: &str) -> Option<String> {
    send(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
}

/// A JSON POST over a socket: the response, or `None`.
fn post(port: u16, path: &str, body: &str) -> Option<String> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    send(port, &(head + body))
}

fn send(port: u16, request: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

#[test]
fn json_logs_are_json_only() {
    let port = free_port().expect("a port");
    let http = format!("127.0.0.1:{port}");
    let mut serve = Serve::start(&["--grpc", "off", "--http", &http, "--log-format", "json"], &[]);
    serve.ready(port);
    // A domain no rules file defines: admitted, and warned about.
    let typo = r#"{"domain":"nope","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#;
    let answer = post(port, "/v1/check", typo).expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let stderr = serve.terminate();
    let mut messages = Vec::new();
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        messages.push(object["fields"]["message"].as_str().unwrap_or_default().to_owned());
    }
    let warned = "a request for domain `nope`, which no rules file defines, meets no limit";
    for expected in
        [format!("HTTP API on http://{http}"), warned.into(), "shutting down".into(), "stopped".into()]
    {
        assert!(messages.iter().any(|m| m.starts_with(expected.as_str())), "{expected:?} in {messages:#?}");
    }
}

#[test]
fn listen_addresses_take_a_name_or_a_bare_port() {
    for form in ["localhost:{port}", ":{port}"] {
        let port = free_port().expect("a port");
        let http = form.replace("{port}", &port.to_string());
        let mut serve = Serve::start(&["--grpc", "off", "--http", &http], &[]);
        serve.ready(port);
        serve.terminate();
    }
    // A name that resolves to nothing, or no address at all: a clear error.
    let stderr = common::failure(&["serve", "--rules", "x.yaml", "--http", "localhost"], "");
    assert!(stderr.contains("expected host:port, [ipv6]:port or :port"), "{stderr}");
    let stderr = common::failure(&["serve", "--rules", "x.yaml", "--http", "no-such-host.invalid:80"], "");
    assert!(stderr.contains("cannot resolve \"no-such-host.invalid\""), "{stderr}");
}

#[test]
fn a_service_listening_on_nothing_refuses_to_start() {
    let stderr = common::failure(&["serve", "--rules", "x.yaml", "--grpc", "off", "--http", "off"], "");
    assert!(stderr.contains("nothing to listen on"), "{stderr}");
}

#[test]
fn switches_take_the_usual_spellings_from_the_environment() {
    for (value, shadow) in [("1", true), ("yes", true), ("on", true), ("0", false), ("no", false)] {
        let port = free_port().expect("a port");
        let http = format!("127.0.0.1:{port}");
        let mut serve = Serve::start(&["--grpc", "off", "--http", &http], &[("SLIDEGATE_SHADOW", value)]);
        serve.ready(port);
        let status = get(port, "/v1/status").expect("status");
        assert!(status.contains(&format!("\"shadow_mode\":{shadow}")), "SLIDEGATE_SHADOW={value}: {status}");
        serve.terminate();
    }
    let mut refused = Serve::start(&["--grpc", "off", "--http", "off"], &[("SLIDEGATE_SHADOW", "maybe")]);
    let status = refused.child.wait().expect("wait");
    assert!(!status.success());
    std::thread::sleep(Duration::from_millis(100));
    assert!(refused.stderr().contains("maybe"), "{}", refused.stderr());
}

#[test]
fn check_warns_of_a_route_that_can_never_match() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gateway = dir.path().join("gateway.yaml");
    let routes = "routes:\n  - name: first\n    upstreams: [http://127.0.0.1:9]\n  - name: second\n    upstreams: [http://127.0.0.1:9]\n";
    std::fs::write(&gateway, routes).expect("write");
    let output = common::slidegate(&["serve", "--check", "--gateway", &gateway.to_string_lossy()], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "a warning is no error: {stderr}");
    assert!(
        stderr.contains("warning: ") && stderr.contains("gateway.yaml:4:5: route `second` can never match"),
        "{stderr}"
    );
}

/// `deploy/kubernetes`: the ConfigMap's rules pass `--check`, and the
/// Deployment's arguments are ones `serve` takes.
#[test]
fn the_kubernetes_manifests_hold_a_configuration_serve_takes() {
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes");
    let configmap = std::fs::read_to_string(deploy.join("configmap.yaml")).expect("configmap.yaml");
    let rules: String = configmap
        .lines()
        .skip_while(|l| l.trim() != "rules.yaml: |")
        .skip(1)
        .map_while(|l| l.strip_prefix("    ").or_else(|| l.is_empty().then_some("")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(rules.contains("domain: edge"), "{rules}");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("rules.yaml"), rules).expect("write");

    let deployment = std::fs::read_to_string(deploy.join("deployment.yaml")).expect("deployment.yaml");
    let args: Vec<String> = deployment
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(|arg| match arg.strip_prefix("--rules=") {
            Some(_) => format!("--rules={}", dir.path().display()),
            None => arg.to_owned(),
        })
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    let mut check: Vec<&str> = args.iter().map(String::as_str).collect();
    check.push("--check");
    let output = common::slidegate(&check, "");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("ok (1 file(s), domains: edge"), "{stdout}");
}

#[test]
fn check_explains_what_a_sample_request_would_meet() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write");
    let rules = rules.to_string_lossy().into_owned();
    let sample = r#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]},{"entries":[{"key":"x","value":"y"}]}]}"#;
    let stdout = common::success(&["serve", "--check", "--rules", &rules, "--explain", sample], "");
    assert!(stdout.contains("descriptor 1 (k=v): limit `d.k`: 1 per 60s (log)"), "{stdout}");
    assert!(stdout.contains("descriptor 2 (x=y): matches no descriptor of the domain: no limit"), "{stdout}");
    let typo = r#"{"domain":"dd","descriptors":[]}"#;
    let stdout = common::success(&["serve", "--check", "--rules", &rules, "--explain", typo], "");
    assert!(stdout.contains("domain `dd` is not defined (defined: d)"), "{stdout}");
    // Only with --check, and a request that is JSON.
    let stderr = common::failure(&["serve", "--rules", &rules, "--explain", sample], "");
    assert!(stderr.contains("--check"), "{stderr}");
    let stderr = common::failure(&["serve", "--check", "--rules", &rules, "--explain", "{"], "");
    assert!(stderr.contains("--explain"), "{stderr}");
}
