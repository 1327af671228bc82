//! `slidegate bench --baseline …`: stores run through the same client stack
//! (the same `Limiter`, connection and task setup) as slidegate, so a
//! comparison measures what Redis is asked and not the harness.
//!
//! * [`NaiveZset`] (`naive-zset`): the ZSET script people copy from blog
//!   posts (`scripts/naive_zset.lua`).
//! * [`Ping`] (`ping`): a `PING` per check — what one round trip per check
//!   costs by itself (the connection, both processes' scheduling, the
//!   server's event loop), with no script, no key and no batching.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Script;
use redis::aio::ConnectionManager;
use slidegate::store::{Request, Store};
use slidegate::{Decision, Error, ErrorKind};

/// The baseline as a [`Store`]: admits by the naive script's answer.
/// `remaining` and `reset_after` are not computed by that script and are
/// reported as 0.
#[derive(Clone)]
pub struct NaiveZset {
    conn: ConnectionManager,
    script: std::sync::Arc<Script>,
    prefix: String,
}

impl std::fmt::Debug for NaiveZset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NaiveZset").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl NaiveZset {
    /// Connects to the standalone Redis at `url`; keys are `<prefix>naive:<key>`.
    ///
    /// # Errors
    ///
    /// When the URL is not a standalone `redis://` URL or the server cannot be reached.
    pub async fn connect(url: &str, prefix: &str) -> anyhow::Result<NaiveZset> {
        let conn = connect(url).await?;
        let script = Script::new(include_str!("../scripts/naive_zset.lua"));
        script.load_async(&mut conn.clone()).await?;
        Ok(NaiveZset { conn, script: std::sync::Arc::new(script), prefix: format!("{prefix}naive:") })
    }
}

/// A connection manager to the standalone Redis at `url`, with TCP_NODELAY
/// as slidegate's own store sets it.
async fn connect(url: &str) -> anyhow::Result<ConnectionManager> {
    let client = redis::Client::open(url)
        .map_err(|e| anyhow::anyhow!("a --baseline needs a standalone redis:// URL: {e}"))?;
    let info = client
        .get_connection_info()
        .clone()
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    Ok(ConnectionManager::new(redis::Client::open(info)?).await?)
}

impl Store for NaiveZset {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        let (rule, key) = (request.rule(), request.identity().as_str());
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let member = format!("{now}-{}", rand::random::<u32>());
        let mut invocation = self.script.key(format!("{}{key}", self.prefix));
        invocation.arg(now).arg(rule.window_ms()).arg(rule.limit()).arg(member);
        let admitted: i64 = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("naive script: {e}")))?;
        Ok(if admitted == 1 {
            Decision::allowed(rule.limit(), 0, Duration::ZERO)
        } else {
            Decision::limited(rule.limit(), 0, Duration::ZERO, Duration::ZERO)
        })
    }
}

/// A round trip per check as a [`Store`]: every check is one `PING`, and
/// admitted (limit and remaining as the rule's limit). Unbatched, so under
/// load slidegate's auto-batched checks can cost less than this.
#[derive(Clone)]
pub struct Ping {
    conn: ConnectionManager,
}

impl std::fmt::Debug for Ping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ping").finish_non_exhaustive()
    }
}

impl Ping {
    /// Connects to the standalone Redis at `url`.
    ///
    /// # Errors
    ///
    /// When the URL is not a standalone `redis://` URL or the server cannot be reached.
    pub async fn connect(url: &str) -> anyhow::Result<Ping> {
        Ok(Ping { conn: connect(url).await? })
    }
}

impl Store for Ping {
    async fn check(&self, request: &Request<'_>) -> Result<Decision, Error> {
        let rule = request.rule();
        redis::cmd("PING")
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("ping: {e}")))?;
        Ok(Decision::allowed(rule.limit(), rule.limit(), Duration::ZERO))
    }
}
