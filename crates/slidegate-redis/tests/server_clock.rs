//! Exactness under concurrency on the Redis server's clock, unique members,
//! TTLs, and transparent script reloads.

mod support;

use std::time::Duration;

use futures::future::join_all;
use slidegate::store::{Dimensions, Request};
use slidegate::{Algorithm, ManualClock, Rule, Store};
use slidegate_testkit::conformance::{START_MS, rule};

/// 64 tasks hammering one key admit exactly N in a window: the script is
/// atomic, so no two tasks take the last unit. (The blog scripts' burst
/// admitted ~4x the limit.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_admit_exactly_the_limit() {
    let server = support::server();
    let store = support::server_clock_store(&server, "concurrent").await;
    // (GCRA: a burst of the limit, then one per 6 s — longer than the test.
    // The fixed window is left out: its boundary may fall inside the test.)
    for algorithm in [Algorithm::SlidingLog, Algorithm::SLIDING_COUNTER, Algorithm::Gcra] {
        // A window far longer than the test: every request is in one window.
        let rule = rule(100, 600_000, algorithm);
        let tasks = (0..64).map(|_| {
            let (store, rule) = (store.clone(), rule.clone());
            tokio::spawn(async move {
                let mut admitted = 0u32;
                for _ in 0..20 {
                    admitted += u32::from(
                        store
                            .check(&Request::new(&rule, "hot", 1).expect("valid request"))
                            .await
                            .expect("check")
                            .allowed,
                    );
                }
                admitted
            })
        });
        let admitted: u32 = join_all(tasks).await.into_iter().map(|r| r.expect("task")).sum();
        assert_eq!(admitted, 100, "{rule}: 1280 concurrent requests, limit 100");
    }
    support::assert_every_key_has_ttl(&server).await;
}

/// 1000 requests stamped with the same millisecond, from several clients
/// (separate connections), admit exactly N: entries never collapse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_millisecond_requests_never_collapse() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let prefix = support::unique_prefix("same-ms");
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(
            slidegate_redis::RedisStore::builder(server.url())
                .prefix(prefix.clone())
                .client_clock(clock.clone())
                .connect()
                .await
                .expect("connect"),
        );
    }
    let rule = rule(100, 1000, Algorithm::SlidingLog);
    let tasks = (0..1000).map(|i| {
        let (store, rule) = (clients[i % 4].clone(), rule.clone());
        tokio::spawn(async move {
            store.check(&Request::new(&rule, "ms", 1).expect("valid request")).await.expect("check").allowed
        })
    });
    let admitted = join_all(tasks).await.into_iter().filter(|r| *r.as_ref().expect("task")).count();
    assert_eq!(admitted, 100);
    let mut conn = support::inspect(&server).await;
    let key = slidegate_redis::state_key(&prefix, &rule, "ms").expect("key");
    assert_eq!(support::log_entries(&mut conn, &key).await, 100, "one entry per admitted request");

    // The same above a limit of 128, where the log is a list of items (one
    // per millisecond: all 200 admitted requests share one).
    let rule = slidegate_testkit::conformance::rule(200, 1000, Algorithm::SlidingLog);
    let tasks = (0..1000).map(|i| {
        let (store, rule) = (clients[i % 4].clone(), rule.clone());
        tokio::spawn(async move {
            store.check(&Request::new(&rule, "ms", 1).expect("valid request")).await.expect("check").allowed
        })
    });
    let admitted = join_all(tasks).await.into_iter().filter(|r| *r.as_ref().expect("task")).count();
    assert_eq!(admitted, 200);
    let key = slidegate_redis::state_key(&prefix, &rule, "ms").expect("key");
    assert_eq!(support::log_entries(&mut conn, &key).await, 200, "every admitted request counted");
    support::assert_every_key_has_ttl(&server).await;
}

/// Every key any algorithm writes carries a TTL: the longest time a charge
/// can still count, plus the 1 s slack. That is the window for the log,
/// GCRA and fixed window, and the window plus one bucket for the sliding
/// counter (a bucket counts while any part of it is inside the window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_without_ttl() {
    let server = support::server();
    let store = support::server_clock_store(&server, "ttl").await;
    let window: u64 = 2_000;
    let buckets = 10;
    for algorithm in slidegate_testkit::conformance::algorithms(buckets) {
        let rule = rule(5, window, algorithm).named(algorithm.short_name()).expect("name");
        for i in 0..40 {
            let key = format!("user-{}", i % 7);
            let _ = store
                .check(&Request::new(&rule, &key, 1 + i % 3).expect("valid request"))
                .await
                .expect("check");
        }
        let huge = "h".repeat(1 << 20);
        for key in ["{x}", "a\nb", huge.as_str()] {
            let _ =
                store.check(&Request::new(&rule, key, 1).expect("valid request")).await.expect("hostile key");
        }
        let holds = match algorithm {
            Algorithm::SlidingCounter { .. } => window + window / u64::from(buckets),
            _ => window,
        };
        let prefix = format!("{}{}:", store.prefix(), algorithm.short_name());
        let keys = support::keys_with_ttl(&server, &prefix).await;
        assert_eq!(keys.len(), 10, "{algorithm}: 7 users and 3 hostile keys, got {keys:?}");
        for (key, ttl) in &keys {
            let max = i64::try_from(holds + 1000).expect("small");
            assert!(*ttl > 0 && *ttl <= max, "{algorithm}: {key} has PTTL {ttl}, at most {max}");
            assert!(key.len() < 120, "key is bounded: {} bytes", key.len());
        }
    }
}

