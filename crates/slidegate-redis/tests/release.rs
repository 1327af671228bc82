//! release.lua on its own (a Cluster's cross-slot checks call it after a
//! slot denied): GCRA charges are taken back exactly when that is
//! possible, and kept — never over-credited — when a later charge may have
//! absorbed them. (The log, counter and fixed window are additive; the
//! cluster tests release them under load.)

mod support;

use std::time::Duration;

use slidegate::{Algorithm, ManualClock, Store};
use slidegate_testkit::conformance::{START_MS, rule};

/// 1000 per second: one unit is 1 ms of arrival time (1000 units of 1/limit ms).
const LIMIT: u64 = 1000;

/// Runs release.lua for one GCRA dimension charged `cost` at `charged_at`,
/// when the key held `ahead_before` (in 1/limit ms) before, released at
/// `released_at`.
async fn release(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    charged_at: u64,
    released_at: u64,
    cost: u64,
    ahead_before: u64,
) {
    let script = redis::Script::new(slidegate_redis::scripts::RELEASE);
    let reply: Vec<i64> = script
        .key(key)
        .arg(charged_at)
        .arg(released_at)
        .arg(cost)
        .arg(1)
        .arg(4) // GCRA
        .arg(LIMIT)
        .arg(1000) // window ms
        .arg(1) // buckets
        .arg(ahead_before + 1) // the receipt
        .invoke_async(conn)
        .await
        .expect("release.lua");
    assert_eq!(reply, [1]);
}

async fn state(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> String {
    redis::cmd("GET").arg(key).query_async(conn).await.expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_releases_take_back_only_what_is_still_there() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "release-gcra", clock.clone()).await;
    let mut conn = support::inspect(&server).await;
    let gcra = |name: &str| rule(1000, 1000, Algorithm::Gcra).named(name).expect("name");

    // Nothing charged since: back to what the key held.
    let untouched = gcra("untouched");
    let key = slidegate_redis::state_key(store.prefix(), &untouched, "k").expect("key");
    clock.set(START_MS);
    assert!(store.check(&untouched, "k", 1).await.expect("reservation").allowed);
    release(&mut conn, &key, START_MS, START_MS, 1, 0).await;
    assert_eq!(state(&mut conn, &key).await, format!("{START_MS}:0"), "empty again");

    // A bucket busy past the release: every later charge added its cost,
    // so ours is subtracted exactly.
    let busy = gcra("busy");
    let key = slidegate_redis::state_key(store.prefix(), &busy, "k").expect("key");
    clock.set(START_MS);
    assert!(store.check(&busy, "k", 500).await.expect("check").allowed);
    assert!(store.check(&busy, "k", 1).await.expect("reservation").allowed);
    clock.set(START_MS + 2);
    assert!(store.check(&busy, "k", 1).await.expect("check").allowed);
    release(&mut conn, &key, START_MS, START_MS + 3, 1, 500 * LIMIT).await;
    assert_eq!(state(&mut conn, &key).await, format!("{}:0", START_MS + 501));

    // An idle bucket: the reservation (arrival time START + 1) had drained
    // when a charge at START + 2 came, which started from its own time and
    // owes nothing to ours — taking 1 ms back would hand out a unit that
    // was never held (the over-admission this pins). Kept instead.
    let idle = gcra("idle");
    let key = slidegate_redis::state_key(store.prefix(), &idle, "k").expect("key");
    clock.set(START_MS);
    assert!(store.check(&idle, "k", 1).await.expect("reservation").allowed);
    clock.set(START_MS + 2);
    assert!(store.check(&idle, "k", 1).await.expect("check").allowed);
    release(&mut conn, &key, START_MS, START_MS + 2, 1, 0).await;
    assert_eq!(state(&mut conn, &key).await, format!("{}:0", START_MS + 3), "unchanged");
    let full = store.check(&idle, "k", 1000).await.expect("check");
    assert!(!full.allowed, "the charge at START + 2 still counts");
    assert_eq!(full.retry_after, Duration::from_millis(1));
    support::assert_every_key_has_ttl(&server).await;
}
