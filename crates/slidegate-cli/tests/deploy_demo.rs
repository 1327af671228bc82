//! `deploy/demo/run`: the compose demo's topology on this machine — Redis,
//! two slidegate instances sharing it, an upstream and a real Envoy, with
//! the demo's own `rules.yaml` and `envoy.yaml` — limits a user across
//! both instances exactly: five answers of 200, then 429.

use std::path::Path;
use std::process::Command;

use slidegate_testkit::envoy_binary;

#[test]
fn the_demo_limits_a_user_across_two_instances_behind_envoy() {
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/demo/run");
    let redis = std::env::var_os("SLIDEGATE_REDIS_SERVER").unwrap_or_else(|| "redis-server".into());
    let output = Command::new(run)
        .arg("--once")
        .env("SLIDEGATE", env!("CARGO_BIN_EXE_slidegate"))
        .env("ENVOY", envoy_binary())
        .env("REDIS_SERVER", redis)
        .output()
        .expect("run deploy/demo/run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the demo failed:\n{stdout}\n{stderr}");
    let statuses: Vec<&str> =
        stdout.lines().filter_map(|line| line.strip_prefix("alice ")?.split_whitespace().nth(1)).collect();
    assert_eq!(statuses, ["200", "200", "200", "200", "200", "429", "429"], "{stdout}");
    assert!(stdout.contains("\"per_user\";r=0;t=10"), "the IETF RateLimit field names the limit: {stdout}");
}
