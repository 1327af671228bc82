//! `https://` upstreams behind the gateway, reached over real TLS: a
//! private CA (`upstream_tls.ca_file`), the system's roots refusing it,
//! HTTP/2 over TLS (ALPN h2), a client certificate for an upstream that
//! demands one (mutual TLS), the name asked for set by `server_name`; and
//! bad `upstream_tls` blocks refused by name.

#[path = "support/edges.rs"]
mod edges;
mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use edges::Edges;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use slidegate_server::config::GatewayConfig;
use slidegate_testkit::TestCa;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// An HTTPS upstream on 127.0.0.1 with a certificate of `ca` for `names`,
/// speaking HTTP/2 or HTTP/1.1 by ALPN, demanding a client certificate
/// of `clients` if given. It answers `<version> <client certificate
/// shown>`, e.g. `HTTP/2.0 false`.
async fn https_upstream(ca: &TestCa, names: &[&str], clients: Option<&TestCa>) -> SocketAddr {
    let (cert, key) = ca.issue(names);
    let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("certificate")];
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(clients) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from_pem_slice(clients.ca_pem.as_bytes()).expect("CA")).expect("root");
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .expect("verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let shown = tls.get_ref().1.peer_certificates().is_some();
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let answer = format!("{:?} {shown}", request.version());
                        async move { Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from(answer)))) }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstreams_are_verified_by_their_ca_over_http1_and_http2_with_client_certificates() {
    let (servers, clients) = (TestCa::new("upstream CA"), TestCa::new("client CA"));
    let plain = https_upstream(&servers, &["127.0.0.1"], None).await;
    let mutual = https_upstream(&servers, &["127.0.0.1"], Some(&clients)).await;
    let named = https_upstream(&servers, &["upstream.internal"], None).await;
    let route = |name: &str, upstream: SocketAddr, extra: &str| {
        format!("  - name: {name}\n    path_prefix: /{name}\n    upstreams: [https://{upstream}]\n{extra}")
    };
    let ca = "    upstream_tls: { ca_file: upstream-ca.pem }\n";
    let yaml = [
        route("ca", plain, ca),
        route("roots", plain, ""),
        route("h2", plain, &format!("    http2: true\n{ca}")),
        route(
            "mutual",
            mutual,
            "    upstream_tls: { ca_file: upstream-ca.pem, cert_file: client.pem, key_file: client.key }\n",
        ),
        route("anonymous", mutual, ca),
        route(
            "named",
            named,
            "    upstream_tls: { ca_file: upstream-ca.pem, server_name: upstream.internal }\n",
        ),
        route("misnamed", named, ca),
    ]
    .concat();
    let (client_cert, client_key) = clients.issue(&["gateway.internal"]);
    let edges = Edges::start(
        ServiceStore::Memory(MemoryStore::new()),
        "domain: d\ndescriptors: []\n",
        &format!("routes:\n{yaml}"),
        |config| {
            let dir = config.gateway.as_ref().and_then(|g| g.parent()).expect("a directory").to_owned();
            support::write(&dir.join("upstream-ca.pem"), &servers.ca_pem);
            support::write(&dir.join("client.pem"), &client_cert);
            support::write(&dir.join("client.key"), &client_key);
        },
    )
    .await;
    let get = async |path: &str| {
        let (status, _, body) = edges.gateway_get(path).await;
        (status, body)
    };
    assert_eq!(get("/ca").await, (200, "HTTP/1.1 false".to_owned()), "verified by the route's CA");
    assert_eq!(get("/ca").await, (200, "HTTP/1.1 false".to_owned()), "the kept connection");
    assert_eq!(get("/roots").await.0, 502, "the system's roots do not know the private CA");
    assert_eq!(get("/h2").await, (200, "HTTP/2.0 false".to_owned()), "HTTP/2 over TLS");
    assert_eq!(get("/mutual").await, (200, "HTTP/1.1 true".to_owned()), "the client certificate shown");
    assert_eq!(get("/anonymous").await.0, 502, "no client certificate, no connection");
    assert_eq!(get("/named").await, (200, "HTTP/1.1 false".to_owned()), "verified for server_name");
    assert_eq!(get("/misnamed").await.0, 502, "127.0.0.1 is not the certificate's name");
}

