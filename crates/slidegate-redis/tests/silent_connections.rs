//! Connections that go bad while the servers stay good: through a real
//! TCP proxy, the store's connection stops passing bytes for good (no
//! reset, no close) or receives what is not RESP (`$1000000000`, then
//! nothing), while new connections would work. The store replaces the
//! connection and is used again within seconds — standalone and behind
//! Sentinel; every answer meanwhile is the failure policy's, within the
//! deadline.

mod support;

use std::time::{Duration, Instant};

use slidegate::{FailurePolicy, Limiter, State};
use slidegate_redis::RedisStore;
use slidegate_testkit::conformance::rule;
use slidegate_testkit::{RedisSentinel, TcpProxy};

const DEADLINE: Duration = Duration::from_millis(50);
/// Scheduling slack on a loaded 2-core machine; the deadline is the claim.
const MARGIN: Duration = Duration::from_millis(400);
/// How long a store may take to be used again: a second of silence before
/// the connection is replaced, the breaker's probe (at most a second
/// apart), connecting — a few seconds, with a margin for a loaded machine.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);

/// What breaks the connections open now.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Silence,
    Garbage,
}

impl Fault {
    fn apply(self, proxy: &TcpProxy) {
        match self {
            Fault::Silence => proxy.silence_open_connections(),
            Fault::Garbage => proxy.garble_open_connections(b"$1000000000\r\n").expect("garble"),
        }
    }
}

/// Checks one at a time (as a light service does) until the store
/// answers again; asserts every answer before is degraded and within the
/// deadline; returns how long that took.
async fn until_answered_again(limiter: &Limiter<RedisStore>) -> Duration {
    let rule = rule(1_000_000, 60_000, slidegate::Algorithm::SlidingLog);
    let started = Instant::now();
    let mut i = 0u64;
    loop {
        i += 1;
        let checked = Instant::now();
        let decision = limiter.check(&rule, &format!("k{i}")).await.expect("never an Err");
        assert!(checked.elapsed() <= DEADLINE + MARGIN, "a check took {:?}", checked.elapsed());
        if decision.state != State::Degraded {
            return started.elapsed();
        }
        assert!(started.elapsed() < RECOVERY_BOUND, "the store was not used again within {RECOVERY_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn limiter(store: RedisStore) -> Limiter<RedisStore> {
    Limiter::builder(store).deadline(DEADLINE).failure_policy(FailurePolicy::Fallback).build()
}

async fn standalone(fault: Fault) {
    let server = support::server();
    let proxy = TcpProxy::start(server.port()).expect("proxy");
    let store = RedisStore::builder(proxy.url())
        .prefix(support::unique_prefix("silent"))
        .connect()
        .await
        .expect("connect through the proxy");
    let limiter = limiter(store).await;
    let rule = rule(10, 60_000, slidegate::Algorithm::SlidingLog);
    assert_eq!(limiter.check(&rule, "before").await.expect("check").state, State::Allowed);
    let connections = proxy.accepted();
    fault.apply(&proxy);
    let took = until_answered_again(&limiter).await;
    println!("{fault:?}: the store was used again {took:?} later");
    assert!(proxy.accepted() > connections, "a new connection was opened");
    // The count went on where it was: the same server, through a new connection.
    let decision = limiter.check(&rule, "before").await.expect("check");
    assert_eq!((decision.state, decision.remaining), (State::Allowed, 8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_gone_silent_is_replaced() {
    standalone(Fault::Silence).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_answering_garbage_is_replaced() {
    standalone(Fault::Garbage).await;
}

/// The primary the sentinels name is reached through the proxy: its
/// connection goes silent, no failover happens (the primary is fine, and
/// has no replica), and the store connects to it afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_to_the_sentinels_primary_is_replaced() {
    let setup = RedisSentinel::start_behind_proxy().expect("start sentinels (apt-get install redis-server)");
    let proxy = setup.proxy().expect("the proxy in front of the primary");
    let store = RedisStore::builder(setup.url())
        .prefix(support::unique_prefix("sentinel-silent"))
        .connect()
        .await
        .expect("connect through the sentinels");
    let limiter = limiter(store).await;
    let rule = rule(10, 60_000, slidegate::Algorithm::SlidingLog);
    assert_eq!(limiter.check(&rule, "before").await.expect("check").state, State::Allowed);
    let connections = proxy.accepted();
    Fault::Silence.apply(proxy);
    let took = until_answered_again(&limiter).await;
    println!("the primary was used again {took:?} later");
    assert!(proxy.accepted() > connections, "a new connection was opened");
}

/// Every node of a Cluster is reached through a proxy: the store's
/// connections go silent, and its cluster connections are replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_to_a_cluster_are_replaced() {
    let cluster =
        slidegate_testkit::RedisCluster::start_behind_proxies(3).expect("start a cluster behind proxies");
    let store = RedisStore::builder(cluster.url())
        .prefix(support::unique_prefix("cluster-silent"))
        .connect()
        .await
        .expect("connect through the proxies");
    let limiter = limiter(store).await;
    let rule = rule(10, 60_000, slidegate::Algorithm::SlidingLog);
    assert_eq!(limiter.check(&rule, "before").await.expect("check").state, State::Allowed);
    let connections: usize = cluster.proxies().iter().map(TcpProxy::accepted).sum();
    for proxy in cluster.proxies() {
        Fault::Silence.apply(proxy);
    }
    let took = until_answered_again(&limiter).await;
    println!("the cluster was used again {took:?} later");
    let now: usize = cluster.proxies().iter().map(TcpProxy::accepted).sum();
    assert!(now > connections, "new connections were opened");
}
