//! `slidegate simulate`: the boundary burst, in numbers and as a picture.

mod common;

use std::time::Duration;

use common::success;
use slidegate_cli::simulate::traffic::{Pattern, TrafficSpec};
use slidegate_cli::simulate::{rules, simulate};

#[tokio::test]
async fn boundary_pattern_separates_fixed_windows_from_sliding_ones() {
    let limit = 20;
    let rules = rules(limit, Duration::from_secs(1), 10).unwrap();
    let spec = TrafficSpec { limit, window_ms: 1000, duration_ms: 5000, seed: 42 };
    let result = simulate(Pattern::Boundary, &spec, &rules).await.unwrap();
    let by_name = |short: &str| {
        result.runs.iter().find(|run| run.algorithm.short_name() == short).expect("every algorithm runs")
    };
    let (log, counter, fixed) = (by_name("log"), by_name("counter"), by_name("fixed"));
    assert!(fixed.max_in_window > u64::from(limit), "fixed: {}", fixed.max_in_window);
    assert!(log.max_in_window <= u64::from(limit), "log: {}", log.max_in_window);
    assert!(counter.max_in_window <= u64::from(limit), "counter: {}", counter.max_in_window);
    assert!(log.admitted >= counter.admitted);
}

#[test]
fn default_run_prints_every_pattern() {
    let out = success(&["simulate", "--window", "1s", "--limit", "20"], "");
    for pattern in ["boundary", "steady", "bursty", "many-keys"] {
        assert!(out.contains(&format!("{pattern} — ")), "{pattern} missing from\n{out}");
    }
    assert!(out.contains("fixed window") && out.contains("YES 2.00×"), "{out}");
}

#[test]
fn plot_is_written_as_svg() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("boundary.svg");
    let path_text = path.to_str().unwrap();
    let args = ["simulate", "--pattern", "boundary", "--window", "1s", "--limit", "20", "--plot", path_text];
    let out = success(&args, "");
    assert!(out.contains(&format!("wrote plot to {path_text}")), "{out}");
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..60.min(svg.len())]);
    assert!(svg.contains("fixed window"));
}

#[test]
fn same_seed_same_table() {
    let args = ["simulate", "--pattern", "bursty", "--window", "1s", "--limit", "20", "--seed", "9"];
    assert_eq!(success(&args, ""), success(&args, ""));
}
