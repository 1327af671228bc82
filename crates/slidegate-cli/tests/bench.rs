//! `slidegate bench`: counts add up, JSON parses, Redis works, a dying
//! Redis degrades instead of failing, and bad flags are refused clearly.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{failure, success};
use serde_json::Value;

fn count(report: &Value, field: &str) -> u64 {
    report[field].as_u64().unwrap_or_else(|| panic!("{field} missing in {report}"))
}

#[test]
fn memory_json_report_adds_up() {
    let args = [
        "bench",
        "--limit",
        "50",
        "--window",
        "1s",
        "--keys",
        "20",
        "--concurrency",
        "4",
        "--requests",
        "2000",
        "--json",
    ];
    let out = success(&args, "");
    let report: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(count(&report, "allowed") + count(&report, "denied") + count(&report, "errors"), 2000);
    assert_eq!(count(&report, "requests"), 2000);
    assert_eq!(count(&report, "errors"), 0);
    assert!(report["first_error"].is_null());
    let latency = &report["latency_us"];
    assert!(count(latency, "p50") <= count(latency, "p99") && count(latency, "p99") <= count(latency, "max"));
    assert_eq!(report["store"], "memory");
    assert_eq!((count(&report, "degraded"), count(&report, "deny_cache_hits")), (0, 0));
    assert_eq!(count(&report, "breaker_transitions"), 0);
    assert_eq!(
        (&report["breaker_state"], &report["policy"]),
        (&Value::from("closed"), &Value::from("fallback"))
    );
}

#[test]
fn human_summary_without_json() {
    let args = ["bench", "--algorithm", "gcra", "--limit", "5", "--window", "1s", "--requests", "100"];
    let out = success(&args, "");
    assert!(out.contains("decisions") && out.contains("p99"), "{out}");
    assert!(out.contains("degraded") && out.contains("breaker") && out.contains("policy fallback"), "{out}");
}

#[test]
fn bounds_are_required_and_capped() {
    let err = failure(&["bench", "--limit", "5", "--window", "1s"], "");
    assert!(err.contains("--requests") && err.contains("--duration"), "{err}");
    let err = failure(&["bench", "--limit", "5", "--window", "1s", "--duration", "1h"], "");
    assert!(err.contains("at most 10m"), "{err}");
}

#[test]
fn redis_small_run() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    exact_small_run(&[&server.url()]);
}

/// Through the tower layer (one rule, and global + per-address + per-user),
/// on memory and on a real Redis, the counts are as exact as through
/// `check`; an attack on one key is answered by the deny cache, which the
/// layer's responses report.
#[test]
fn layer_entries_are_exact_and_report_deny_cache_hits() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    for entry in ["layer", "layer-three-rules"] {
        exact_small_run_through(&[], entry);
        exact_small_run_through(&[&url], entry);
    }
    let args = [
        "bench",
        "--entry",
        "layer",
        "--store",
        &url,
        "--limit",
        "5",
        "--window",
        "1m",
        "--keys",
        "1",
        "--concurrency",
        "4",
        "--requests",
        "500",
        "--json",
    ];
    let report: Value = serde_json::from_str(success(&args, "").trim()).expect("one JSON object");
    assert_eq!((count(&report, "allowed"), count(&report, "errors")), (5, 0), "{report}");
    assert!(count(&report, "deny_cache_hits") >= 400, "most denials are the cache's: {report}");
    let err =
        failure(&["bench", "--entry", "router", "--limit", "5", "--window", "1s", "--requests", "1"], "");
    assert!(err.contains("layer-three-rules"), "{err}");
}

