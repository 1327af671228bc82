//! Shaping in the gateway (a limit's `delay` and `burst`), with a real
//! upstream and client: twenty requests at once through five a second all
//! pass, each on its turn; past the delay, 429 at once; bad settings
//! refused by name.

#[path = "support/edges.rs"]
mod edges;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use edges::Edges;
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use slidegate_server::config::{Config, GatewayConfig};
use slidegate_testkit::Upstream;

fn yaml(upstream: &Upstream) -> String {
    format!(
        "routes:\n  - name: wait\n    path_prefix: /wait\n    upstreams: [http://{0}]\n    limits:\n      \
         - {{ key: global, requests_per_unit: 5, window: 1s, delay: 3s }}\n  - name: short\n    \
         path_prefix: /short\n    upstreams: [http://{0}]\n    limits:\n      \
         - {{ key: global, requests_per_unit: 5, window: 1s, delay: 1s }}\n",
        upstream.addr()
    )
}

/// `n` requests to `path` at once: each one's status and when it was
/// answered, in the order answered.
async fn burst(edges: &Edges, path: &str, n: usize) -> Vec<(u16, Duration)> {
    let started = Instant::now();
    let url = edges.gateway_url(path);
    let sent: Vec<_> = (0..n)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { (support::http("GET", &url, "", &[]).await.0, started.elapsed()) })
        })
        .collect();
    let mut answers = Vec::new();
    for answer in sent {
        answers.push(answer.await.expect("a request"));
    }
    answers.sort_by_key(|(_, at)| *at);
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_waits_its_turn_and_what_cannot_fit_is_refused_at_once() {
    let upstream = Upstream::start();
    let edges = Edges::start(
        ServiceStore::Memory(MemoryStore::new()),
        "domain: d\ndescriptors: []\n",
        &yaml(&upstream),
        |_| {},
    )
    .await;

    let answers = burst(&edges, "/wait", 20).await;
    assert!(answers.iter().all(|(status, _)| *status == 200), "all through: {answers:?}");
    // No more than 5 in any second (answers follow admissions, each by up
    // to an HTTP exchange: 50 ms of slack), and the i-th no later than its
    // turn, floor(i / 5) s, give or take the scheduler.
    for i in 5..answers.len() {
        assert!(
            answers[i].1 + Duration::from_millis(50) >= answers[i - 5].1 + Duration::from_secs(1),
            "{answers:?}"
        );
    }
    let lateness: Vec<Duration> = answers
        .iter()
        .enumerate()
        .map(|(i, (_, at))| at.saturating_sub(Duration::from_secs(i as u64 / 5)))
        .collect();
    println!("lateness per admission: {lateness:?}");
    assert!(lateness.iter().all(|late| *late < Duration::from_millis(250)), "{lateness:?}");

    let answers = burst(&edges, "/short", 20).await;
    let refused: Vec<_> = answers.iter().filter(|(status, _)| *status == 429).collect();
    assert_eq!(refused.len(), 10, "5 now, 5 within the second: {answers:?}");
    assert!(refused.iter().all(|(_, at)| *at < Duration::from_millis(500)), "at once: {refused:?}");

    let (_, _, listed) = support::http("GET", &edges.url("/v1/gateway"), "", &[]).await;
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    assert_eq!(listed["routes"][0]["limits"][0]["delay_ms"], 3000, "{listed}");
}

fn gateway_errors(yaml: &str) -> String {
    GatewayConfig::from_text(Path::new("gateway.yaml"), yaml).expect_err("refused").to_string()
}

#[test]
fn bad_shaping_is_refused_by_name() {
    let route = |limit: &str| {
        format!("routes:\n  - name: r\n    upstreams: [http://127.0.0.1:9]\n    limits:\n      - {limit}\n")
    };
    let cases = [
        ("{ key: global, requests_per_unit: 5, window: 1s, delay: soon }", "`delay: soon`"),
        ("{ key: global, requests_per_unit: 5, window: 1s, delay: 10m }", "at most 5m"),
        ("{ key: global, requests_per_unit: 5, window: 1s, burst: 3 }", "give the limit a `delay`"),
        (
            "{ key: global, requests_per_unit: 5, window: 1s, delay: 1s, burst: 0 }",
            "`burst` must be at least 1",
        ),
        (
            "{ key: global, requests_per_unit: 5, window: 1s, delay: 1s, penalty: { window: 1m, ban_after: 3, ban_for: 1m } }",
            "a limit with a `penalty` takes no `delay`",
        ),
        ("{ key: global, max_in_flight: 2, delay: 1s }", "takes no `delay`"),
    ];
    for (limit, expected) in cases {
        let errors = gateway_errors(&route(limit));
        assert!(errors.contains(expected), "{limit}: {errors}");
    }
    let rules = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5, delay: 1s }\n";
    let errors = Config::from_texts(&[(PathBuf::from("rules.yaml"), rules.to_owned())])
        .expect_err("refused")
        .to_string();
    assert!(errors.contains("`delay` is a gateway limit's field"), "{errors}");
}
