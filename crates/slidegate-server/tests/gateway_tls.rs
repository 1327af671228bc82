//! The gateway over HTTPS (a `tls:` block), with real clients: curl over
//! HTTP/2 and HTTP/1.1 (ALPN) and TLS 1.2 and 1.3, Python's `ssl`, and a
//! rustls client that keeps its connection open while the certificate is
//! replaced on disk; SNI choosing between two certificates; a broken
//! certificate kept out; bad `tls:` blocks refused by name.

#[path = "support/edges.rs"]
mod edges;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use edges::Edges;
use http_body_util::{BodyExt as _, Empty};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use slidegate_server::config::GatewayConfig;
use slidegate_testkit::{TestCa, Upstream};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const RULES: &str = "domain: api\ndescriptors: []\n";

/// The gateway file: two certificates (`a.pem` for `a.example.test`, the
/// first; `b.pem` for `b.example.test` and its subdomains), a route to
/// `upstream` limited to 50 a minute.
fn gateway_yaml(upstream: &Upstream) -> String {
    format!(
        "tls:\n  certificates:\n    - {{ cert_file: a.pem, key_file: a.key }}\n    \
         - {{ cert_file: b.pem, key_file: b.key }}\nroutes:\n  - name: site\n    upstreams: [http://{}]\n    \
         limits:\n      - {{ key: global, requests_per_unit: 50, window: 1m }}\n",
        upstream.addr()
    )
}

/// Writes `name.pem` and `name.key` for `names` into `dir`.
fn write_pair(dir: &Path, ca: &TestCa, name: &str, names: &[&str]) {
    let (cert, key) = ca.issue(names);
    support::write(&dir.join(format!("{name}.pem")), &cert);
    support::write(&dir.join(format!("{name}.key")), &key);
}

struct Tls {
    edges: Edges,
    ca: TestCa,
    ca_file: PathBuf,
    dir: PathBuf,
    _upstream: Upstream,
}

async fn start() -> Tls {
    let upstream = Upstream::start();
    let ca = TestCa::new("slidegate gateway test CA");
    let mut dir = PathBuf::new();
    let edges =
        Edges::start(ServiceStore::Memory(MemoryStore::new()), RULES, &gateway_yaml(&upstream), |config| {
            let gateway = config.gateway.as_ref().expect("a gateway file");
            dir = gateway.parent().expect("its directory").to_owned();
            write_pair(&dir, &ca, "a", &["a.example.test"]);
            write_pair(&dir, &ca, "b", &["b.example.test", "*.b.example.test"]);
            support::write(&dir.join("ca.pem"), &ca.ca_pem);
        })
        .await;
    let ca_file = dir.join("ca.pem");
    Tls { edges, ca, ca_file, dir, _upstream: upstream }
}

impl Tls {
    fn port(&self) -> u16 {
        self.edges.gateway_url("").rsplit(':').next().expect("port").parse().expect("a port")
    }

    /// curl `https://<host>:<port><path>` (resolved to 127.0.0.1) with
    /// `args`: the body, then the HTTP version and the TLS version.
    fn curl(&self, host: &str, path: &str, args: &[&str]) -> (String, String) {
        let port = self.port();
        let output = Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(&self.ca_file)
            .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
            .args(["-w", "\n%{http_version} %{ssl_verify_result}"])
            .args(args)
            .arg(format!("https://{host}:{port}{path}"))
            .output()
            .expect("curl");
        assert!(output.status.success(), "curl: {}", String::from_utf8_lossy(&output.stderr));
        let text = String::from_utf8(output.stdout).expect("UTF-8");
        let (body, version) = text.rsplit_once('\n').expect("the -w line");
        (body.to_owned(), version.to_owned())
    }

    /// A rustls client's connection to the gateway, asking for `name`.
    async fn connect(&self, name: &str) -> TlsStream<TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(self.ca.ca_pem.as_bytes()).expect("CA")).expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = TcpStream::connect(("127.0.0.1", self.port())).await.expect("connect");
        let name = ServerName::try_from(name.to_owned()).expect("a name");
        TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("TLS handshake")
    }
}

/// The names the certificate a connection got was issued for (its first).
fn served_name(stream: &TlsStream<TcpStream>) -> Vec<u8> {
    stream.get_ref().1.peer_certificates().expect("a certificate")[0].to_vec()
}

/// An HTTP/1.1 connection over `stream`, and a request on it.
async fn http1(stream: TlsStream<TcpStream>) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
    let io = hyper_util::rt::TokioIo::new(stream);
    let (sender, connection) = hyper::client::conn::http1::handshake(io).await.expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    sender
}

