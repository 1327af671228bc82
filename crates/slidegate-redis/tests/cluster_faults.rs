//! Faults on a real Redis Cluster (3 primaries, 3 replicas on loopback):
//! a cross-slot check abandoned at the deadline, a connection that keeps
//! stalling, a live reshard and the loss of a primary under load.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use slidegate::store::Dimensions;
use slidegate::{Algorithm, FailurePolicy, Limiter, State, Store};
use slidegate_redis::RedisStore;
use slidegate_testkit::conformance::rule;
use support::cluster::{cluster, primary_of, slot_of, store};

/// A caller that gives up on a cross-slot check (the limiter's deadline,
/// here while one slot's primary is frozen) leaves no charge behind: the
/// reservations finish in a task of their own, and an answer nobody waits
/// for is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_slot_check_abandoned_at_the_deadline_leaves_no_charge() {
    let cluster = cluster();
    let store = store(&cluster, "abandoned").await;
    let global = rule(10, 600_000, Algorithm::SlidingLog).named("global").expect("name");
    let per_user = rule(10, 600_000, Algorithm::SlidingLog).named("user").expect("name");
    let api_node = primary_of(&cluster, slot_of(&cluster, "api")).port();
    let user = (0..100)
        .map(|i| format!("user-{i}"))
        .find(|u| primary_of(&cluster, slot_of(&cluster, u)).port() != api_node)
        .expect("a user on another primary");
    let limiter = Limiter::builder(store.clone())
        .deadline(Duration::from_millis(100))
        .failure_policy(FailurePolicy::FailClosed)
        .build();

    let frozen = primary_of(&cluster, slot_of(&cluster, &user));
    frozen.pause().expect("SIGSTOP");
    let multi = limiter.check_all(&[(&global, "api"), (&per_user, &user)]).await.expect("policy answer");
    assert!(multi.decisions.iter().all(|d| d.state == State::Degraded), "{multi:?}");
    tokio::time::sleep(Duration::from_millis(150)).await;
    frozen.resume().expect("SIGCONT");

    // Both slots admitted once the frozen one answered; nobody wanted the
    // answer any more, so both were released.
    let mut conn = support::cluster::inspect(&cluster).await;
    let global_key = slidegate_redis::state_key(store.prefix(), &global, "api").expect("key");
    let user_key = slidegate_redis::state_key(store.prefix(), &per_user, &user).expect("key");
    let started = Instant::now();
    loop {
        let left = support::log_entries(&mut conn, &global_key).await
            + support::log_entries(&mut conn, &user_key).await;
        if left == 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{left} charges left behind");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And the store is used normally afterwards.
    assert!(
        store
            .check_all(
                &Dimensions::new(&[(&global, "api"), (&per_user, &user)], 1).expect("valid dimensions")
            )
            .await
            .expect("check")
            .allowed
    );
    assert_eq!(support::log_entries(&mut conn, &global_key).await, 1);
}

/// A connection whose calls keep stalling (its slot's primary frozen,
/// every caller abandoning at the deadline) is replaced; batches go
/// through the same capped connections and are answered by the policy
/// meanwhile, and the store serves again once the primary thaws.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_keeps_stalling_is_rebuilt() {
    support::record_metrics();
    let cluster = cluster();
    let store = RedisStore::builder(cluster.url())
        .prefix(support::unique_prefix("stalling"))
        .cluster_connections(1)
        .max_in_flight(4)
        .connect()
        .await
        .expect("connect");
    // No breaker: every check reaches the connection (and stalls on it).
    let limiter = Limiter::builder(store.clone())
        .deadline(Duration::from_millis(10))
        .failure_policy(FailurePolicy::FailClosed)
        .no_breaker()
        .build();
    let rule = rule(1000, 60_000, Algorithm::SlidingLog);
    let rebuilds = support::counter("slidegate_cluster_rebuilds_total");
    let frozen = primary_of(&cluster, slot_of(&cluster, "stuck"));
    frozen.pause().expect("SIGSTOP");
    // Past REBUILD_AFTER (32) abandoned calls; quick, so no failover starts.
    for _ in 0..40 {
        let decision = limiter.check(&rule, "stuck").await.expect("policy");
        assert_eq!(decision.state, State::Degraded);
    }
    for result in limiter.check_batch(&[(&rule, "stuck", 1), (&rule, "stuck", 2)]).await {
        assert_eq!(result.expect("policy").state, State::Degraded);
    }
    frozen.resume().expect("SIGCONT");
    let started = Instant::now();
    while support::counter("slidegate_cluster_rebuilds_total") == rebuilds {
        assert!(started.elapsed() < Duration::from_secs(2), "the stalling connection was not rebuilt");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A limiter with a deadline this debug build can keep finds the store
    // serving again.
    let limiter = Limiter::builder(store).deadline(Duration::from_millis(200)).build();
    served_again(&limiter, Duration::from_secs(10)).await;
    for result in limiter.check_batch(&[(&rule, "stuck", 1), (&rule, "other", 2)]).await {
        let decision = result.expect("answered");
        assert!(decision.allowed && decision.state == State::Allowed, "{decision:?}");
    }
}

