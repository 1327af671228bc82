//! Against a real Redis Cluster (3 primaries, 3 replicas on loopback):
//! the conformance suite, cross-slot multi-dimension checks under
//! concurrency, `SCRIPT FLUSH` on every node. (Faults: `cluster_faults.rs`.)

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::join_all;
use slidegate::store::{Dimensions, Request};
use slidegate::{Algorithm, Rule, Store};
use slidegate_redis::RedisStore;
use slidegate_testkit::RedisCluster;
use slidegate_testkit::conformance::rule;
use support::cluster::{cluster, store};

/// Every key on every primary carries a TTL.
fn assert_every_key_has_ttl(cluster: &RedisCluster) {
    let primaries: Vec<u16> = cluster
        .cluster_nodes()
        .expect("nodes")
        .into_iter()
        .filter(|n| n.primary && !n.failed)
        .map(|n| n.port)
        .collect();
    assert_eq!(primaries.len(), 3);
    for node in cluster.nodes().iter().filter(|n| primaries.contains(&n.port())) {
        let client = redis::Client::open(node.url()).expect("url");
        let Ok(mut conn) = client.get_connection() else { continue };
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap_or_default();
        for key in keys {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).expect("PTTL");
            assert!(ttl != -1, "{key} has no TTL");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_conforms_and_never_over_admits_across_slots() {
    support::record_metrics();
    let cluster = cluster();

    // The same semantic suite as memory and standalone Redis.
    slidegate_testkit::conformance::run_all(|clock| {
        let url = cluster.url();
        async move {
            RedisStore::builder(url)
                .prefix(support::unique_prefix("cluster-conformance"))
                .client_clock(clock)
                .connect()
                .await
                .expect("connect")
        }
    })
    .await;

    // Cross-slot all-or-nothing under concurrency, on the servers' clocks:
    // one global budget and 20 users spread over the slots.
    let store = store(&cluster, "cross-slot").await;
    assert!(store.is_cluster());
    let global = rule(50, 600_000, Algorithm::SlidingLog).named("global").expect("name");
    let per_user = rule(4, 600_000, Algorithm::SlidingLog).named("user").expect("name");
    let users: Vec<String> = (0..20).map(|i| format!("user-{i}")).collect();
    let admitted = Arc::new(AtomicU64::new(0));
    let tasks = (0..64).map(|t| {
        let (store, global, per_user, users, admitted) =
            (store.clone(), global.clone(), per_user.clone(), users.clone(), Arc::clone(&admitted));
        tokio::spawn(async move {
            for i in 0..8 {
                let user = &users[(t * 7 + i) % users.len()];
                let multi = store
                    .check_all(
                        &Dimensions::new(&[(&global, "api"), (&per_user, user)], 1)
                            .expect("valid dimensions"),
                    )
                    .await
                    .expect("check_all");
                if multi.allowed {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    });
    for task in join_all(tasks).await {
        task.expect("task");
    }
    let admitted = admitted.load(Ordering::Relaxed);
    assert!(admitted <= 50, "never more than the global limit: {admitted}");
    assert!(admitted >= 40, "and close to it ({admitted}): reservations are released");
    // No leaked charge: the global log holds exactly the admitted requests,
    // and so do the per-user logs together.
    let mut conn = support::cluster::inspect(&cluster).await;
    let global_key = slidegate_redis::state_key(store.prefix(), &global, "api").expect("key");
    let user_keys: Vec<String> = users
        .iter()
        .map(|user| slidegate_redis::state_key(store.prefix(), &per_user, user).expect("key"))
        .collect();
    let global_count = support::log_entries(&mut conn, &global_key).await;
    assert_eq!(global_count, admitted);
    let mut per_user_total = 0;
    for key in &user_keys {
        per_user_total += support::log_entries(&mut conn, key).await;
    }
    assert_eq!(per_user_total, admitted, "released reservations leave nothing behind");

    // Regression: every request in one millisecond (a frozen client clock),
    // so releases take back entries of the very time that later requests
    // of the same millisecond add again. No charge may be lost (over-admission) or
    // left behind. A global limit of 50 keeps the packed layout, 200 the
    // list (one item per millisecond, which releases shrink).
    for global_limit in [50, 200] {
        let global = rule(global_limit, 600_000, Algorithm::SlidingLog).named("global").expect("name");
        let frozen = slidegate::ManualClock::new(slidegate_testkit::conformance::START_MS);
        let same_ms = RedisStore::builder(cluster.url())
            .prefix(support::unique_prefix("same-ms-release"))
            .client_clock(frozen)
            .connect()
            .await
            .expect("connect");
        let admitted = Arc::new(AtomicU64::new(0));
        let tasks = (0..64).map(|t| {
            let (store, global, per_user, users, admitted) =
                (same_ms.clone(), global.clone(), per_user.clone(), users.clone(), Arc::clone(&admitted));
            tokio::spawn(async move {
                for i in 0..8 {
                    let user = &users[(t * 3 + i) % users.len()];
                    if store
                        .check_all(
                            &Dimensions::new(&[(&global, "api"), (&per_user, user)], 1)
                                .expect("valid dimensions"),
                        )
                        .await
                        .expect("check_all")
                        .allowed
                    {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        });
        for task in join_all(tasks).await {
            task.expect("task");
        }
        let admitted = admitted.load(Ordering::Relaxed);
        assert!(admitted <= u64::from(global_limit.min(80)), "{admitted}");
        let key = slidegate_redis::state_key(same_ms.prefix(), &global, "api").expect("key");
        assert_eq!(
            support::log_entries(&mut conn, &key).await,
            admitted,
            "limit {global_limit}: every admitted request counted, none lost, none left"
        );
    }
    // The same with a GCRA global budget. GCRA is not additive, so a
    // reservation is taken back only if nothing touched the key since;
    // under this contention most stay (and would drain). What must hold:
    // the budget is never over-admitted, and no release hands back more
    // than was charged — the arrival time never falls below what the
    // admitted requests alone put there.
    let global = rule(50, 600_000, Algorithm::Gcra).named("global-gcra").expect("name");
    let frozen = slidegate::ManualClock::new(slidegate_testkit::conformance::START_MS);
    let gcra = RedisStore::builder(cluster.url())
        .prefix(support::unique_prefix("gcra-release"))
        .client_clock(frozen)
        .connect()
        .await
        .expect("connect");
    let per_user_2 = rule(2, 600_000, Algorithm::SlidingLog).named("user").expect("name");
    let admitted = Arc::new(AtomicU64::new(0));
    let tasks = (0..64).map(|t| {
        let (store, global, per_user, users, admitted) =
            (gcra.clone(), global.clone(), per_user_2.clone(), users.clone(), Arc::clone(&admitted));
        tokio::spawn(async move {
            for i in 0..8 {
                let user = &users[(t * 5 + i) % users.len()];
                let multi = store
                    .check_all(
                        &Dimensions::new(&[(&global, "api"), (&per_user, user)], 1)
                            .expect("valid dimensions"),
                    )
                    .await
                    .expect("check_all");
                if multi.allowed {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    });
    for task in join_all(tasks).await {
        task.expect("task");
    }
    let admitted = admitted.load(Ordering::Relaxed);
    assert!((1..=40).contains(&admitted), "20 users, 2 each: {admitted}");
    let key = slidegate_redis::state_key(gcra.prefix(), &global, "api").expect("key");
    let stored: String = redis::cmd("GET").arg(&key).query_async(&mut conn).await.expect("GET");
    let tat_ms: u64 = stored.split(':').next().and_then(|ms| ms.parse().ok()).expect("<ms>:<rem>:<seq>");
    // 50 per 600 s: 12 s of arrival time per admitted request.
    let floor = slidegate_testkit::conformance::START_MS + admitted * 12_000;
    assert!(tat_ms >= floor, "a release handed back more than it charged: {stored} < {floor}");
    assert!(tat_ms <= slidegate_testkit::conformance::START_MS + 50 * 12_000, "{stored}");

    // Releases happened, and every one was answered: a failed one would be
    // retried by nobody, and a retried one could take back another
    // request's charge.
    assert!(support::counter("slidegate_cross_slot_releases_total") > 0);
    assert_eq!(support::counter("slidegate_cross_slot_release_failures_total"), 0);

    // SCRIPT FLUSH on every node mid-run: reloaded, never surfaced.
    let rules: Vec<Rule> =
        slidegate_testkit::conformance::algorithms(10).into_iter().map(|a| rule(1000, 60_000, a)).collect();
    for round in 0..3 {
        let tasks = (0..32).map(|i| {
            let (store, rule) = (store.clone(), rules[i % rules.len()].clone());
            tokio::spawn(async move {
                store.check(&Request::new(&rule, &format!("flush-{i}"), 1).expect("valid request")).await
            })
        });
        assert_eq!(cluster.on_every_node(&["SCRIPT", "FLUSH"]), 6, "round {round}");
        for result in join_all(tasks).await {
            result.expect("task").expect("no error after SCRIPT FLUSH");
        }
        let batch: Vec<_> =
            (0..20).map(|i| Request::new(&rules[0], "batch", 1 + (i % 2)).expect("valid request")).collect();
        assert_eq!(cluster.on_every_node(&["SCRIPT", "FLUSH"]), 6);
        for result in store.check_batch(&batch).await {
            result.expect("batches reload too");
        }
    }
    assert_every_key_has_ttl(&cluster);
}