async fn get(sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>, host: &str) -> u16 {
    let request = http::Request::get("/echo").header("host", host).body(Empty::new()).expect("request");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    response.into_body().collect().await.expect("body");
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_speaks_both_alpn_protocols_and_tls_versions_and_picks_certificates_by_sni() {
    let tls = start().await;
    // HTTP/2 over TLS (ALPN h2) and HTTP/1.1; the upstream is told https.
    let (body, version) = tls.curl("b.example.test", "/echo", &["--http2"]);
    assert_eq!(version, "2 0", "HTTP/2, the certificate verified");
    let echo: serde_json::Value = serde_json::from_str(&body).expect("the upstream's echo");
    assert_eq!(echo["headers"]["x-forwarded-proto"][0], "https", "{echo}");
    assert!(echo["headers"]["forwarded"][0].as_str().is_some_and(|f| f.contains("proto=https")), "{echo}");
    let (_, version) = tls.curl("a.example.test", "/echo", &["--http1.1"]);
    assert_eq!(version, "1.1 0");
    // TLS 1.2 and 1.3 each.
    for args in [["--tlsv1.2", "--tls-max", "1.2"], ["--tlsv1.3", "--tls-max", "1.3"]] {
        let (_, version) = tls.curl("x.b.example.test", "/echo", &args);
        assert_eq!(version, "2 0", "{args:?}");
    }

    // Python's ssl: the version asked for, and the certificate of the name.
    let script = r#"
import socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
for version, name in ((ssl.TLSVersion.TLSv1_2, "a.example.test"), (ssl.TLSVersion.TLSv1_3, "b.example.test"), (ssl.TLSVersion.TLSv1_3, None)):
    context = ssl.create_default_context(cafile=ca)
    context.minimum_version = context.maximum_version = version
    if name is None:
        context.check_hostname = False
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with context.wrap_socket(raw, server_hostname=name) as s:
            names = [v for k, v in s.getpeercert()["subjectAltName"]]
            s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
            print(s.version(), names[0], answer.split(b"\r\n")[0].decode())
"#;
    let output = Command::new("python3")
        .args(["-c", script, &tls.port().to_string()])
        .arg(&tls.ca_file)
        .output()
        .expect("python3");
    assert!(output.status.success(), "python: {}", String::from_utf8_lossy(&output.stderr));
    let lines = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(
        lines.lines().collect::<Vec<_>>(),
        [
            "TLSv1.2 a.example.test HTTP/1.1 200 OK",
            "TLSv1.3 b.example.test HTTP/1.1 200 OK",
            // No name: the first certificate.
            "TLSv1.3 a.example.test HTTP/1.1 200 OK",
        ]
    );
    // `/v1/gateway` names the certificate files.
    let (_, _, listed) = support::http("GET", &tls.edges.url("/v1/gateway"), String::new(), &[]).await;
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    let files = &listed["tls"]["certificates"];
    assert!(files[1]["cert_file"].as_str().is_some_and(|f| f.ends_with("b.pem")), "{listed}");
    // Plain HTTP on the TLS port gets no answer but a failed handshake.
    let plain = support::http_client().get(tls.edges.gateway_url("/echo").parse().expect("uri")).await;
    assert!(plain.is_err() || plain.is_ok_and(|r| r.status() != 200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_replaced_on_disk_serves_new_connections_and_a_broken_one_is_kept_out() {
    let tls = start().await;
    let first = tls.connect("a.example.test").await;
    let before = served_name(&first);
    let mut open = http1(first).await;
    assert_eq!(get(&mut open, "a.example.test").await, 200);

    // Renewed on disk (another key, the same names): new connections get
    // it once the watch reloads; the open one goes on.
    write_pair(&tls.dir, &tls.ca, "a", &["a.example.test"]);
    support::eventually("the renewed certificate served", async || {
        served_name(&tls.connect("a.example.test").await) != before
    })
    .await;
    assert_eq!(get(&mut open, "a.example.test").await, 200, "the open connection goes on");
    let renewed = served_name(&tls.connect("a.example.test").await);

    // A broken certificate file: the reload is refused, the one in force stays.
    support::write(
        &tls.dir.join("a.pem"),
        "-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n",
    );
    support::eventually("the broken certificate refused", async || {
        let (_, _, status) = support::http("GET", &tls.edges.url("/v1/status"), String::new(), &[]).await;
        status.contains("a.pem") && status.contains("cert_file")
    })
    .await;
    assert_eq!(served_name(&tls.connect("a.example.test").await), renewed, "the certificate in force stays");
    let mut again = http1(tls.connect("b.example.test").await).await;
    assert_eq!(get(&mut again, "b.example.test").await, 200);
}

/// Writes `files` into a new directory and compiles the gateway file `yaml` there.
fn compile(yaml: &str, files: &[(&str, &str)]) -> Result<GatewayConfig, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        support::write(&dir.path().join(name), text);
    }
    GatewayConfig::from_text(&dir.path().join("gateway.yaml"), yaml).map_err(|e| e.to_string())
}

#[test]
fn bad_tls_blocks_are_refused_by_name() {
    let ca = TestCa::new("test CA");
    let (cert, key) = ca.issue(&["a.example.test"]);
    let (_, other_key) = ca.issue(&["b.example.test"]);
    let routes = "routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n";
    let with = |tls: &str| format!("tls:\n{tls}{routes}");
    let cases = [
        (with("  certificates: []\n"), vec![], "`tls` lists no `certificates`"),
        (with("  certificates:\n    - { cert_file: a.pem }\n"), vec![], "takes `cert_file` and `key_file`"),
        (
            with("  certificates:\n    - { cert_file: a.pem, key_file: a.key }\n"),
            vec![],
            "a.pem: cannot read",
        ),
        (
            with("  certificates:\n    - { cert_file: a.pem, key_file: a.key }\n"),
            vec![("a.pem", "not PEM"), ("a.key", key.as_str())],
            "holds no certificate",
        ),
        (
            with("  certificates:\n    - { cert_file: a.pem, key_file: a.key }\n"),
            vec![("a.pem", cert.as_str()), ("a.key", cert.as_str())],
            "holds no private key",
        ),
        (
            with("  certificates:\n    - { cert_file: a.pem, key_file: a.key }\n"),
            vec![("a.pem", cert.as_str()), ("a.key", other_key.as_str())],
            "is not the key of `cert_file`",
        ),
        (with("  certificate: x\n"), vec![], "unknown field `certificate`"),
    ];
    for (yaml, files, expected) in cases {
        let errors = compile(&yaml, &files).expect_err("refused");
        assert!(errors.contains(expected), "{yaml}: {errors}");
    }
    let good = compile(
        &with("  certificates:\n    - { cert_file: a.pem, key_file: a.key }\n"),
        &[("a.pem", &cert), ("a.key", &key)],
    )
    .expect("a good tls block");
    let tls = good.tls.expect("tls");
    assert_eq!(tls.certificates.len(), 1);
    assert!(tls.certificates[0].cert_file.ends_with("a.pem"), "relative to the gateway file");
}

/// A reload cannot turn the listener's TLS on or off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_cannot_turn_https_off() {
    let tls = start().await;
    let upstream = Upstream::start();
    let plain = format!("routes:\n  - name: site\n    upstreams: [http://{}]\n", upstream.addr());
    support::write(&tls.dir.join("gateway.yaml"), &plain);
    // The watch reloads it, and refuses it.
    support::eventually("the reload refused", async || {
        let (_, _, status) = support::http("GET", &tls.edges.url("/v1/status"), String::new(), &[]).await;
        status.contains("turns HTTPS on or off only at a restart")
    })
    .await;
    let mut still = http1(tls.connect("a.example.test").await).await;
    assert_eq!(get(&mut still, "a.example.test").await, 200);
}

/// `--gateway-redirect-addr`: plain HTTP sent to the same host and path
/// over HTTPS, which curl follows to the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_redirected_to_https_when_asked() {
    use slidegate_server::{Listeners, ServerConfig, serve};
    use tokio::net::TcpListener;

    let upstream = Upstream::start();
    let ca = TestCa::new("redirect test CA");
    let dir = tempfile::tempdir().expect("temp dir");
    write_pair(dir.path(), &ca, "a", &["a.example.test"]);
    write_pair(dir.path(), &ca, "b", &["b.example.test"]);
    let ca_file = dir.path().join("ca.pem");
    support::write(&ca_file, &ca.ca_pem);
    let file = dir.path().join("gateway.yaml");
    support::write(&file, &gateway_yaml(&upstream));
    let mut config = ServerConfig::for_gateway(&file, ServiceStore::Memory(MemoryStore::new()));
    config.grace = std::time::Duration::from_secs(1);
    let bind = async || TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let (http, proxy, redirect) = (bind().await, bind().await, bind().await);
    let (api, port, plain) = [&http, &proxy, &redirect].map(|l| l.local_addr().expect("addr")).into();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listeners = Listeners::new(None, Some(http)).with_gateway(proxy).with_redirect(redirect);
    let task = tokio::spawn(serve(config, listeners, async move {
        let _ = stopped.await;
    }));
    support::eventually("the service answers", async || {
        support::http_client().get(format!("http://{api}/healthz").parse().expect("uri")).await.is_ok()
    })
    .await;
    let (port, plain) = (port.port(), plain.port());

    let (status, headers, _) = support::http(
        "POST",
        &format!("http://{}/echo?x=1", format_args!("127.0.0.1:{plain}")),
        "body",
        &[("host", "a.example.test")],
    )
    .await;
    assert_eq!(status, 308, "the method and body kept");
    assert_eq!(headers["location"], format!("https://a.example.test:{port}/echo?x=1"));
    let curl = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args(["-sS", "-L", "--max-time", "10", "--cacert"])
            .arg(&ca_file)
            .args(["--resolve", &format!("a.example.test:{plain}:127.0.0.1")])
            .args(["--resolve", &format!("a.example.test:{port}:127.0.0.1")])
            .arg(format!("http://a.example.test:{plain}/echo"))
            .output()
            .expect("curl")
    })
    .await
    .expect("curl");
    assert!(curl.status.success(), "{}", String::from_utf8_lossy(&curl.stderr));
    let echo: serde_json::Value = serde_json::from_slice(&curl.stdout).expect("the upstream's echo");
    assert_eq!(echo["headers"]["x-forwarded-proto"][0], "https");
    let _ = stop.send(());
    task.await.expect("serve").expect("stopped cleanly");
}
