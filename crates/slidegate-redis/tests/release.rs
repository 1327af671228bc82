//! release.lua on its own (a Cluster's cross-slot checks call it after a
//! slot denied), for GCRA, which is not additive: a charge is taken back
//! only when the key still holds exactly what it left — then exactly —
//! and otherwise kept, never over-credited. (The log, counter and fixed
//! window are additive; the cluster tests release them under load.)

mod support;

use std::time::Duration;

use slidegate::store::Request;
use slidegate::{Algorithm, ManualClock, Rule, Store};
use slidegate_testkit::conformance::{START_MS, rule};

/// 1000 per second: one unit is 1 ms of arrival time.
const LIMIT: u64 = 1000;

/// Runs release.lua for one GCRA dimension charged `cost` at `charged_at`,
/// whose charge left the key at charge count `receipt`.
async fn release(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    charged_at: u64,
    cost: u64,
    receipt: u64,
) {
    let script = redis::Script::new(slidegate_redis::scripts::RELEASE);
    let reply: Vec<i64> = script
        .key(key)
        .arg("") // unused
        .arg(charged_at)
        .arg("") // slack: SLACK_MS
        .arg(1)
        .arg(4) // GCRA
        .arg(LIMIT)
        .arg(1000) // window ms
        .arg(1) // buckets
        .arg(receipt)
        .arg(cost)
        .invoke_async(conn)
        .await
        .expect("release.lua");
    assert_eq!(reply, [1]);
}

async fn state(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> String {
    redis::cmd("GET").arg(key).query_async(conn).await.expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_releases_take_back_only_what_provably_still_counts() {
    let server = support::server();
    let clock = ManualClock::new(START_MS);
    let store = support::client_clock_store(&server, "release-gcra", clock.clone()).await;
    let mut conn = support::inspect(&server).await;
    let gcra = |name: &str| -> Rule { rule(1000, 1000, Algorithm::Gcra).named(name).expect("name") };

    // Nothing touched the key since: exactly what it held before, even
    // after time passed.
    let untouched = gcra("untouched");
    let key = slidegate_redis::state_key(store.prefix(), &untouched, "k").expect("key");
    clock.set(START_MS);
    assert!(
        store
            .check(&Request::new(&untouched, "k", 500).expect("valid request"))
            .await
            .expect("check")
            .allowed
    );
    assert!(
        store
            .check(&Request::new(&untouched, "k", 1).expect("valid request"))
            .await
            .expect("reservation")
            .allowed
    );
    assert_eq!(state(&mut conn, &key).await, format!("{}:0:2", START_MS + 501));
    release(&mut conn, &key, START_MS, 1, 2).await;
    assert_eq!(state(&mut conn, &key).await, format!("{}:0:3", START_MS + 500), "back to before");
    clock.set(START_MS + 3);
    let d = store.check(&Request::new(&untouched, "k", 503).expect("valid request")).await.expect("check");
    assert!(d.allowed && d.remaining == 0, "the released unit is free again: {d:?}");

    // A charge came after ours (busy bucket): kept.
    let busy = gcra("busy");
    let key = slidegate_redis::state_key(store.prefix(), &busy, "k").expect("key");
    clock.set(START_MS);
    assert!(
        store.check(&Request::new(&busy, "k", 1).expect("valid request")).await.expect("reservation").allowed
    );
    assert!(store.check(&Request::new(&busy, "k", 1).expect("valid request")).await.expect("check").allowed);
    release(&mut conn, &key, START_MS, 1, 1).await;
    assert_eq!(state(&mut conn, &key).await, format!("{}:0:2", START_MS + 2), "unchanged");

    // The over-admission this pins: reservations X then A at START, X
    // released, an idle-bucket charge Y at START + 5 leaves the key as A
    // left it; taking A back then would drop Y's charge. The charge
    // count tells them apart: kept.
    let interleaved = gcra("interleaved");
    let key = slidegate_redis::state_key(store.prefix(), &interleaved, "k").expect("key");
    clock.set(START_MS);
    assert!(
        store.check(&Request::new(&interleaved, "k", 5).expect("valid request")).await.expect("X").allowed
    );
    assert!(
        store.check(&Request::new(&interleaved, "k", 5).expect("valid request")).await.expect("A").allowed
    );
    release(&mut conn, &key, START_MS, 5, 1).await; // X: A came since, kept
    assert_eq!(state(&mut conn, &key).await, format!("{}:0:2", START_MS + 10));
    clock.set(START_MS + 10);
    assert!(
        store.check(&Request::new(&interleaved, "k", 5).expect("valid request")).await.expect("Y").allowed
    );
    release(&mut conn, &key, START_MS, 5, 2).await; // A: Y came since, kept
    assert_eq!(state(&mut conn, &key).await, format!("{}:0:3", START_MS + 15));
    let full =
        store.check(&Request::new(&interleaved, "k", 1000).expect("valid request")).await.expect("check");
    assert!(!full.allowed, "Y's charge still counts");
    assert_eq!(full.retry_after, Duration::from_millis(5));
    support::assert_every_key_has_ttl(&server).await;
}
