//! `RedisStore::server_stats`: the servers' memory and how many keys are
//! slidegate's, read with `INFO`, `DBSIZE` and `RANDOMKEY` (never `KEYS`),
//! on a real redis-server and a real Cluster.

mod support;

use std::num::NonZeroU32;

use slidegate::store::Request;
use slidegate::{Rule, Store};
use slidegate_redis::{KEY_SAMPLE, RedisStore};
use slidegate_testkit::RedisCluster;

fn rule() -> Rule {
    Rule::per_minute(NonZeroU32::new(10).expect("non-zero")).named("stats").expect("name")
}

async fn charge(store: &RedisStore, identities: usize) {
    let rule = rule();
    for i in 0..identities {
        let key = format!("user-{i}");
        store.check(&Request::new(&rule, &key, 1).expect("valid")).await.expect("check");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_slidegate_keys_among_others_on_one_server() {
    let server = support::server();
    let store = RedisStore::builder(server.url()).prefix("stats-a:").connect().await.expect("connect");
    let empty = store.server_stats().await.expect("stats");
    assert_eq!((empty.keys, empty.slidegate_keys, empty.sampled), (0, 0, 0), "an empty database");
    assert!(empty.used_memory_bytes > 0, "{empty:?}");

    charge(&store, 40).await;
    let ours = store.server_stats().await.expect("stats");
    assert_eq!(ours.keys, 40, "one state key per identity: {ours:?}");
    assert_eq!(ours.slidegate_keys, 40, "every sampled key is ours, so the count is exact");
    assert_eq!(ours.sampled, KEY_SAMPLE.min(40));

    // As many keys that are not slidegate's: the estimate is a share of
    // DBSIZE, within what 64 samples can tell.
    let mut conn = support::inspect(&server).await;
    for i in 0..40 {
        let _: () =
            redis::cmd("SET").arg(format!("other:{i}")).arg("x").query_async(&mut conn).await.expect("SET");
    }
    let mixed = store.server_stats().await.expect("stats");
    assert_eq!(mixed.keys, 80);
    assert!((1..80).contains(&mixed.slidegate_keys), "an estimate between none and all: {mixed:?}");
    assert_eq!(mixed.sampled, KEY_SAMPLE);

    // Another prefix sees none of them as its own (or an estimate of a few
    // at most, never the other store's keys as exact).
    let other = RedisStore::builder(server.url()).prefix("stats-b:").connect().await.expect("connect");
    assert_eq!(other.server_stats().await.expect("stats").slidegate_keys, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_over_the_primaries_of_a_cluster() {
    let cluster = RedisCluster::start(3, 0).expect("start a cluster");
    let store = RedisStore::builder(cluster.url()).prefix("stats-c:").connect().await.expect("connect");
    charge(&store, 60).await;
    let stats = store.server_stats().await.expect("stats");
    assert_eq!(stats.keys, 60, "DBSIZE summed over the primaries: {stats:?}");
    assert_eq!(stats.slidegate_keys, 60);
    // Three servers' memory: more than any one server holds empty.
    let single = support::server();
    let alone = RedisStore::builder(single.url()).connect().await.expect("connect");
    let one = alone.server_stats().await.expect("stats").used_memory_bytes;
    assert!(stats.used_memory_bytes > 2 * one, "{} vs one server's {one}", stats.used_memory_bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_an_error() {
    let mut server = support::server();
    let store = RedisStore::builder(server.url()).prefix("stats-d:").connect().await.expect("connect");
    server.kill();
    let error = store.server_stats().await.expect_err("the server is gone");
    assert!(error.to_string().contains("server stats"), "{error}");
}
