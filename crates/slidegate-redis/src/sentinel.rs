//! Redis behind Sentinel, following failovers.
//!
//! redis-rs' `SentinelClient` resolves the primary only when it connects and
//! then keeps talking to that address after a failover (redis-rs#1438). So
//! the store asks the sentinels itself (`SENTINEL get-master-addr-by-name`),
//! connects a reconnecting `ConnectionManager` to that primary, and asks
//! again whenever a call fails in a way a failover explains — connection
//! refused or dropped, a timeout, `READONLY` (the old primary came back as
//! a replica), `MASTERDOWN` — or when a call is abandoned unanswered (the
//! limiter's deadline dropped it: a primary that hangs, frozen or cut off,
//! never fails a call before the deadline does), at most every
//! [`RESOLVE_EVERY`]. When the answer names a new primary, calls move to it.
//! A primary that stops answering without a failover (a connection gone
//! silent) is connected to afresh, as every store connection is
//! ([`Replaceable`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::replaceable::{Kind, Replaceable};
use crate::tls::Roots;
use redis::aio::ConnectionManager;
use redis::{RedisError, RedisResult};

/// The least time between two resolutions.
pub(crate) const RESOLVE_EVERY: Duration = Duration::from_millis(250);

/// The primary in use: its address, and the connection to it.
#[derive(Clone)]
pub(crate) struct Primary {
    address: Arc<str>,
    pub(crate) conn: ConnectionManager,
}

/// How to find the primary a set of sentinels names, and connect to it.
struct Sentinels {
    /// `redis://host:port/` of each sentinel.
    sentinels: Vec<String>,
    master: String,
    /// User info (`user:password@` or empty) and database of the primary.
    userinfo: String,
    db: i64,
    /// TLS to the primary (`rediss+sentinel://`), and the roots trusted
    /// for it and the sentinels.
    tls: bool,
    roots: Roots,
    connect: Box<dyn Fn(String) -> ConnectFuture + Send + Sync>,
}

impl Sentinels {
    /// Asks the sentinels for the primary and connects to it.
    async fn primary(&self) -> RedisResult<Primary> {
        let address = resolve(&self.sentinels, &self.master, &self.roots).await?;
        let conn = (self.connect)(primary_url(self.tls, &self.userinfo, &address, self.db)).await?;
        Ok(Primary { address: Arc::from(address), conn })
    }
}

/// How to reach the primary a set of sentinels names.
pub(crate) struct SentinelPool {
    sentinels: Arc<Sentinels>,
    /// The primary in use; replaced (asking the sentinels again) when it
    /// stops answering, even at the same address.
    link: Arc<Replaceable<Primary>>,
    resolving: AtomicBool,
    /// Milliseconds since `born` of the last resolution.
    last_resolve: AtomicU64,
    born: Instant,
}

type ConnectFuture = std::pin::Pin<Box<dyn Future<Output = RedisResult<ConnectionManager>> + Send>>;

impl SentinelPool {
    /// Resolves the primary and connects to it; `connect` opens a
    /// `ConnectionManager` for a `redis://` URL.
    pub(crate) async fn connect(
        sentinels: Vec<String>,
        master: String,
        userinfo: String,
        db: i64,
        (tls, roots): (bool, Roots),
        connect: impl Fn(String) -> ConnectFuture + Send + Sync + 'static,
    ) -> RedisResult<SentinelPool> {
        let sentinels =
            Arc::new(Sentinels { sentinels, master, userinfo, db, tls, roots, connect: Box::new(connect) });
        let primary = sentinels.primary().await?;
        let reopen_from = Arc::clone(&sentinels);
        let reopen: crate::replaceable::Reopen<Primary> = Box::new(move || {
            let sentinels = Arc::clone(&reopen_from);
            Box::pin(async move { sentinels.primary().await })
        });
        Ok(SentinelPool {
            sentinels,
            link: Replaceable::new(primary, Kind::Sentinel, reopen),
            resolving: AtomicBool::new(false),
            last_resolve: AtomicU64::new(0),
            born: Instant::now(),
        })
    }

