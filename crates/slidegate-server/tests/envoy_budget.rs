//! A real Envoy (1.40) in front of an LLM server that names the tokens
//! each response used in `x-usage-tokens`, charging a tenant's token
//! budget in `slidegate serve` as `examples/llm-budget/` configures it
//! (the window shortened to 4 s): a peek (`hits_addend: 0`) before each
//! request, the response's tokens charged after it (`apply_on_stream_done`,
//! `hits_addend` read from the response header). 700 + 700 land (1,400
//! recorded against 1,000), the next request is denied, and it is admitted
//! again when the first 700 leave the window, not before.

mod support;

use std::time::{Duration, Instant};

use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use slidegate_testkit::{Envoy, Upstream, envoy_config_on, free_port};

/// The example's configuration with this test's ports.
fn envoy_config(listen: u16, upstream: u16, slidegate: u16, admin: u16) -> String {
    let example = include_str!("../../../examples/llm-budget/envoy.yaml");
    envoy_config_on(example, listen, upstream, slidegate, admin)
}

/// The tenant's budget as slidegate's `/v1/peek` sees it: its limit's
/// `remaining`, `debt` and `retry_after_ms`.
async fn budget(service: &support::Service, tenant: &str) -> (u64, u64, u64) {
    let body = format!(
        r#"{{"domain": "llm", "descriptors": [{{"entries": [{{"key": "tenant", "value": "{tenant}"}}]}}]}}"#
    );
    let (_, _, answer) = support::post_json(&service.url("/v1/peek"), &body).await;
    let limit = &answer["descriptors"][0]["limits"][0];
    let field = |name: &str| limit[name].as_u64().unwrap_or_else(|| panic!("{name} in {answer}"));
    (field("remaining"), field("debt"), field("retry_after_ms"))
}

async fn ask(url: &str, tenant: &str) -> u16 {
    support::http("GET", url, "", &[("x-tenant", tenant)]).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_charges_each_response_s_tokens_after_it_ends() {
    let rules = include_str!("../../../examples/llm-budget/rules.yaml").replace("unit: minute", "window: 4s");
    let service = support::start_with(&rules, ServiceStore::Memory(MemoryStore::new()), |_| {}).await;
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let (listen, admin) = (free_port().expect("port"), free_port().expect("port"));
    let config = dir.path().join("envoy.yaml");
    std::fs::write(&config, envoy_config(listen, upstream.addr().port(), service.grpc.port(), admin))
        .expect("envoy config");
    let _envoy = Envoy::start(&config, admin).expect("envoy");
    let tokens = |n: u32| format!("http://127.0.0.1:{listen}/v1/chat/usage/{n}");

    // The first response used 700 tokens: charged once it ended.
    assert_eq!(ask(&tokens(700), "acme").await, 200);
    let first = Instant::now();
    support::eventually("700 charged", async || budget(&service, "acme").await.0 == 300).await;
    // 300 left: the second, a second later, is admitted, and its 700 land
    // in full.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ask(&tokens(700), "acme").await, 200);
    support::eventually("1,400 recorded", async || budget(&service, "acme").await.1 == 400).await;
    let (remaining, debt, retry_ms) = budget(&service, "acme").await;
    assert_eq!((remaining, debt), (0, 400), "1,400 recorded against 1,000");
    assert_eq!(upstream.requests(), 2);

    // Exhausted: denied before reaching the server; other tenants are not.
    assert_eq!(ask(&tokens(10), "acme").await, 429);
    assert_eq!(upstream.requests(), 2, "a denied request never reaches the server");
    assert_eq!(ask(&tokens(10), "globex").await, 200);
    let denied = support::http("GET", &tokens(10), "", &[("x-tenant", "acme")]).await;
    assert_eq!((denied.0, denied.1["x-envoy-ratelimited"].to_str().ok()), (429, Some("true")));

    // Admitted again when the first 700 leave the window (4 s after they
    // were charged) and not before: 300 remain then, until the second 700
    // leave a second later.
    assert!(retry_ms <= 4000 && first.elapsed() < Duration::from_millis(3500), "retry {retry_ms} ms");
    let opens = Instant::now() + Duration::from_millis(retry_ms);
    tokio::time::sleep_until((opens - Duration::from_millis(400)).into()).await;
    assert_eq!(ask(&tokens(10), "acme").await, 429, "still in debt shortly before");
    tokio::time::sleep_until((opens + Duration::from_millis(400)).into()).await;
    assert_eq!(ask(&tokens(10), "acme").await, 200, "admitted once the first 700 left");
    support::eventually("10 more charged", async || budget(&service, "acme").await.0 == 290).await;
    service.stop().await;
}
