//! Batches: many independent checks in one round trip.
//!
//! Every check becomes its own script call. On a standalone server the
//! calls go out as one pipeline (redis-rs auto-pipelining on the shared connection would send
//! them together too, but an explicit pipeline is one write and one read).
//! A check that fails does not fail the others. Calls answered `NOSCRIPT`
//! (a restart or `SCRIPT FLUSH` between batches) are reloaded and sent again
//! — only those: the others already ran and must not run twice.

use futures_util::future::join_all;
use std::collections::BTreeMap;

use redis::aio::ConnectionLike;
use redis::{RedisResult, ServerErrorKind};
use slidegate::{BatchItem, Decision, Error, ErrorKind, validate_cost};

use crate::cluster::identity_slot;
use crate::commands::{self, Call, Ints};
use crate::connection::Backend;
use crate::errors::from_redis;
use crate::store::RedisStore;

/// The most checks sent in one pipeline; larger batches go in several.
const MAX_PIPELINE: usize = 1000;

pub(crate) async fn check_batch(
    store: &RedisStore,
    requests: &[BatchItem<'_>],
) -> Vec<Result<Decision, Error>> {
    let now = store.now();
    let mut results: Vec<Option<Result<Decision, Error>>> = (0..requests.len()).map(|_| None).collect();
    let mut calls: Vec<(usize, Call<'_>)> = Vec::with_capacity(requests.len());
    for (i, &(rule, key, cost)) in requests.iter().enumerate() {
        let call = validate_cost(rule, cost).and_then(|()| {
            let now = now.as_ref().map_err(clone_error)?;
            commands::single(store.scripts(), store.prefix(), rule, key, cost, *now, store.uses_field_ttl())
        });
        match call {
            Ok(call) => calls.push((i, call)),
            Err(error) => results[i] = Some(Err(error)),
        }
    }
    // Whether every reply of a pipeline failed for the store's sake.
    let failed = |replies: &Vec<Result<Ints, Error>>| {
        !replies.is_empty() && replies.iter().all(|r| r.as_ref().is_err_and(Error::is_transient))
    };
    match store.backend() {
        // One server: one pipeline per chunk.
        Backend::Standalone(conn) => {
            for chunk in calls.chunks(MAX_PIPELINE) {
                let replies = send_reloading(conn.clone(), chunk).await;
                file(requests, chunk, replies, &mut results);
            }
        }
        // The same on the primary the sentinels name, asking them again when
        // a batch is abandoned or fails as a failover would make it fail.
        Backend::Sentinel(pool) => {
            for chunk in calls.chunks(MAX_PIPELINE) {
                let replies = pool.watched(send_reloading(pool.connection(), chunk), failed).await;
                file(requests, chunk, replies, &mut results);
            }
        }
        // A Cluster pipeline must stay within one slot: one pipeline per
        // slot (in input order within it, so the same key is decided in
        // order), all slots at once, within the lanes' caps and stall
        // counts like single calls. Calls were built from valid keys, so
        // their slot is known.
        Backend::Cluster(pool) => {
            let mut by_slot: BTreeMap<u16, Vec<(usize, Call<'_>)>> = BTreeMap::new();
            for (i, call) in calls {
                let slot = identity_slot(requests[i].1).unwrap_or_default();
                by_slot.entry(slot).or_default().push((i, call));
            }
            let groups: Vec<Vec<(usize, Call<'_>)>> = by_slot.into_values().collect();
            let sends = groups.iter().flat_map(|group| group.chunks(MAX_PIPELINE)).map(|chunk| async move {
                let answered = |replies: &Vec<Result<Ints, Error>>| !failed(replies);
                (chunk, pool.on_lane(|conn| send_reloading(conn, chunk), answered).await)
            });
            for (chunk, replies) in join_all(sends).await {
                file(requests, chunk, replies, &mut results);
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::new(ErrorKind::Backend, "batch item lost"))))
        .collect()
}

/// Puts the decoded `replies` of `chunk` into `results`.
fn file(
    requests: &[BatchItem<'_>],
    chunk: &[(usize, Call<'_>)],
    replies: Vec<Result<Ints, Error>>,
    results: &mut [Option<Result<Decision, Error>>],
) {
    for ((i, call), reply) in chunk.iter().zip(replies) {
        let rule = requests[*i].0;
        results[*i] = Some(reply.and_then(|reply| commands::single_reply(rule, call.shape, &reply)));
    }
}

/// Sends `calls` as one pipeline; resends the ones answered `NOSCRIPT`
/// once, after loading their scripts.
async fn send_reloading<C: ConnectionLike + Clone>(
    conn: C,
    calls: &[(usize, Call<'_>)],
) -> Vec<Result<Ints, Error>> {
    let mut replies = match pipeline(&conn, calls.iter().map(|(_, c)| c)).await {
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
        // Only the checks that did not run are sent again, or fail: the
        // others ran (and charged) and keep their answers.
        match resend(&conn, calls, &missing).await {
            Ok(again) => {
                for (&i, reply) in missing.iter().zip(again) {
                    replies[i] = reply;
                }
            }
            Err(error) => {
                for &i in &missing {
                    replies[i] = Err(redis::RedisError::from((
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

/// Loads the scripts of `calls[missing]` and sends those calls again.
async fn resend<C: ConnectionLike + Clone>(
    conn: &C,
    calls: &[(usize, Call<'_>)],
    missing: &[usize],
) -> Result<Vec<RedisResult<Ints>>, Error> {
    let mut conn = conn.clone();
    let mut loaded = Vec::new();
    for &i in missing {
        let script = calls[i].1.script;
        if !loaded.contains(&script.get_hash()) {
            script.load_async(&mut conn).await.map_err(|e| from_redis("reloading a script", &e))?;
            loaded.push(script.get_hash());
        }
    }
    pipeline(&conn, missing.iter().map(|&i| &calls[i].1)).await
}

/// One pipeline of `calls`; per-call results, or an error for the whole
/// round trip.
async fn pipeline<'c, C: ConnectionLike + Clone>(
    conn: &C,
    calls: impl Iterator<Item = &'c Call<'c>>,
) -> Result<Vec<RedisResult<Ints>>, Error> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for call in calls {
        pipe.add_command(call.cmd.clone());
    }
    pipe.query_async(&mut conn.clone()).await.map_err(|e| from_redis("sending a batch", &e))
}

/// The same failure, for every check of a batch whose round trip failed.
fn clone_error(error: &Error) -> Error {
    Error::new(error.kind(), error.message())
}