/// The same exact run against a real Redis Cluster and through real
/// sentinels: the URL schemes reach the right store.
#[test]
fn cluster_and_sentinel_urls() {
    let cluster = slidegate_testkit::RedisCluster::start(3, 0).expect("start a cluster");
    exact_small_run(&[&cluster.url()]);
    // The same Cluster named by its nodes' URLs, one --store each.
    let nodes = cluster.node_urls();
    let report = exact_small_run(&nodes.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(report["store"].as_str().is_some_and(|s| s.starts_with("redis+cluster://")), "{report}");
    let sentinels = slidegate_testkit::RedisSentinel::start(1).expect("start sentinels");
    exact_small_run(&[&sentinels.url()]);
}

fn exact_small_run(urls: &[&str]) -> Value {
    exact_small_run_through(urls, "check")
}

/// 5 keys × 10 per window through `entry`, on `urls` (memory when empty).
fn exact_small_run_through(urls: &[&str], entry: &str) -> Value {
    let mut args = vec!["bench", "--entry", entry];
    for url in urls {
        args.extend(["--store", url]);
    }
    args.extend([
        "--algorithm",
        "counter",
        "--limit",
        "10",
        "--window",
        "10s",
        "--keys",
        "5",
        "--concurrency",
        "4",
        "--requests",
        "200",
        "--timeout",
        "2s",
        "--json",
    ]);
    let report: Value = serde_json::from_str(success(&args, "").trim()).expect("one JSON object");
    assert_eq!(count(&report, "requests"), 200);
    assert_eq!(count(&report, "errors"), 0, "{report}");
    // 5 keys × 10 per window, and the run is far shorter than the window.
    assert_eq!(count(&report, "allowed"), 50, "{report}");
    assert_eq!(count(&report, "degraded"), 0, "{report}");
    report
}

#[test]
fn redis_killed_mid_run_degrades() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    // Kill the server once the bench has charged a key: it is then surely
    // running, with most of its 2 s still ahead (no guess at start-up time).
    let killer = thread::spawn(move || {
        let mut server = server;
        let give_up = Instant::now() + Duration::from_secs(10);
        while server.command("DBSIZE").map_or(true, |reply| reply == ":0") && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(5));
        }
        server.kill();
        server
    });
    // Without the deny cache every check asks Redis for the whole run; with
    // it, keys already at their limit would be answered locally and the
    // kill could go unnoticed.
    let args = [
        "bench",
        "--store",
        &url,
        "--no-deny-cache",
        "--prefix",
        "sg:kill-test:",
        "--algorithm",
        "counter",
        "--limit",
        "1000",
        "--window",
        "10s",
        "--keys",
        "5",
        "--concurrency",
        "4",
        "--duration",
        "2s",
        "--json",
    ];
    let out = success(&args, "");
    drop(killer.join().expect("killer thread"));
    let report: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(count(&report, "errors"), 0, "{report}");
    assert!(count(&report, "degraded") > 0, "{report}");
    assert!(count(&report, "breaker_transitions") >= 1, "{report}");
    assert_eq!(count(&report, "allowed") + count(&report, "denied"), count(&report, "requests"));
    assert_eq!(report["policy"], "fallback");
}

#[test]
fn bad_prefixes_are_refused_with_reasons() {
    let base =
        ["bench", "--limit", "5", "--window", "1s", "--requests", "10", "--store", "redis://127.0.0.1:1/"];
    let long = "p".repeat(65);
    for (prefix, reason) in [
        ("", "must not be empty"),
        ("a b", "whitespace or control"),
        ("a\tb", "whitespace or control"),
        (long.as_str(), "at most 64"),
        ("{tag}:", "hash tag"),
    ] {
        // Refused while parsing flags, before any connection is tried.
        let err = failure(&[&base[..], &["--prefix", prefix]].concat(), "");
        assert!(err.contains("--prefix") && err.contains(reason), "{prefix:?}: {err}");
    }
    let err = failure(&["bench", "--limit", "5", "--window", "1s", "--requests", "10", "--prefix", "p:"], "");
    assert!(err.contains("--prefix only applies to a Redis store"), "{err}");
}

