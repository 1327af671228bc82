//! A gateway route's `max_in_flight` (slow streams count until they end
//! or their client goes), and its budget charged what the upstream says
//! each request cost (`cost_header`), with real upstreams and clients: a header read
//! when the response comes and charged when it ends, a trailer at the end
//! of a slow stream, a client gone mid-stream, a response without a count;
//! and bad configurations refused by name. The budget is read through the
//! rules file's twin of the gateway's limit (the same counter, see
//! `edges_agree`), with `POST /v1/peek`.

#[path = "support/devtools.rs"]
mod devtools;
#[path = "support/edges.rs"]
mod edges;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use edges::Edges;
use http_body_util::BodyExt as _;
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use slidegate_server::config::{Config, GatewayConfig};
use slidegate_testkit::Upstream;

/// The gateway's limit `llm.tokens`, as the rules file declares it.
const RULES: &str = "\
domain: gateway
descriptors:
  - key: route
    value: llm
    descriptors:
      - key: header:x-tenant
        rate_limit: { name: llm.tokens, unit: minute, requests_per_unit: 1000, budget: true }
";

fn gateway_yaml(upstream: &Upstream) -> String {
    format!(
        "routes:\n  - name: llm\n    upstreams: [http://{}]\n    limits:\n      \
         - {{ name: tokens, key: header:x-tenant, requests_per_unit: 1000, window: 1m, budget: true, \
         cost_header: x-usage-tokens }}\n",
        upstream.addr()
    )
}

/// `tenant`'s budget: what is left, and the debt.
async fn budget(edges: &Edges, tenant: &str) -> (u64, u64) {
    let body = format!(
        r#"{{"domain": "gateway", "descriptors": [{{"entries": [{{"key": "route", "value": "llm"}}, {{"key": "header:x-tenant", "value": "{tenant}"}}]}}]}}"#
    );
    let (_, _, answer) = support::post_json(&edges.url("/v1/peek"), &body).await;
    let limit = &answer["descriptors"][0]["limits"][0];
    (limit["remaining"].as_u64().expect("remaining"), limit["debt"].as_u64().expect("debt"))
}

/// What `/v1/stats` shows `identity` using of the route's `kind`
/// (`limits` or `max_in_flight`) entry `i`: used, and the debt.
async fn in_use(edges: &Edges, kind: &str, i: usize, identity: &str) -> Option<(u64, u64)> {
    let (_, _, text) = support::http("GET", &edges.url("/v1/stats"), String::new(), &[]).await;
    let stats: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let usage = stats["gateway"]["routes"][0][kind][i]["usage"].as_array()?.clone();
    let used = usage.iter().find(|u| u["identity"] == identity)?;
    Some((used["used"].as_u64()?, used["debt"].as_u64()?))
}