    pub(crate) fn connection(&self) -> ConnectionManager {
        self.link.connection().conn
    }

    /// Runs `send` (a call or a batch pipeline) on the primary's
    /// connection, and asks the sentinels again when it is dropped
    /// unanswered or `explains` says a failover may explain its result;
    /// `answered` tells whether the primary answered at all.
    pub(crate) async fn watched<T, Fut>(
        self: &Arc<Self>,
        send: impl FnOnce(ConnectionManager) -> Fut,
        answered: impl FnOnce(&T) -> bool,
        explains: impl FnOnce(&T) -> bool,
    ) -> T
    where
        Fut: Future<Output = T>,
    {
        let mut abandoned = Abandoned { pool: Some(self) };
        let result = self.link.call(|primary| send(primary.conn), answered).await;
        abandoned.pool = None;
        if explains(&result) {
            self.re_resolve();
        }
        result
    }

    /// Asks the sentinels again, in the background, unless that happened
    /// within [`RESOLVE_EVERY`] or is happening now.
    fn re_resolve(self: &Arc<Self>) {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_resolve.load(Ordering::Relaxed);
        let every = u64::try_from(RESOLVE_EVERY.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) < every || self.resolving.swap(true, Ordering::AcqRel) {
            return;
        }
        // Dropped futures may be dropped outside a runtime: nothing to do then.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.resolving.store(false, Ordering::Release);
            return;
        };
        self.last_resolve.store(now, Ordering::Relaxed);
        let pool = Arc::clone(self);
        runtime.spawn(async move {
            let sentinels = &pool.sentinels;
            match resolve(&sentinels.sentinels, &sentinels.master, &sentinels.roots).await {
                Ok(address) if *address != *pool.link.connection().address => {
                    let url = primary_url(sentinels.tls, &sentinels.userinfo, &address, sentinels.db);
                    match (sentinels.connect)(url).await {
                        Ok(conn) => {
                            tracing::warn!(target: "slidegate", master = %sentinels.master, %address, "following a Sentinel failover to a new primary");
                            metrics::counter!("slidegate_sentinel_switches_total").increment(1);
                            pool.link.install(Primary { address: Arc::from(address), conn });
                        }
                        Err(error) => {
                            tracing::warn!(target: "slidegate", %error, %address, "cannot connect to the new primary yet");
                        }
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(target: "slidegate", %error, "no sentinel named a primary"),
            }
            pool.resolving.store(false, Ordering::Release);
        });
    }
}

/// Asks the sentinels again when a call is dropped before it was answered.
struct Abandoned<'a> {
    pool: Option<&'a Arc<SentinelPool>>,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool {
            pool.re_resolve();
        }
    }
}

/// Whether `error` may mean the primary moved.
pub(crate) fn failover_explains(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || matches!(error.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

/// `host:port` of the primary, from the first sentinel that knows it.
async fn resolve(sentinels: &[String], master: &str, roots: &Roots) -> RedisResult<String> {
    let mut last = None;
    for sentinel in sentinels {
        let attempt = async {
            let client = roots.client(sentinel.as_str())?;
            let mut conn = client.get_multiplexed_async_connection().await?;
            let reply: Option<(String, String)> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(master)
                .query_async(&mut conn)
                .await?;
            reply.map(|(host, port)| format!("{host}:{port}")).ok_or_else(|| {
                RedisError::from((
                    redis::ErrorKind::Io,
                    "sentinel does not know the primary",
                    master.to_owned(),
                ))
            })
        };
        match tokio::time::timeout(Duration::from_millis(500), attempt).await {
            Ok(Ok(address)) => return Ok(address),
            Ok(Err(error)) => last = Some(error),
            Err(_) => last = Some(RedisError::from((redis::ErrorKind::Io, "sentinel timed out"))),
        }
    }
    Err(last.unwrap_or_else(|| RedisError::from((redis::ErrorKind::Io, "no sentinel given"))))
}

fn primary_url(tls: bool, userinfo: &str, address: &str, db: i64) -> String {
    let scheme = if tls { "rediss" } else { "redis" };
    format!("{scheme}://{userinfo}{address}/{db}")
}