/// Tasks of the fault load: past the ~128 calls in flight at which a
/// shared redis-rs cluster connection was seen to stall in a reshard.
const LOAD_TASKS: u64 = 256;

/// Runs checks from [`LOAD_TASKS`] tasks until told to stop; counts outcomes.
#[derive(Debug, Default)]
struct Load {
    calls: AtomicU64,
    degraded: AtomicU64,
    errors: AtomicU64,
    slowest_ms: AtomicU64,
}

fn spawn_load(
    limiter: &Limiter<RedisStore>,
    load: &Arc<Load>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let rule = rule(1_000_000, 60_000, Algorithm::SLIDING_COUNTER);
    (0..LOAD_TASKS)
        .map(|t| {
            let (limiter, rule, load, stop) =
                (limiter.clone(), rule.clone(), Arc::clone(load), Arc::clone(stop));
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let started = Instant::now();
                    let result = limiter.check(&rule, &format!("k-{t}-{}", i % 97)).await;
                    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    load.slowest_ms.fetch_max(ms, Ordering::Relaxed);
                    load.calls.fetch_add(1, Ordering::Relaxed);
                    match result {
                        Ok(d) if d.state == State::Degraded => {
                            load.degraded.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => {}
                        Err(_) => {
                            load.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Degraded answers are local and never wait: yield so
                    // the other tasks (and the test itself) get to run.
                    if i.is_multiple_of(16) {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect()
}

/// Waits until checks are answered by the store again (not degraded).
async fn served_again(limiter: &Limiter<RedisStore>, within: Duration) -> Duration {
    let rule = rule(1_000_000, 60_000, Algorithm::SlidingLog);
    let started = Instant::now();
    let mut clean = 0;
    while clean < 20 {
        let key = format!("probe-{clean}-{}", started.elapsed().as_micros());
        let decision = limiter.check(&rule, &key).await.expect("no Err");
        clean = if decision.state == State::Degraded { 0 } else { clean + 1 };
        assert!(started.elapsed() < within, "not served by the cluster again within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_survives_a_live_reshard_and_the_loss_of_a_primary_under_load() {
    let mut cluster = cluster();
    let store = store(&cluster, "faults").await;
    let limiter = Limiter::builder(store)
        .deadline(Duration::from_millis(200))
        .failure_policy(FailurePolicy::Fallback)
        .build();
    let load = Arc::new(Load::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = spawn_load(&limiter, &load, &stop);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(load.degraded.load(Ordering::Relaxed), 0, "a healthy cluster answers everything");

    // Live reshard of 500 slots under load: no stall. The cluster itself
    // keeps answering while slots move (answers the fallback made up would
    // hide a stall, so only the store's count), and right after.
    let answered = || load.calls.load(Ordering::Relaxed) - load.degraded.load(Ordering::Relaxed);
    let slot = 100;
    let before = answered();
    tokio::task::block_in_place(|| cluster.reshard_from(slot, 500)).expect("reshard");
    let during = answered() - before;
    assert!(during > 100, "the cluster answered only {during} checks during the reshard");
    // Measured 1-2.5 s here (the breaker may have opened at a slot's move:
    // its probes back off up to 1 s); 5 s for a loaded machine.
    let recovered = served_again(&limiter, Duration::from_secs(5)).await;
    println!("{during} checks answered by the cluster during the reshard; served {recovered:?} after it");

    // Kill the primary of a busy slot: its replica takes over.
    let killed = cluster.kill_primary_of(slot).expect("kill");
    println!("killed the primary on port {killed}");
    tokio::task::block_in_place(|| cluster.wait_ok()).expect("a replica is promoted");
    let recovered = served_again(&limiter, Duration::from_secs(15)).await;
    println!("served by the cluster {recovered:?} after the promotion");

    stop.store(true, Ordering::Relaxed);
    for task in join_all(tasks).await {
        task.expect("task");
    }
    assert_eq!(load.errors.load(Ordering::Relaxed), 0, "never an Err: the policy answers");
    let slowest = load.slowest_ms.load(Ordering::Relaxed);
    assert!(slowest <= 200 + 600, "the deadline holds through reshard and failover: {slowest} ms");
    println!(
        "{} checks, {} degraded during the faults",
        load.calls.load(Ordering::Relaxed),
        load.degraded.load(Ordering::Relaxed)
    );
}
