//! Batches: many independent checks in one round trip.
//!
//! Every check becomes its own script call. On a standalone server the
//! calls go out as one pipeline (redis-rs auto-pipelining on the shared connection would send
//! them together too, but an explicit pipeline is one write and one read).
//! A check that fails does not fail the others. Calls answered `NOSCRIPT`
//! (a restart or `SCRIPT FLUSH` between batches) are reloaded and sent again
//! — only those: the others already ran and must not run twice.

use futures_util::future::join_all;
use redis::aio::ConnectionManager;
use redis::{RedisResult, ServerErrorKind};
use slidegate::{BatchItem, Decision, Error, ErrorKind, validate_cost};

use crate::commands::{self, Call};
use crate::connection::Backend;
use crate::errors::from_redis;
use crate::store::RedisStore;

/// The most checks sent in one pipeline; larger batches go in several.
const MAX_PIPELINE: usize = 1000;

pub(crate) async fn check_batch(
    store: &RedisStore,
    requests: &[BatchItem<'_>],
) -> Vec<Result<Decision, Error>> {
    let now = store.now_arg();
    let mut results: Vec<Option<Result<Decision, Error>>> = (0..requests.len()).map(|_| None).collect();
    let mut calls: Vec<(usize, Call<'_>)> = Vec::with_capacity(requests.len());
    for (i, &(rule, key, cost)) in requests.iter().enumerate() {
        let call = validate_cost(rule, cost)
            .and_then(|()| commands::single(store.scripts(), store.prefix(), rule, key, cost, &now));
        match call {
            Ok(call) => calls.push((i, call)),
            Err(error) => results[i] = Some(Err(error)),
        }
    }
    for chunk in calls.chunks(MAX_PIPELINE) {
        let replies = match store.backend() {
            Backend::Standalone(conn) => send_reloading(conn, chunk).await,
            // Calls go to the nodes owning their slots, concurrently: one
            // round trip per node (redis-rs pipelines them per connection).
            Backend::Cluster(_) => join_all(chunk.iter().map(|(_, call)| store.send(call))).await,
        };
        for ((i, call), reply) in chunk.iter().zip(replies) {
            let rule = requests[*i].0;
            results[*i] = Some(reply.and_then(|reply| commands::single_reply(rule, call.shape, &reply)));
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::new(ErrorKind::Backend, "batch item lost"))))
        .collect()
}

/// Sends `calls` as one pipeline; resends the ones answered `NOSCRIPT`
/// once, after loading their scripts.
async fn send_reloading(
    conn: &ConnectionManager,
    calls: &[(usize, Call<'_>)],
) -> Vec<Result<Vec<i64>, Error>> {
    let mut replies = match pipeline(conn, calls.iter().map(|(_, c)| c)).await {
        Ok(replies) => replies,
        Err(error) => return calls.iter().map(|_| Err(clone_error(&error))).collect(),
    };
    let missing: Vec<usize> = replies
        .iter()
        .enumerate()
        .filter(
            |(_, r)| matches!(r, Err(e) if e.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript)),
        )
        .map(|(i, _)| i)
        .collect();
    if !missing.is_empty() {
        metrics::counter!("slidegate_script_reloads_total").increment(1);
        tracing::info!(target: "slidegate", "scripts missing on the server (NOSCRIPT): reloading for a batch");
        let mut conn = conn.clone();
        let mut loaded = Vec::new();
        for &i in &missing {
            let script = calls[i].1.script;
            if !loaded.contains(&script.get_hash()) {
                if let Err(e) = script.load_async(&mut conn).await {
                    let error = from_redis("reloading a script", e);
                    return calls.iter().map(|_| Err(clone_error(&error))).collect();
                }
                loaded.push(script.get_hash());
            }
        }
        match pipeline(&conn, missing.iter().map(|&i| &calls[i].1)).await {
            Ok(again) => {
                for (&i, reply) in missing.iter().zip(again) {
                    replies[i] = reply;
                }
            }
            Err(error) => {
                for &i in &missing {
                    replies[i] = Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "pipeline failed",
                        error.to_string(),
                    )));
                }
            }
        }
    }
    replies.into_iter().map(|r| r.map_err(|e| from_redis("running the limiter script", e))).collect()
}

/// One pipeline of `calls`; per-call results, or an error for the whole
/// round trip.
async fn pipeline<'c>(
    conn: &ConnectionManager,
    calls: impl Iterator<Item = &'c Call<'c>>,
) -> Result<Vec<RedisResult<Vec<i64>>>, Error> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for call in calls {
        pipe.add_command(call.cmd.clone());
    }
    pipe.query_async(&mut conn.clone()).await.map_err(|e| from_redis("sending a batch", e))
}

/// The same failure, for every check of a batch whose round trip failed.
fn clone_error(error: &Error) -> Error {
    Error::new(error.kind(), error.message())
}
