//! The sliding log's two Redis layouts (a packed string for new keys up to
//! a limit of 128, a list above): a named rule whose limit moves across
//! 128 keeps its log, and keys the log cannot use are clear errors.

mod support;

use std::time::Duration;

use slidegate::store::Request;
use slidegate::{Algorithm, ManualClock, Rule, Store};
use slidegate_testkit::conformance::{START_MS, rule};

const WINDOW: u64 = 60_000;

fn api(limit: u32) -> Rule {
    rule(limit, WINDOW, Algorithm::SlidingLog).named("api").expect("name")
}

async fn kind(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(conn).await.expect("TYPE")
}

async fn ttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.expect("PTTL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_changed_across_the_layouts_keeps_the_log() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "layout-change", clock.clone()).await;
    let mut conn = support::inspect(&server).await;
    let key = slidegate_redis::state_key(store.prefix(), &api(100), "u").expect("key");

    for i in 0..100 {
        assert!(
            store
                .check(&Request::new(&api(100), "u", 1).expect("valid request"))
                .await
                .expect("check")
                .allowed,
            "request {i}"
        );
    }
    assert!(
        !store.check(&Request::new(&api(100), "u", 1).expect("valid request")).await.expect("check").allowed
    );
    assert_eq!(kind(&mut conn, &key).await, "string");

    // Raised to 200: the same log, now a list; exactly 100 more fit.
    clock.advance(Duration::from_millis(10));
    for i in 0..100 {
        let d = store.check(&Request::new(&api(200), "u", 1).expect("valid request")).await.expect("check");
        assert!(d.allowed, "request {i}");
        assert_eq!(d.remaining, 99 - i);
    }
    assert_eq!(kind(&mut conn, &key).await, "list");
    let denied = store.check(&Request::new(&api(200), "u", 1).expect("valid request")).await.expect("check");
    assert!(!denied.allowed);
    // The oldest entry (START_MS) leaves first.
    assert_eq!(denied.retry_after, Duration::from_millis(WINDOW - 10));
    assert_eq!(denied.reset_after, Duration::from_millis(WINDOW));
    assert_eq!(support::log_entries(&mut conn, &key).await, 200);

    // Lowered to 100 again: still a list, every entry kept (the limit may
    // rise again within the window: nothing that counts may be dropped).
    // Room comes back once the 101st oldest, START_MS + 10, leaves.
    clock.advance(Duration::from_millis(10));
    let denied = store.check(&Request::new(&api(100), "u", 1).expect("valid request")).await.expect("check");
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Duration::from_millis(WINDOW - 10));
    assert_eq!(kind(&mut conn, &key).await, "list");
    assert_eq!(support::log_entries(&mut conn, &key).await, 200);
    let left = ttl(&mut conn, &key).await;
    let most = WINDOW + 1000 + slidegate_redis::DEFAULT_MAX_CLOCK_SKEW.as_millis() as u64;
    assert!(left > 0 && left <= most as i64, "TTL kept: {left}");

    // Past the first 100 entries' window, the second 100 still count.
    clock.set(START_MS + WINDOW);
    let denied = store.check(&Request::new(&api(100), "u", 1).expect("valid request")).await.expect("check");
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Duration::from_millis(10));
    clock.set(START_MS + WINDOW + 10);
    let d = store.check(&Request::new(&api(100), "u", 1).expect("valid request")).await.expect("check");
    assert!(d.allowed);
    assert_eq!(d.remaining, 99);
    assert_eq!(kind(&mut conn, &key).await, "string", "a list with no charge left starts over packed");
    support::assert_every_key_has_ttl(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_keys_and_times_are_errors() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "layout-errors", clock.clone()).await;
    let mut conn = support::inspect(&server).await;
    // A hash, a sorted set and a list of bare times (what the blog scripts
    // write): none is read as a log, whatever the limit.
    let writes: [&[&str]; 3] = [
        &["HSET", "f", "v"],
        &["ZADD", "1700000000000", "1700000000000"],
        &["RPUSH", "1700000000000", "1700000000001"],
    ];
    for limit in [5, 500] {
        let rule = api(limit);
        for write in writes {
            let key = slidegate_redis::state_key(store.prefix(), &rule, "other").expect("key");
            let () =
                redis::cmd(write[0]).arg(&key).arg(&write[1..]).query_async(&mut conn).await.expect("write");
            let before: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.expect("DUMP");
            let err = store
                .check(&Request::new(&rule, "other", 1).expect("valid request"))
                .await
                .expect_err("no log");
            assert!(err.to_string().contains("not a sliding log"), "{write:?}: {err}");
            let after: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut conn).await.expect("DUMP");
            assert_eq!(before, after, "{write:?}: the foreign key is left alone");
            let () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.expect("DEL");
        }
    }
    // A client clock beyond the last time every store decides exactly.
    clock.set(slidegate::limits::MAX_TIME_MS);
    assert!(
        store
            .check(&Request::new(&api(5), "future", 1).expect("valid request"))
            .await
            .expect("the last exact time")
            .allowed
    );
    clock.set(slidegate::limits::MAX_TIME_MS + 1);
    let err = store
        .check(&Request::new(&api(5), "future", 1).expect("valid request"))
        .await
        .expect_err("time out of range");
    assert_eq!(err.kind(), slidegate::ErrorKind::InvalidTime, "{err}");
}

