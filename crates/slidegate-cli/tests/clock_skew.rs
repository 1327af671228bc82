//! Two `slidegate bench` processes share one Redis key while one of them
//! runs 30 s in the future (libfaketime). The Redis server's clock decides,
//! so client skew cannot over-admit: together they admit exactly the limit.
//!
//! Needs libfaketime (`apt-get install faketime`; scripts/test installs it),
//! preloaded directly rather than through the `faketime` wrapper.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

const LIMIT: u64 = 50;
const SKEW: &str = "+30s";

/// The bench flags both processes share.
fn bench_args(url: &str, prefix: &str) -> Vec<String> {
    let limit = LIMIT.to_string();
    [
        "bench",
        "--store",
        url,
        "--algorithm",
        "log",
        "--limit",
        &limit,
        "--window",
        "10s",
        "--keys",
        "1",
        "--concurrency",
        "8",
        "--duration",
        "2s",
        "--json",
        "--prefix",
        prefix,
        "--policy",
        "fail-closed",
        // Generous, so that a slow moment on a busy machine is not a
        // degraded (and, under fail-closed, denied) answer: this test is
        // about clocks, not latency.
        "--deadline",
        "5s",
        "--timeout",
        "5s",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect()
}

/// `program` set to run `SKEW` in the future: libfaketime preloaded. Only
/// the wall clock is moved: timers and latency use the monotonic one.
fn skewed(library: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command.env("LD_PRELOAD", library).env("FAKETIME", SKEW).env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    command
}

/// The libfaketime library, once checked to really move the clock; fails
/// the test with what to install otherwise.
fn require_faketime() -> PathBuf {
    let library = slidegate_testkit::libfaketime().unwrap_or_else(|error| panic!("{error}"));
    let output = match skewed(&library, "date").arg("+%s").output() {
        Ok(output) if output.status.success() => output,
        Ok(output) => panic!(
            "`date` under {} failed ({}): {}; reinstall it with `apt-get install faketime`",
            library.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => panic!("cannot run `date`: {error}"),
    };
    let faked: u64 = String::from_utf8_lossy(&output.stdout).trim().parse().expect("date +%s prints seconds");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970");
    // 30 s of skew with a wide margin: this checks the tool works at all.
    assert!(faked >= now.as_secs() + 20, "libfaketime did not move the clock: {faked} vs {}", now.as_secs());
    library
}

fn spawn(mut command: Command) -> Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn slidegate")
}

fn report(name: &str, output: &Output) -> Value {
    assert!(output.status.success(), "bench {name} failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("bench {name}: not one JSON object: {e}"))
}

fn count(report: &Value, field: &str) -> u64 {
    report[field].as_u64().unwrap_or_else(|| panic!("{field} missing in {report}"))
}

#[test]
fn thirty_seconds_of_client_skew_cannot_over_admit() {
    let library = require_faketime();
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let prefix = format!("sg:skew:{}:", std::process::id());
    let args = bench_args(&server.url(), &prefix);

    let mut honest = Command::new(env!("CARGO_BIN_EXE_slidegate"));
    honest.args(&args);
    let mut skewed = skewed(&library, env!("CARGO_BIN_EXE_slidegate"));
    skewed.args(&args);
    let (honest, skewed) = (spawn(honest), spawn(skewed));
    let a = report("without skew", &honest.wait_with_output().expect("wait for slidegate"));
    let b = report("with skew", &skewed.wait_with_output().expect("wait for slidegate"));

    for (name, report) in [("without skew", &a), ("with skew", &b)] {
        assert_eq!(count(report, "degraded"), 0, "{name}: {report}");
        assert_eq!(count(report, "errors"), 0, "{name}: {report}");
    }
    assert_eq!(count(&a, "allowed") + count(&b, "allowed"), LIMIT, "without skew: {a}\nwith skew: {b}");
}
