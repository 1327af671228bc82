//! [`RedisStore`]: decisions made by one atomic Lua script call.

use std::fmt;
use std::sync::Arc;

use slidegate::Error;

use crate::calls::{Call, Ints};
use crate::connect::{Connected, Link};
use crate::now::{ClientClock, Now};
use crate::scripts::Scripts;

/// A [`Store`](slidegate::store::Store) on Redis: one standalone server or a Redis Cluster.
///
/// * Every decision is one `EVALSHA` of the algorithm's script; when Redis
///   answers `NOSCRIPT` (restart, `SCRIPT FLUSH`, failover) the script is
///   loaded and the call retried, invisibly to the caller.
/// * Time is the **Redis server's clock** (`TIME` inside the script), so
///   application nodes with skewed clocks share one timeline. With
///   [`RedisStoreBuilder::client_clock`](crate::RedisStoreBuilder::client_clock) the time is sent by the client
///   instead, for servers that forbid `TIME` and for trace replay.
/// * Keys are `<prefix><rule>:{<identity>}:<part>` (see [`state_key`](crate::state_key)) and
///   every write sets a TTL of the time until the key is empty plus 1 s
///   (plus the allowed clock skew in client-clock mode).
/// * A key holding a value slidegate did not write (another type, text
///   where a log or a bucket lives) is an error (`WRONGTYPE …`, kind
///   [`Backend`](slidegate::ErrorKind::Backend)), never read as state;
///   the value is left as it was.
/// * Standalone: one auto-pipelining, reconnecting `ConnectionManager` with
///   TCP_NODELAY and explicit connect/response timeouts; clones share it.
///   Single checks made while earlier calls are in flight are auto-batched
///   into one script call (standalone and Sentinel, server clock; see
///   [`RedisStoreBuilder::auto_batch`](crate::RedisStoreBuilder::auto_batch)).
/// * Cluster (`redis+cluster://…`): every key of one identity shares a hash
///   slot, so a decision is one script on one node; redirections and
///   failovers are followed, calls in flight per connection are capped, and
///   a connection that keeps stalling is rebuilt. A multi-dimension check
///   whose keys span slots reserves per slot and releases the reservations
///   if any slot denies — it never over-admits and never leaks a charge.
///
/// ```no_run
/// use std::num::NonZeroU32;
/// use slidegate::{Limiter, Rule};
/// use slidegate_redis::RedisStore;
///
/// # async fn demo() -> Result<(), slidegate::Error> {
/// let store = RedisStore::builder("redis://127.0.0.1:6380/").prefix("myapp:").connect().await?;
/// let limiter = Limiter::new(store);
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api")?;
/// let decision = limiter.check(&rule, "user-42").await?;
/// println!("allowed: {}, remaining: {}", decision.allowed, decision.remaining);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) prefix: String,
    /// `None`: the Redis server's clock decides.
    pub(crate) clock: Option<ClientClock>,
    pub(crate) scripts: Arc<Scripts>,
    /// The servers, passwords hidden: for `Debug` and messages.
    pub(crate) servers: String,
    /// Whether the servers are a Cluster (known from the URL, connected or not).
    pub(crate) cluster: bool,
    /// The connection: made at `connect`, or in the background (`lazy`).
    pub(crate) link: Arc<Link>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("servers", &self.inner.servers)
            .field("prefix", &self.inner.prefix)
            .field("clock", &self.inner.clock.as_ref().map_or("redis server", |_| "client"))
            .finish()
    }
}

impl RedisStore {
    pub(crate) fn from_inner(inner: Inner) -> RedisStore {
        RedisStore { inner: Arc::new(inner) }
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Whether the servers support per-field hash TTL (Redis ≥ 7.4, Valkey ≥
    /// 9), detected when connecting (`false` until then): the sliding
    /// counter then gives every bucket its own TTL (it prunes stale buckets
    /// in the script either way).
    pub fn uses_field_ttl(&self) -> bool {
        self.inner.link.connected().is_some_and(|c| c.field_ttl)
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.cluster
    }

    /// Whether the store has reached its servers: always, for a store
    /// [`connect`](crate::RedisStoreBuilder::connect) returned without
    /// [`lazy`](crate::RedisStoreBuilder::lazy); for a lazy one, once a
    /// connection in the background succeeded (until then, every call
    /// fails with [`Unavailable`](slidegate::ErrorKind::Unavailable)).
    /// Whether the servers answer *now* is the limiter's breaker's to
    /// tell.
    pub fn is_connected(&self) -> bool {
        self.inner.link.connected().is_some()
    }

    /// Why a lazy store has not connected yet: the last attempt's error
    /// (`None` once connected, or before an attempt has ended).
    pub fn waiting_for(&self) -> Option<String> {
        self.inner.link.waiting_for()
    }

    /// When the scripts decide: the server's clock, or the client clock's
    /// time.
    ///
    /// # Errors
    ///
    /// [`InvalidTime`](slidegate::ErrorKind::InvalidTime) when the client
    /// clock reads beyond [`MAX_TIME_MS`](slidegate::limits::MAX_TIME_MS).
    pub(crate) fn now(&self) -> Result<Now, Error> {
        self.inner.clock.as_ref().map_or(Ok(Now::Server), ClientClock::now)
    }

    pub(crate) fn scripts(&self) -> &Scripts {
        &self.inner.scripts
    }

    /// The connection to the servers.
    ///
    /// # Errors
    ///
    /// [`Unavailable`](slidegate::ErrorKind::Unavailable) while a lazy
    /// store has not connected yet.
    pub(crate) fn connected(&self) -> Result<&Connected, Error> {
        self.inner.link.get(&self.inner.servers)
    }

    /// Sends one call and returns its reply.
    pub(crate) async fn send(&self, call: &Call<'_>) -> Result<Ints, Error> {
        self.connected()?.backend.run(call).await
    }

    /// The store's inner state, for a connection made in the background.
    /// Its link, weakly: gone once the store is dropped.
    pub(crate) fn downgrade_link(&self) -> std::sync::Weak<Link> {
        Arc::downgrade(&self.inner.link)
    }
}

#[cfg(test)]
mod tests {
    use crate::redact_url;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact_url("redis://:secret@host:6380/0"), "redis://:***@host:6380/0");
        assert_eq!(redact_url("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("rediss://pw@h/"), "rediss://***@h/");
        assert_eq!(redact_url("redis://h:1/"), "redis://h:1/");
        let builder = super::RedisStore::builder("redis://:secret@h/");
        assert!(!format!("{builder:?}").contains("secret"));
    }
}