/// A gRPC service (gRPC health) behind the gateway on an `https://`
/// upstream speaking HTTP/2 over TLS; a tonic client reaches it through
/// the gateway's h2c listener, trailers and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_service_over_tls_is_reached_through_the_gateway() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let ca = TestCa::new("upstream CA");
    let (cert, key) = ca.issue(&["127.0.0.1"]);
    let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("certificate")];
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("slidegate.Test", tonic_health::ServingStatus::Serving).await;
    let router = tonic::service::Routes::new(health).into_axum_router();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    let yaml = format!(
        "routes:\n  - name: grpc\n    http2: true\n    upstreams: [https://{upstream}]\n    \
         upstream_tls: {{ ca_file: ca.pem }}\n"
    );
    let edges = Edges::start(
        ServiceStore::Memory(MemoryStore::new()),
        "domain: d\ndescriptors: []\n",
        &yaml,
        |config| {
            let dir = config.gateway.as_ref().and_then(|g| g.parent()).expect("a directory").to_owned();
            support::write(&dir.join("ca.pem"), &ca.ca_pem);
        },
    )
    .await;
    let channel = tonic::transport::Channel::from_shared(edges.gateway_url(""))
        .expect("a URL")
        .connect()
        .await
        .expect("connect to the gateway");
    let mut client = HealthClient::new(channel);
    let answer = client
        .check(HealthCheckRequest { service: "slidegate.Test".into() })
        .await
        .expect("an answer through the gateway");
    assert_eq!(answer.into_inner().status, ServingStatus::Serving as i32);
    let unknown = client.check(HealthCheckRequest { service: "nobody".into() }).await.expect_err("not found");
    assert_eq!(unknown.code(), tonic::Code::NotFound, "the upstream's gRPC status, in its trailers");
}

#[test]
fn bad_upstream_tls_blocks_are_refused_by_name() {
    let ca = TestCa::new("test CA");
    let (cert, key) = ca.issue(&["gateway.internal"]);
    let (_, other_key) = ca.issue(&["other.internal"]);
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in
        [("ca.pem", ca.ca_pem.as_str()), ("c.pem", &cert), ("c.key", &key), ("o.key", &other_key)]
    {
        support::write(&dir.path().join(name), text);
    }
    let compile = |upstream: &str, tls: &str| {
        let yaml = format!("routes:\n  - name: r\n    upstreams: [{upstream}]\n    upstream_tls: {tls}\n");
        GatewayConfig::from_text(&dir.path().join("gateway.yaml"), &yaml).map_err(|e| e.to_string())
    };
    let cases = [
        ("http://127.0.0.1:9", "{ ca_file: ca.pem }", "`upstream_tls` is for https:// upstreams"),
        ("https://127.0.0.1:9", "{ ca_file: none.pem }", "none.pem: cannot read"),
        ("https://127.0.0.1:9", "{ ca_file: c.key }", "holds no CA certificate"),
        (
            "https://127.0.0.1:9",
            "{ ca_file: ca.pem, cert_file: c.pem }",
            "takes both `cert_file` and `key_file`",
        ),
        (
            "https://127.0.0.1:9",
            "{ ca_file: ca.pem, cert_file: c.pem, key_file: o.key }",
            "is not the key of",
        ),
        ("https://127.0.0.1:9", "{ ca_file: ca.pem, server_name: \"a b\" }", "is no DNS name or IP address"),
        ("https://127.0.0.1:9", "{ ca: ca.pem }", "unknown field `ca`"),
        ("ftp://127.0.0.1:9", "{ ca_file: ca.pem }", "must start with http:// or https://"),
    ];
    for (upstream, tls, expected) in cases {
        let errors = compile(upstream, tls).expect_err("refused");
        assert!(errors.contains(expected), "{upstream} {tls}: {errors}");
    }
    let good = compile("https://127.0.0.1:9", "{ ca_file: ca.pem, cert_file: c.pem, key_file: c.key }")
        .expect("good");
    let tls = good.routes[0].upstream_tls.as_ref().expect("the route's TLS");
    assert!(tls.ca_file.as_ref().is_some_and(|f| f.ends_with("ca.pem")));
}