async fn get(edges: &Edges, path: &str, tenant: &str) -> u16 {
    support::http("GET", &edges.gateway_url(path), "", &[("x-tenant", tenant)]).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_s_budget_is_charged_what_the_upstream_says() {
    let upstream = Upstream::start();
    let edges =
        Edges::start(ServiceStore::Memory(MemoryStore::new()), RULES, &gateway_yaml(&upstream), |_| {}).await;

    // A header: 700 + 700 land, then denied before the upstream.
    assert_eq!(get(&edges, "/usage/700", "acme").await, 200);
    support::eventually("700 charged", async || budget(&edges, "acme").await == (300, 0)).await;
    assert_eq!(get(&edges, "/usage/700", "acme").await, 200);
    support::eventually("1,400 recorded", async || budget(&edges, "acme").await == (0, 400)).await;
    // The status page's "in use", as the gateway charged it.
    support::eventually("the use shown", async || {
        in_use(&edges, "limits", 0, "gateway: route=llm, header:x-tenant=acme").await == Some((1400, 400))
    })
    .await;
    let before = upstream.requests();
    assert_eq!(get(&edges, "/usage/5", "acme").await, 429);
    assert_eq!(upstream.requests(), before, "denied before the upstream");

    // A trailer at the end of a slow stream: charged when it ends.
    let url = edges.gateway_url("/usage/250?trailer&frames=4&every=100");
    let request = http::Request::get(url.as_str()).header("x-tenant", "globex").header("te", "trailers");
    let response = support::http_client()
        .request(request.body(http_body_util::Full::new(bytes::Bytes::new())).expect("request"))
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    assert_eq!(budget(&edges, "globex").await, (1000, 0), "the count comes last");
    let body = response.into_body().collect().await.expect("body");
    assert_eq!(
        body.trailers().and_then(|t| t.get("x-usage-tokens")).map(|v| v.as_bytes()),
        Some(&b"250"[..])
    );
    support::eventually("250 charged", async || budget(&edges, "globex").await == (750, 0)).await;

    // A client gone mid-stream: charged what the header said.
    let url = edges.gateway_url("/usage/300?frames=50&every=100");
    let request = http::Request::get(url.as_str()).header("x-tenant", "initech");
    let mut response = support::http_client()
        .request(request.body(http_body_util::Full::new(bytes::Bytes::new())).expect("request"))
        .await
        .expect("response");
    assert!(response.body_mut().frame().await.expect("a frame").expect("data").is_data());
    drop(response);
    support::eventually("300 charged", async || budget(&edges, "initech").await == (700, 0)).await;

    // A response without a count is charged nothing.
    assert_eq!(get(&edges, "/plain", "hooli").await, 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(budget(&edges, "hooli").await, (1000, 0));
}

/// The errors the gateway file `yaml` gives (it must give some).
fn gateway_errors(yaml: &str) -> String {
    GatewayConfig::from_text(Path::new("gateway.yaml"), yaml).expect_err("refused").to_string()
}

#[test]
fn bad_budget_configurations_are_refused_by_name() {
    let cases = [
        (
            "{ name: t, key: global, requests_per_unit: 5, unit: minute, cost_header: x-usage-tokens }",
            "`cost_header` says what a budget is charged: add `budget: true`",
        ),
        (
            "{ name: t, key: global, requests_per_unit: 5, unit: minute, budget: true, cost_header: \"x y\" }",
            "`cost_header: x y` is no header name",
        ),
    ];
    for (limit, expected) in cases {
        let yaml = format!(
            "routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n    limits:\n      - {limit}\n"
        );
        let errors = gateway_errors(&yaml);
        assert!(errors.contains(expected), "{limit}: {errors}");
    }
    let mixed = "routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n    limits:\n      \
                 - { name: a, key: global, requests_per_unit: 5, unit: minute, budget: true, cost_header: x-a }\n      \
                 - { name: b, key: global, requests_per_unit: 5, unit: minute, budget: true }\n";
    let errors = gateway_errors(mixed);
    assert!(errors.contains("must all read the same `cost_header`"), "{errors}");
    let in_flight = "routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n    limits:\n      \
                     - { name: s, key: global, max_in_flight: 2, requests_per_unit: 5 }\n";
    assert!(gateway_errors(in_flight).contains("it takes no `requests_per_unit`"));
    let zero = "routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n    limits:\n      \
                - { name: s, key: global, max_in_flight: 0 }\n";
    assert!(gateway_errors(zero).contains("must be at least 1"), "{}", gateway_errors(zero));
    let rules = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5, cost_header: x }\n";
    let errors = Config::from_texts(&[(PathBuf::from("rules.yaml"), rules.to_owned())])
        .expect_err("refused")
        .to_string();
    assert!(errors.contains("`cost_header` is a gateway limit's field"), "{errors}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_counts_slow_streams_until_they_end() {
    in_flight(ServiceStore::Memory(MemoryStore::new()), None).await;
}

/// On Redis the leases are the store's (not a fallback's): the gateways
/// sharing it share the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_holds_its_leases_in_redis() {
    let redis = slidegate_testkit::RedisServer::start().expect("redis-server");
    let store = slidegate_redis::RedisStore::builder(redis.url()).connect().await.expect("connect");
    in_flight(ServiceStore::Redis(store), Some(&redis)).await;
}

async fn in_flight(store: ServiceStore, redis: Option<&slidegate_testkit::RedisServer>) {
    let upstream = Upstream::start();
    let yaml = format!(
        "routes:\n  - name: events\n    upstreams: [http://{}]\n    limits:\n      \
         - {{ name: streams, key: header:x-tenant, max_in_flight: 2 }}\n",
        upstream.addr()
    );
    let edges = Edges::start(store, RULES, &yaml, |_| {}).await;
    let (_, _, listed) = support::http("GET", &edges.url("/v1/gateway"), String::new(), &[]).await;
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    let in_flight = &listed["routes"][0]["max_in_flight"][0];
    assert_eq!(
        (in_flight["limit"].as_str(), in_flight["max_in_flight"].as_u64()),
        (Some("events.streams"), Some(2)),
        "{listed}"
    );
    assert_eq!(in_flight["lease_ttl_ms"], 60_000);
    let open = async |tenant: &str| {
        let url = edges.gateway_url("/usage/0?frames=40&every=50");
        let request = http::Request::get(url.as_str()).header("x-tenant", tenant);
        support::http_client()
            .request(request.body(http_body_util::Full::new(bytes::Bytes::new())).expect("request"))
            .await
            .expect("response")
    };
    let (first, second) = (open("acme").await, open("acme").await);
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    if let Some(redis) = redis {
        // `<prefix>lease:<limit>:{<identity>}`: the store's default prefix.
        let leases = redis.command("ZCARD sg:lease:events.streams:{acme}").expect("ZCARD");
        assert_eq!(leases, ":2", "the two leases are in Redis");
    }
    let acme = "gateway: route=events, header:x-tenant=acme";
    assert_eq!(in_use(&edges, "max_in_flight", 0, acme).await, Some((2, 0)), "two running, shown");
    let third = open("acme").await;
    assert_eq!(third.status(), 429, "two streams are running");
    assert!(third.headers().contains_key("retry-after"));
    assert_eq!(open("globex").await.status(), 200, "another tenant");
    first.into_body().collect().await.expect("the first stream to its end");
    // The second (as long) may have ended too.
    support::eventually("one running at most, shown", async || {
        in_use(&edges, "max_in_flight", 0, acme).await.is_some_and(|(running, _)| running <= 1)
    })
    .await;
    if redis.is_none() {
        // On the page, in a real browser: the route's "in use" cell.
        let mut page = devtools::Page::open(&edges.url("/")).await;
        page.wait_for(
            "the route's leases in use",
            "/gateway: route=events, header:x-tenant=acme [0-2] of 2, /
               .test(document.querySelector('#routes tr[data-route=events] td.in-use')?.textContent)",
        )
        .await;
    }
    support::eventually("a place again", async || {
        let response = open("acme").await;
        response.status() == 200
    })
    .await;
    drop(second);
    // The second's client gone: its place comes back too (two open again).
    support::eventually("two places", async || {
        let (a, b) = (open("acme").await, open("acme").await);
        a.status() == 200 && b.status() == 200
    })
    .await;
}

/// A WebSocket tunnel counts against its route's `max_in_flight` until it
/// closes, not only while its handshake is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_counts_websocket_tunnels_until_they_close() {
    use futures::StreamExt as _;
    use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest as _};

    let ws = Upstream::builder().name("ws").start();
    let yaml = format!(
        "routes:\n  - name: ws\n    upstreams: [http://{}]\n    limits:\n      \
         - {{ name: tunnels, key: header:x-tenant, max_in_flight: 1 }}\n",
        ws.addr()
    );
    let edges = Edges::start(ServiceStore::Memory(MemoryStore::new()), RULES, &yaml, |_| {}).await;
    let url = edges.gateway_url("/ws/echo").replacen("http://", "ws://", 1);
    let connect = async |tenant: &str| {
        let mut request = url.as_str().into_client_request().expect("request");
        request.headers_mut().insert("x-tenant", tenant.parse().expect("value"));
        tokio_tungstenite::connect_async(request).await
    };
    let (mut open, _) = connect("acme").await.expect("handshake");
    assert!(open.next().await.expect("a message").expect("greeting").is_text());
    // The tunnel is open, its handshake long answered: still running.
    tokio::time::sleep(Duration::from_millis(200)).await;
    match connect("acme").await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 429);
            assert!(response.headers().contains_key("retry-after"));
        }
        Err(other) => panic!("expected a 429, got {other}"),
        Ok(_) => panic!("a second tunnel was admitted while one is open"),
    }
    let (mut other, _) = connect("globex").await.expect("another tenant");
    // Closed: the place comes back.
    open.close(None).await.expect("close");
    while let Some(Ok(_)) = open.next().await {}
    drop(open);
    support::eventually("the tunnel's place back", async || connect("acme").await.is_ok()).await;
    other.close(None).await.expect("close");
}