#[test]
fn cost_must_fit_the_limit() {
    let base = ["bench", "--limit", "5", "--window", "1s", "--requests", "10"];
    let err = failure(&[&base[..], &["--cost", "6"]].concat(), "");
    assert!(err.contains("--cost") && err.contains("exceeds the limit 5"), "{err}");
    let err = failure(&[&base[..], &["--cost", "0"]].concat(), "");
    assert!(err.contains("--cost") && err.contains("at least 1"), "{err}");
    let report: Value = serde_json::from_str(
        success(&[&base[..], &["--cost", "5", "--keys", "1", "--json"]].concat(), "").trim(),
    )
    .expect("one JSON object");
    assert_eq!((count(&report, "allowed"), count(&report, "cost")), (1, 5));
}

/// `--baseline naive-zset` runs the articles' script through the same
/// stack, and `--redis-stats` reports the server's CPU per call and memory
/// per key for either.
#[test]
fn naive_baseline_and_redis_side_figures() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    let base =
        ["bench", "--store", &url, "--limit", "10", "--window", "1m", "--keys", "3", "--concurrency", "2"];
    for baseline in [None, Some("naive-zset")] {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(["--requests", "300", "--redis-stats", "--json"]);
        if let Some(name) = baseline {
            args.extend(["--baseline", name]);
        }
        let report: Value = serde_json::from_str(success(&args, "").trim()).expect("one JSON object");
        assert_eq!(report["baseline"].as_str(), baseline, "{report}");
        assert_eq!(count(&report, "errors"), 0, "{report}");
        // One client, one clock: even the naive script admits 10 per key here.
        assert_eq!(count(&report, "allowed"), 30, "{report}");
        let redis = &report["redis"];
        assert!(count(redis, "evalsha_calls") > 0, "{report}");
        assert!(redis["usec_per_call"].as_f64().unwrap_or(0.0) > 0.0, "{report}");
        assert_eq!(count(redis, "keys_sampled"), 3, "{report}");
        assert!(redis["memory_per_key"].as_f64().unwrap_or(0.0) > 0.0, "{report}");
        // CPU seconds over wall seconds of one (single-threaded) server.
        let share = redis["server_cpu_share"].as_f64().unwrap_or(-1.0);
        assert!((0.0..=4.0).contains(&share), "{report}");
    }
    let rule = ["--limit", "10", "--window", "1m", "--requests", "10"];
    for baseline in ["naive-zset", "ping"] {
        let err = failure(&[&["bench", "--baseline", baseline][..], &rule].concat(), "");
        assert!(err.contains("--baseline runs on Redis"), "{err}");
    }
    let err = failure(&[&["bench", "--baseline", "naive-zset"][..], &rule].concat(), "");
    assert!(err.contains("--baseline runs on Redis"), "{err}");
    let err = failure(&[&["bench", "--redis-stats"][..], &rule].concat(), "");
    assert!(err.contains("--redis-stats needs a standalone"), "{err}");
}

/// `--baseline ping` sends one `PING` per check through the same stack and
/// admits it: a round trip per check, with no script and no key.
#[test]
fn ping_baseline_sends_one_ping_per_check() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    server.command("CONFIG RESETSTAT").expect("CONFIG RESETSTAT");
    let args = [
        "bench",
        "--store",
        &url,
        "--baseline",
        "ping",
        "--limit",
        "10",
        "--window",
        "1m",
        "--keys",
        "3",
        "--concurrency",
        "4",
        "--requests",
        "200",
        "--json",
    ];
    let report: Value = serde_json::from_str(success(&args, "").trim()).expect("one JSON object");
    assert_eq!(report["baseline"].as_str(), Some("ping"), "{report}");
    assert_eq!(count(&report, "errors"), 0, "{report}");
    // Nothing is limited: every check is a PING, admitted.
    assert_eq!(count(&report, "allowed"), 200, "{report}");
    assert_eq!(count(&report, "denied"), 0, "{report}");
    let port = server.port().to_string();
    let info = std::process::Command::new("redis-cli").args(["-p", &port, "INFO", "commandstats"]).output();
    let stats = String::from_utf8_lossy(&info.expect("redis-cli INFO").stdout).into_owned();
    let pings: u64 = stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_ping:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0);
    assert!(pings >= 200, "{stats}");
    assert_eq!(server.command("DBSIZE").expect("DBSIZE"), ":0", "a PING writes no key");
}