/// `SCRIPT FLUSH` in the middle of a run surfaces no error, on every path
/// (single checks of each algorithm, auto-batched or not, multi-dimension
/// checks, batches): the store reloads the script on NOSCRIPT and retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_is_invisible() {
    support::record_metrics();
    let server = support::server();
    let store = support::server_clock_store(&server, "flush").await;
    let rules: Vec<Rule> =
        slidegate_testkit::conformance::algorithms(10).into_iter().map(|a| rule(1000, 60_000, a)).collect();
    let reloads_before = support::counter("slidegate_script_reloads_total");
    for round in 0..5 {
        let tasks = (0..32).map(|i| {
            let (store, rules) = (store.clone(), rules.clone());
            tokio::spawn(async move {
                let rule = &rules[i % rules.len()];
                let key = format!("k{i}");
                match i % 4 {
                    0 | 1 => {
                        store.check(&Request::new(rule, &key, 1).expect("valid request")).await.map(|_| ())
                    }
                    2 => {
                        let other = &rules[(i + 1) % rules.len()];
                        store
                            .check_all(
                                &Dimensions::new(&[(rule, key.as_str()), (other, "shared")], 1)
                                    .expect("valid dimensions"),
                            )
                            .await
                            .map(|_| ())
                    }
                    _ => {
                        let batch = [
                            Request::new(rule, key.as_str(), 1).expect("valid request"),
                            Request::new(rule, "b", 2).expect("valid request"),
                        ];
                        let results = store.check_batch(&batch).await;
                        results.into_iter().collect::<Result<Vec<_>, _>>().map(|_| ())
                    }
                }
            })
        });
        assert_eq!(server.command("SCRIPT FLUSH").expect("flush"), "+OK", "round {round}");
        for result in join_all(tasks).await {
            result.expect("task").expect("no error after SCRIPT FLUSH");
        }
    }
    assert!(
        support::counter("slidegate_script_reloads_total") > reloads_before,
        "the scripts were reloaded, not found loaded"
    );
    support::assert_every_key_has_ttl(&server).await;
}

/// A dead server is an `Err` that says so (transient), never a silent allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_server_is_a_transient_error() {
    let mut server = support::server();
    let store = slidegate_redis::RedisStore::builder(server.url())
        .prefix(support::unique_prefix("dead"))
        .response_timeout(Duration::from_millis(300))
        .connect()
        .await
        .expect("connect");
    let rule = rule(10, 1000, Algorithm::SlidingLog);
    assert!(store.check(&Request::new(&rule, "k", 1).expect("valid request")).await.expect("alive").allowed);
    server.kill();
    let err =
        store.check(&Request::new(&rule, "k", 1).expect("valid request")).await.expect_err("server is dead");
    assert!(err.is_transient(), "{err}");
    server.restart().expect("restart");
    let mut recovered = false;
    for _ in 0..50 {
        if store.check(&Request::new(&rule, "k", 1).expect("valid request")).await.is_ok() {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "the store reconnects by itself after a restart");
}

/// A bad URL is a clear error, not a panic.
#[tokio::test]
async fn bad_url_is_a_clear_error() {
    let err = slidegate_redis::RedisStore::connect("not a url").await.expect_err("bad url");
    assert!(err.to_string().contains("invalid Redis URL"), "{err}");
    assert_eq!(err.kind(), slidegate::ErrorKind::InvalidConfig);
}

#[tokio::test]
async fn a_prefix_that_would_break_the_key_layout_is_refused() {
    let server = support::server();
    for (prefix, why) in
        [("app{1}:", "hash tag"), ("my app:", "whitespace"), (&*"p".repeat(65), "at most 64")]
    {
        let err = slidegate_redis::RedisStore::builder(server.url())
            .prefix(prefix)
            .connect()
            .await
            .expect_err("refused before connecting");
        assert_eq!(err.kind(), slidegate::ErrorKind::InvalidConfig, "{err}");
        assert!(err.to_string().contains(why), "{err}");
    }
}
