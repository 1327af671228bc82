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

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::tls::Roots;
use redis::aio::ConnectionManager;
use redis::{RedisError, RedisResult};

/// The least time between two resolutions.
pub(crate) const RESOLVE_EVERY: Duration = Duration::from_millis(250);

/// How to reach the primary a set of sentinels names.
pub(crate) struct SentinelPool {
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
    current: Mutex<(String, ConnectionManager)>,
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
        let address = resolve(&sentinels, &master, &roots).await?;
        let url = primary_url(tls, &userinfo, &address, db);
        let conn = connect(url).await?;
        Ok(SentinelPool {
            sentinels,
            master,
            userinfo,
            db,
            tls,
            roots,
            connect: Box::new(connect),
            current: Mutex::new((address, conn)),
            resolving: AtomicBool::new(false),
            last_resolve: AtomicU64::new(0),
            born: Instant::now(),
        })
    }

    pub(crate) fn connection(&self) -> ConnectionManager {
        lock(&self.current).1.clone()
    }

    /// Awaits `send` (a call or a batch pipeline on [`connection`](Self::connection)),
    /// and asks the sentinels again when it is dropped unanswered or
    /// `explains` says a failover may explain its result.
    pub(crate) async fn watched<T>(
        self: &std::sync::Arc<Self>,
        send: impl Future<Output = T>,
        explains: impl FnOnce(&T) -> bool,
    ) -> T {
        let mut abandoned = Abandoned { pool: Some(self) };
        let result = send.await;
        abandoned.pool = None;
        if explains(&result) {
            self.re_resolve();
        }
        result
    }

    /// Asks the sentinels again, in the background, unless that happened
    /// within [`RESOLVE_EVERY`] or is happening now.
    fn re_resolve(self: &std::sync::Arc<Self>) {
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
        let pool = std::sync::Arc::clone(self);
        runtime.spawn(async move {
            match resolve(&pool.sentinels, &pool.master, &pool.roots).await {
                Ok(address) if address != lock(&pool.current).0 => {
                    match (pool.connect)(primary_url(pool.tls, &pool.userinfo, &address, pool.db)).await {
                        Ok(conn) => {
                            tracing::warn!(target: "slidegate", master = %pool.master, %address, "following a Sentinel failover to a new primary");
                            metrics::counter!("slidegate_sentinel_switches_total").increment(1);
                            *lock(&pool.current) = (address, conn);
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
    pool: Option<&'a std::sync::Arc<SentinelPool>>,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
