//! TLS and ACL users: a real `redis-server` with a TLS port and
//! certificates this test makes (rcgen), an ACL user; a wrong CA, a wrong
//! password, a missing CA file are clear errors, not hangs.
#![cfg(feature = "tls")]

use std::num::NonZeroU32;
use std::time::Duration;

use slidegate::store::{Request, Store};
use slidegate::{ErrorKind, Rule};
use slidegate_redis::RedisStore;
use slidegate_testkit::{Pki, TlsServer};

fn rule() -> Rule {
    Rule::per_minute(NonZeroU32::new(3).expect("3"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_over_tls_with_the_tests_ca() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = TlsServer::start(dir.path(), &Pki::new()).expect("redis-server with TLS");
    let store = RedisStore::builder(server.url())
        .tls_ca_file(&server.ca_file)
        .prefix("t:tls:")
        .connect()
        .await
        .expect("TLS connect as alice");
    let r = rule();
    let request = Request::new(&r, "k", 1).expect("request");
    let mut admitted = 0;
    for _ in 0..5 {
        admitted += usize::from(store.check(&request).await.expect("check").allowed);
    }
    assert_eq!(admitted, 3, "exactly the limit, over TLS");
}

/// A connection attempt bounded by a generous guard: it must end, with an
/// error of its own, long before.
async fn connect_error(builder: slidegate_redis::RedisStoreBuilder) -> slidegate::Error {
    tokio::time::timeout(Duration::from_secs(30), builder.connect())
        .await
        .expect("an error, not a hang")
        .expect_err("the connection must fail")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_a_wrong_password_and_a_missing_ca_file_are_clear_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = TlsServer::start(dir.path(), &Pki::new()).expect("redis-server with TLS");
    let port = server.tls_port;
    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, Pki::new().ca_pem).expect("write");
    let url = server.url();

    let wrong_ca = connect_error(RedisStore::builder(&url).tls_ca_file(&other)).await;
    let text = format!("{wrong_ca:#}").to_lowercase();
    assert!(text.contains("certificate") || text.contains("issuer") || text.contains("tls"), "{wrong_ca:#}");
    assert!(!text.contains("s3cret"), "no password in messages: {wrong_ca:#}");

    // The system's roots do not know the test's CA either.
    let system_roots = connect_error(RedisStore::builder(&url)).await;
    assert!(format!("{system_roots:#}").to_lowercase().contains("certificate"), "{system_roots:#}");

    let wrong_password = connect_error(
        RedisStore::builder(format!("rediss://alice:nope@127.0.0.1:{port}/"))
            .tls_ca_file(dir.path().join("ca.pem")),
    )
    .await;
    let text = format!("{wrong_password:#}");
    assert!(text.contains("WRONGPASS") || text.to_lowercase().contains("auth"), "{text}");

    // None of these heals by waiting: a lazy store refuses them as well.
    let lazy_wrong_ca = connect_error(RedisStore::builder(&url).tls_ca_file(&other).lazy(true)).await;
    assert_eq!(lazy_wrong_ca.kind(), ErrorKind::InvalidConfig, "{lazy_wrong_ca}");
    assert!(lazy_wrong_ca.to_string().to_lowercase().contains("certificate"), "{lazy_wrong_ca}");
    let lazy_wrong_password = connect_error(
        RedisStore::builder(format!("rediss://alice:nope@127.0.0.1:{port}/"))
            .tls_ca_file(dir.path().join("ca.pem"))
            .lazy(true),
    )
    .await;
    assert_eq!(lazy_wrong_password.kind(), ErrorKind::InvalidConfig, "{lazy_wrong_password}");

    let missing = connect_error(RedisStore::builder(&url).tls_ca_file(dir.path().join("missing.pem"))).await;
    assert_eq!(missing.kind(), ErrorKind::InvalidConfig);
    assert!(missing.to_string().contains("missing.pem"), "{missing}");
    std::fs::write(dir.path().join("empty.pem"), "not a certificate").expect("write");
    let empty = connect_error(RedisStore::builder(&url).tls_ca_file(dir.path().join("empty.pem"))).await;
    assert!(empty.to_string().contains("no PEM certificate"), "{empty}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = slidegate_testkit::RedisCluster::start_tls(3, 0, dir.path(), &Pki::new())
        .expect("a cluster speaking TLS");
    let store = RedisStore::builder(cluster.tls_url())
        .tls_ca_file(dir.path().join("ca.pem"))
        .prefix("t:tls-cluster:")
        .connect()
        .await
        .expect("TLS connect to the cluster as alice");
    let r = rule();
    // Keys in several slots, each its own limit; then one check across them.
    for key in ["a", "b", "c", "d"] {
        let request = Request::new(&r, key, 1).expect("request");
        let mut admitted = 0;
        for _ in 0..4 {
            admitted += usize::from(store.check(&request).await.expect("check").allowed);
        }
        assert_eq!(admitted, 3, "key {key}");
    }
    let fresh = slidegate::store::Dimensions::new(&[(&r, "e"), (&r, "f"), (&r, "g")], 2).expect("dimensions");
    assert!(store.check_all(&fresh).await.expect("check_all").allowed);
    let spent = slidegate::store::Dimensions::new(&[(&r, "e"), (&r, "a")], 1).expect("dimensions");
    let denied = store.check_all(&spent).await.expect("check_all");
    assert_eq!(denied.denied_by(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_setup_over_tls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let setup = slidegate_testkit::RedisSentinel::start_tls(0, dir.path(), &Pki::new())
        .expect("sentinels and a primary speaking TLS");
    let store = RedisStore::builder(setup.tls_url())
        .tls_ca_file(dir.path().join("ca.pem"))
        .prefix("t:tls-sentinel:")
        .connect()
        .await
        .expect("TLS to the sentinels and the primary they name, as alice");
    let r = rule();
    let request = Request::new(&r, "k", 1).expect("request");
    let mut admitted = 0;
    for _ in 0..5 {
        admitted += usize::from(store.check(&request).await.expect("check").allowed);
    }
    assert_eq!(admitted, 3);
}
