//! The one way calls reach the servers: a single call or a pipeline of
//! calls, on a standalone server, the primary Sentinel names (watched for
//! failovers), or one lane of a Cluster pool (capped) — each connection
//! replaced when it stops answering (`Replaceable`). A
//! call answered `NOSCRIPT` (restart, `SCRIPT FLUSH`, failover to a node
//! that never saw the script) has its script loaded and is sent again —
//! here, and counted in `slidegate_script_reloads_total`.

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisError, RedisResult, ServerErrorKind, Value};
use slidegate::Error;

use crate::calls::Call;
use crate::connection::Backend;
use crate::errors::from_redis;
use crate::replaceable::answered;
use crate::sentinel::failover_explains;

impl Backend {
    /// Sends one call and returns its reply.
    pub(crate) async fn run<T: FromRedisValue>(&self, call: &Call<'_>) -> Result<T, Error> {
        let send = |mut conn| async move { run_on(&mut conn, call).await };
        let result = match self {
            Backend::Standalone(link) => link.call(send, answered).await,
            Backend::Sentinel(pool) => {
                let explains = |result: &RedisResult<T>| result.as_ref().is_err_and(failover_explains);
                pool.watched(send, answered, explains).await
            }
            Backend::Cluster(pool) => {
                pool.on_lane(|mut conn| async move { run_on(&mut conn, call).await }, answered).await
            }
        };
        result.map_err(|e| from_redis("running the limiter script", &e))
    }

    /// Sends `calls` as one pipeline (one write, one read) and returns each
    /// call's reply: a call that fails does not fail the others. On a
    /// Cluster every call's keys must share one slot.
    pub(crate) async fn pipeline(&self, calls: &[Call<'_>]) -> Vec<Result<Value, Error>> {
        // Whether every reply failed for the store's sake (a failover, a
        // dead connection): what single calls tell from their one reply.
        let failed = |replies: &Vec<Result<Value, Error>>| {
            !replies.is_empty() && replies.iter().all(|r| r.as_ref().is_err_and(Error::is_transient))
        };
        let answered = |replies: &Vec<Result<Value, Error>>| !failed(replies);
        match self {
            Backend::Standalone(link) => link.call(|conn| pipeline_on(conn, calls), answered).await,
            Backend::Sentinel(pool) => pool.watched(|conn| pipeline_on(conn, calls), answered, failed).await,
            Backend::Cluster(pool) => pool.on_lane(|conn| pipeline_on(conn, calls), answered).await,
        }
    }
}

fn is_noscript(error: &RedisError) -> bool {
    error.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript)
}

fn count_reload(what: &'static str) {
    metrics::counter!("slidegate_script_reloads_total").increment(1);
    tracing::info!(target: "slidegate", what, "scripts missing on the server (NOSCRIPT): reloading");
}

/// Runs one call; on `NOSCRIPT` loads its script and runs it again, once.
async fn run_on<T: FromRedisValue>(conn: &mut impl ConnectionLike, call: &Call<'_>) -> RedisResult<T> {
    match call.cmd.query_async(conn).await {
        Err(err) if is_noscript(&err) => {
            count_reload("call");
            call.script.load_async(conn).await?;
            call.cmd.query_async(conn).await
        }
        other => other,
    }
}

/// Sends `calls` as one pipeline; resends the ones answered `NOSCRIPT`
/// once, after loading their scripts. Only those: the others ran (and
/// charged) and keep their answers.
async fn pipeline_on<C: ConnectionLike + Clone>(conn: C, calls: &[Call<'_>]) -> Vec<Result<Value, Error>> {
    let all: Vec<usize> = (0..calls.len()).collect();
    let mut replies = match send(&conn, calls, &all).await {
        Ok(replies) => replies,
        Err(error) => return calls.iter().map(|_| Err(Error::new(error.kind(), error.message()))).collect(),
    };
    let missing: Vec<usize> =
        (0..replies.len()).filter(|&i| replies[i].as_ref().is_err_and(is_noscript)).collect();
    if !missing.is_empty() {
        count_reload("pipeline");
        match reload(&conn, calls, &missing).await.and(send(&conn, calls, &missing).await) {
            Ok(again) => {
                for (&i, reply) in missing.iter().zip(again) {
                    replies[i] = reply;
                }
            }
            Err(error) => {
                for &i in &missing {
                    replies[i] = Err(RedisError::from((
                        redis::ErrorKind::Io,
                        "resending after NOSCRIPT failed",
                        error.to_string(),
                    )));
                }
            }
        }
    }
    replies.into_iter().map(|r| r.map_err(|e| from_redis("running the limiter script", &e))).collect()
}

/// Loads the scripts of `calls[which]`, each once.
async fn reload<C: ConnectionLike + Clone>(
    conn: &C,
    calls: &[Call<'_>],
    which: &[usize],
) -> Result<(), Error> {
    let mut conn = conn.clone();
    let mut loaded = Vec::new();
    for &i in which {
        let script = calls[i].script;
        if !loaded.contains(&script.get_hash()) {
            script.load_async(&mut conn).await.map_err(|e| from_redis("reloading a script", &e))?;
            loaded.push(script.get_hash());
        }
    }
    Ok(())
}

/// One pipeline of `calls[which]`: per-call results, or an error for the
/// whole round trip.
async fn send<C: ConnectionLike + Clone>(
    conn: &C,
    calls: &[Call<'_>],
    which: &[usize],
) -> Result<Vec<RedisResult<Value>>, Error> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for &i in which {
        pipe.add_command(calls[i].cmd.clone());
    }
    pipe.query_async(&mut conn.clone()).await.map_err(|e| from_redis("sending a batch", &e))
}