async fn items(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("LLEN").arg(key).query_async(conn).await.expect("LLEN")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_log_costs_one_item_per_request_whatever_its_cost() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "layout-weighted", clock.clone()).await;
    let mut conn = support::inspect(&server).await;
    let rule = api(1_000_000);
    let key = slidegate_redis::state_key(store.prefix(), &rule, "bytes").expect("key");

    // 600,000 units in one request, then 1000 requests of one unit in the
    // same millisecond: one item holds them all.
    assert_eq!(
        store
            .check(&Request::new(&rule, "bytes", 600_000).expect("valid request"))
            .await
            .expect("check")
            .remaining,
        400_000
    );
    for _ in 0..1000 {
        assert!(
            store
                .check(&Request::new(&rule, "bytes", 1).expect("valid request"))
                .await
                .expect("check")
                .allowed
        );
    }
    assert_eq!(items(&mut conn, &key).await, 1);
    assert_eq!(support::log_entries(&mut conn, &key).await, 601_000);
    let bytes: u64 =
        redis::cmd("MEMORY").arg("USAGE").arg(&key).query_async(&mut conn).await.expect("MEMORY");
    assert!(bytes <= 256, "{bytes} bytes for one item");

    // 500,000 more do not fit until the first millisecond leaves.
    clock.advance(Duration::from_millis(10));
    let denied =
        store.check(&Request::new(&rule, "bytes", 500_000).expect("valid request")).await.expect("check");
    assert!(!denied.allowed);
    assert_eq!(denied.remaining, 399_000);
    assert_eq!(denied.retry_after, Duration::from_millis(WINDOW - 10));
    assert_eq!(
        store
            .check(&Request::new(&rule, "bytes", 300_000).expect("valid request"))
            .await
            .expect("check")
            .remaining,
        99_000
    );
    assert_eq!(items(&mut conn, &key).await, 2);

    // A client clock stepping back lands in its own millisecond's item,
    // between the two.
    clock.set(START_MS + 5);
    assert_eq!(
        store
            .check(&Request::new(&rule, "bytes", 9_000).expect("valid request"))
            .await
            .expect("check")
            .remaining,
        90_000
    );
    clock.set(START_MS);
    assert_eq!(
        store
            .check(&Request::new(&rule, "bytes", 1_000).expect("valid request"))
            .await
            .expect("check")
            .remaining,
        89_000
    );
    assert_eq!(items(&mut conn, &key).await, 3);

    // The first millisecond leaves: its 602,000 units with it.
    clock.set(START_MS + WINDOW);
    let d = store.check(&Request::new(&rule, "bytes", 690_000).expect("valid request")).await.expect("check");
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.remaining, 1_000_000 - 309_000 - 690_000);
    assert_eq!(support::log_entries(&mut conn, &key).await, 309_000 + 690_000);
    support::assert_every_key_has_ttl(&server).await;
}

/// A list item as the scripts write it: time, cost, running total.
fn item(time: u64, cost: u32, total: u64) -> Vec<u8> {
    let mut bytes = time.to_be_bytes()[2..].to_vec();
    bytes.extend_from_slice(&cost.to_be_bytes());
    bytes.extend_from_slice(&total.to_be_bytes()[1..]);
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_totals_restart_before_they_lose_precision() {
    let server = support::server();
    let clock = ManualClock::new(START_MS + 10);
    let store = support::client_clock_store(&server, "layout-renumber", clock.clone()).await;
    let mut conn = support::inspect(&server).await;
    let rule = api(1000);
    let key = slidegate_redis::state_key(store.prefix(), &rule, "long-lived").expect("key");
    // A log whose totals reached 2^50 (years of traffic without a pause).
    let top = 1u64 << 50;
    let () = redis::cmd("RPUSH")
        .arg(&key)
        .arg(item(START_MS, 3, top - 5))
        .arg(item(START_MS + 1, 2, top - 3))
        .query_async(&mut conn)
        .await
        .expect("RPUSH");
    let () = redis::cmd("PEXPIRE").arg(&key).arg(WINDOW + 1000).query_async(&mut conn).await.expect("TTL");
    assert_eq!(
        store
            .check(&Request::new(&rule, "long-lived", 10).expect("valid request"))
            .await
            .expect("check")
            .remaining,
        1000 - 15
    );
    let items: Vec<Vec<u8>> =
        redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query_async(&mut conn).await.expect("LRANGE");
    assert_eq!(items, [item(START_MS, 3, 3), item(START_MS + 1, 2, 5), item(START_MS + 10, 10, 15)]);
    clock.set(START_MS + WINDOW);
    assert_eq!(
        store
            .check(&Request::new(&rule, "long-lived", 1).expect("valid request"))
            .await
            .expect("check")
            .remaining,
        1000 - 13
    );
    support::assert_every_key_has_ttl(&server).await;
}
