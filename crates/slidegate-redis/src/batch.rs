//! Explicit batches ([`Store::check_batch`](slidegate::Store::check_batch)):
//! many independent requests in one round trip per server (per slot on a
//! Cluster, all slots at once).
//!
//! Consecutive requests without a penalty go as one multi-script call
//! (up to [`MAX_MULTI`] checks), a lone one as its single script's call, a
//! request with a penalty as its own general-script call; the calls of one
//! server or slot go as one pipeline, in input order, so requests for the
//! same key are decided in the order given. A request that fails does not
//! fail the others.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use redis::{FromRedisValue, Value};
use slidegate::store::Request;
use slidegate::{Decision, Error, ErrorKind};

use crate::calls::single::Check;
use crate::calls::{Call, Ints, general, multi, single};
use crate::cluster::identity_slot;
use crate::store::RedisStore;

/// The most checks in one multi-script call: one call holds the server
/// for all of its checks, so a large batch is cut into several.
const MAX_MULTI: usize = 256;
/// The most calls in one pipeline.
const MAX_PIPELINE: usize = 256;

/// What one call of a batch decides: requests by index, with their checks.
enum Part<'c> {
    /// One request without a penalty, by its single script.
    Single(usize, &'c Check),
    /// Several requests without a penalty, by the multi script.
    Multi(Vec<(usize, &'c Check)>),
    /// One request with a penalty, by the general script.
    General(usize),
}

pub(crate) async fn check_batch(
    store: &RedisStore,
    requests: &[Request<'_>],
) -> Vec<Result<Decision, Error>> {
    let now = match store.now() {
        Ok(now) => now,
        Err(error) => {
            return requests.iter().map(|_| Err(Error::new(error.kind(), error.message()))).collect();
        }
    };
    let checks: Vec<Option<Check>> = requests
        .iter()
        .map(|r| r.rule().penalty().is_none().then(|| Check::new(store.prefix(), r)))
        .collect();
    let backend = match store.connected() {
        Ok(connected) => &connected.backend,
        Err(error) => {
            return requests.iter().map(|_| Err(Error::new(error.kind(), error.message()))).collect();
        }
    };
    let parts = plan(requests, &checks, store.is_cluster());
    let (scripts, field_ttl) = (store.scripts(), store.uses_field_ttl());
    let call_of = |part: &Part<'_>| -> Call<'_> {
        match part {
            Part::Single(_, check) => check.call(scripts, now, field_ttl),
            Part::Multi(run) => {
                let batch: Vec<&Check> = run.iter().map(|&(_, check)| check).collect();
                multi::call(scripts, &batch, now, field_ttl)
            }
            Part::General(i) => {
                general::call(scripts, store.prefix(), &[&requests[*i]], now, field_ttl, general::Mode::Check)
            }
        }
    };
    let sends = parts.iter().flat_map(|slot| slot.chunks(MAX_PIPELINE)).map(|chunk| async move {
        let calls: Vec<Call<'_>> = chunk.iter().map(call_of).collect();
        (chunk, backend.pipeline(&calls).await)
    });
    let mut results: Vec<Option<Result<Decision, Error>>> = (0..requests.len()).map(|_| None).collect();
    for (chunk, replies) in join_all(sends).await {
        for (part, reply) in chunk.iter().zip(replies) {
            file(requests, part, reply, &mut results);
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::new(ErrorKind::Backend, "batch item lost"))))
        .collect()
}

/// The calls of a batch, per server or Cluster slot, in input order.
fn plan<'c>(requests: &[Request<'_>], checks: &'c [Option<Check>], cluster: bool) -> Vec<Vec<Part<'c>>> {
    let mut slots: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, request) in requests.iter().enumerate() {
        let slot = if cluster { identity_slot(request.identity()) } else { 0 };
        slots.entry(slot).or_default().push(i);
    }
    slots
        .into_values()
        .map(|indices| {
            let mut parts = Vec::new();
            let mut run: Vec<(usize, &Check)> = Vec::new();
            let flush = |run: &mut Vec<(usize, &'c Check)>, parts: &mut Vec<Part<'c>>| match run.as_slice() {
                [] => {}
                &[(i, check)] => {
                    parts.push(Part::Single(i, check));
                    run.clear();
                }
                _ => parts.push(Part::Multi(std::mem::take(run))),
            };
            for i in indices {
                let Some(check) = &checks[i] else {
                    flush(&mut run, &mut parts);
                    parts.push(Part::General(i));
                    continue;
                };
                run.push((i, check));
                if run.len() == MAX_MULTI {
                    flush(&mut run, &mut parts);
                }
            }
            flush(&mut run, &mut parts);
            parts
        })
        .collect()
}

/// Decodes one call's reply into the results of its requests.
fn file(
    requests: &[Request<'_>],
    part: &Part<'_>,
    reply: Result<Value, Error>,
    results: &mut [Option<Result<Decision, Error>>],
) {
    let ints = |value: Value| {
        Ints::from_redis_value(value)
            .map_err(|e| Error::new(ErrorKind::Backend, format!("unexpected script reply: {e}")))
    };
    match part {
        Part::Single(i, _) => {
            results[*i] = Some(reply.and_then(ints).and_then(|r| single::decode(requests[*i].rule(), &r)));
        }
        Part::General(i) => {
            results[*i] =
                Some(reply.and_then(ints).and_then(|r| general::decode_one(requests[*i].rule(), &r)));
        }
        Part::Multi(run) => {
            let replies = match reply {
                Ok(value) => multi::decode(value, run.len()),
                Err(error) => run.iter().map(|_| Err(Error::new(error.kind(), error.message()))).collect(),
            };
            for (&(i, _), reply) in run.iter().zip(replies) {
                results[i] = Some(reply.and_then(|r| single::decode(requests[i].rule(), &r)));
            }
        }
    }
}
