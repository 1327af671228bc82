//! Helpers for the tests against a real Redis Cluster.

use slidegate_redis::RedisStore;
use slidegate_testkit::{RedisCluster, RedisServer};

/// A cluster of 3 primaries with a replica each.
pub fn cluster() -> RedisCluster {
    RedisCluster::start(3, 1).expect("start a redis cluster (apt-get install redis-server redis-tools)")
}

/// A store on `cluster` under a prefix of its own.
pub async fn store(cluster: &RedisCluster, test: &str) -> RedisStore {
    RedisStore::builder(cluster.url()).prefix(super::unique_prefix(test)).connect().await.expect("connect")
}

/// The primary serving `slot`.
pub fn primary_of(cluster: &RedisCluster, slot: u16) -> &RedisServer {
    let port = cluster
        .cluster_nodes()
        .expect("nodes")
        .into_iter()
        .find(|n| n.primary && !n.failed && n.slots.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot)))
        .expect("a primary serves every slot")
        .port;
    cluster.nodes().iter().find(|n| n.port() == port).expect("a node of ours")
}

/// The slot of `identity`'s keys.
pub fn slot_of(cluster: &RedisCluster, identity: &str) -> u16 {
    let reply = cluster.nodes()[0].command(&format!("CLUSTER KEYSLOT {{{identity}}}")).expect("KEYSLOT");
    reply.trim_start_matches(':').trim().parse().expect("a slot number")
}

/// A plain cluster connection, for inspecting what the store wrote.
pub async fn inspect(cluster: &RedisCluster) -> redis::cluster_async::ClusterConnection {
    let client = redis::cluster::ClusterClient::new(cluster.node_urls()).expect("client");
    client.get_async_connection().await.expect("connect")
}
