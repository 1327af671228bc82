//! `slidegate bench`: counts add up, JSON parses, Redis works.

mod common;

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
}

#[test]
fn human_summary_without_json() {
    let args = ["bench", "--algorithm", "gcra", "--limit", "5", "--window", "1s", "--requests", "100"];
    let out = success(&args, "");
    assert!(out.contains("decisions") && out.contains("p99"), "{out}");
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
    let url = server.url();
    let args = [
        "bench",
        "--store",
        &url,
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
    ];
    let report: Value = serde_json::from_str(success(&args, "").trim()).expect("one JSON object");
    assert_eq!(count(&report, "requests"), 200);
    assert_eq!(count(&report, "errors"), 0, "{report}");
    // 5 keys × 10 per window, and the run is far shorter than the window.
    assert_eq!(count(&report, "allowed"), 50, "{report}");
}
