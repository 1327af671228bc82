//! Redis Cluster connections: a small pool of redis-rs cluster connections
//! with a cap on calls in flight on each, replaced when one stops answering.
//!
//! A redis-rs `ClusterConnection` with too many calls in flight can stay
//! stuck for good after a live reshard (seen with 256, never with 128 or
//! fewer; docs/benchmark-notes.md). So every connection takes at most
//! [`DEFAULT_MAX_IN_FLIGHT`] calls at once
//! (callers queue for a permit, inside the limiter's deadline), load is
//! spread over several connections, and a connection whose calls keep
//! timing out or being abandoned is replaced by a fresh one
//! ([`Replaceable`]).
//!
//! redis-rs follows `MOVED`/`ASK` redirections and failovers itself;
//! `SCRIPT LOAD` goes to every node, so a promoted replica already has the
//! scripts, and a `NOSCRIPT` (restart, flush) is reloaded like everywhere.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use redis::RedisResult;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use slidegate::store::Identity;
use tokio::sync::Semaphore;

use crate::replaceable::{Kind, Replaceable};

/// Default most calls in flight on one cluster connection.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;
/// Default number of cluster connections a store spreads calls over.
pub const DEFAULT_CLUSTER_CONNECTIONS: usize = 2;

struct Lane {
    link: Arc<Replaceable<ClusterConnection>>,
    permits: Semaphore,
}

/// Several cluster connections, each with a cap on calls in flight.
pub(crate) struct ClusterPool {
    lanes: Box<[Lane]>,
    next: AtomicUsize,
}

impl ClusterPool {
    pub(crate) async fn connect(
        client: ClusterClient,
        lanes: usize,
        max_in_flight: usize,
    ) -> RedisResult<Self> {
        let mut built = Vec::with_capacity(lanes.max(1));
        for _ in 0..lanes.max(1) {
            let conn = client.get_async_connection().await?;
            let client = client.clone();
            let reopen: crate::replaceable::Reopen<ClusterConnection> = Box::new(move || {
                let client = client.clone();
                Box::pin(async move { client.get_async_connection().await })
            });
            built.push(Lane {
                link: Replaceable::new(conn, Kind::Cluster, reopen),
                permits: Semaphore::new(max_in_flight.max(1)),
            });
        }
        Ok(ClusterPool { lanes: built.into_boxed_slice(), next: AtomicUsize::new(0) })
    }

    fn lane(&self) -> &Lane {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        &self.lanes[i]
    }

    /// A connection to use now (cheap clone of a multiplexed handle).
    pub(crate) fn connection(&self) -> ClusterConnection {
        self.lane().link.connection()
    }

    /// Runs `send` (one call or a pipeline) on one lane's connection,
    /// within the lane's cap on calls in flight; `answered` tells from the
    /// result whether the server answered at all, for the lane's count of
    /// unanswered calls. Every use of the cluster goes through here,
    /// batches too.
    pub(crate) async fn on_lane<T, F, Fut>(&self, send: F, answered: impl FnOnce(&T) -> bool) -> T
    where
        F: FnOnce(ClusterConnection) -> Fut,
        Fut: Future<Output = T>,
    {
        let lane = self.lane();
        // The semaphore is never closed, so acquiring only waits.
        let _permit = lane.permits.acquire().await.ok();
        lane.link.call(send, answered).await
    }
}

/// The Cluster slot of every key of an (encoded) identity: the identity
/// is the keys' `{…}` hash tag (never empty, never holding a brace).
pub(crate) fn identity_slot(identity: &Identity<'_>) -> u16 {
    crc16(identity.as_str().as_bytes()) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use slidegate::store::Identity;

    /// Redis' own rule, for checking `identity_slot` against: the slot of
    /// `key` is CRC16/XMODEM of its hash tag (or of all of it), mod 16384.
    fn slot_of(key: &str) -> u16 {
        let bytes = key.as_bytes();
        let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
            let rest = &bytes[open + 1..];
            rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
        });
        super::crc16(tagged.unwrap_or(bytes)) % 16384
    }

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot_of("123456789"), 0x31C3, "the CRC16 check value");
        assert_eq!(slot_of("foo"), 12182);
        assert_eq!(slot_of("{user1000}.following"), slot_of("{user1000}.followers"));
        assert_eq!(slot_of("foo{}{bar}"), super::crc16(b"foo{}{bar}") % 16384, "empty tag: the whole key");
        assert_eq!(slot_of("foo{{bar}}zap"), slot_of("{bar"));
        assert_eq!(slot_of("sg:api:{alice}:log"), slot_of("alice"));
        let identity = |key| Identity::new(key).expect("valid key");
        assert_eq!(super::identity_slot(&identity("alice")), slot_of("sg:api:{alice}:log"));
        let hostile = identity("{x}");
        assert_eq!(super::identity_slot(&hostile), slot_of(&format!("p:r:{{{hostile}}}:log")));
    }
}
