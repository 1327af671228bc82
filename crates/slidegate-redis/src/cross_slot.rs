//! Multi-dimension checks whose keys live in different Cluster slots.
//!
//! One script can only touch keys of one slot. So each slot's dimensions
//! are *reserved* by one general-script call (charged only if all of that
//! slot's dimensions admit), the calls run concurrently, and if any slot
//! denied — or failed — the slots that were charged are *released* again
//! (entry/release.lua takes back exactly the charged units; a GCRA charge only
//! while nothing touched its key since, see there). The request is
//! admitted only if every slot admitted: it never over-admits.
//!
//! The reservations run in a task of their own, so a caller that gives up
//! (the limiter's deadline drops its future) cannot stop them between a
//! charge and its release: an answer nobody is waiting for any more is
//! released as a whole. A denial is answered once its releases are done,
//! so the caller's next check sees the state it left. While a reservation
//! is held (a round trip or two), a
//! concurrent request may see less room than there will be; that errs on
//! the side of the limit, and is why a Cluster store's denials are not kept
//! in the limiter's deny cache ([`slidegate::Store::releases_charges`]).

use std::collections::BTreeMap;

use futures_util::future::join_all;
use slidegate::store::{Dimensions, Request};
use slidegate::{Error, ErrorKind, MultiDecision, Rule};
use tokio::sync::oneshot;

use crate::calls::general::{self, Reply};
use crate::calls::release as release_call;
use crate::cluster::identity_slot;
use crate::store::RedisStore;

/// Dimension indices grouped by the slot of their keys, in slot order.
pub(crate) fn group_by_slot(requests: &[Request<'_>]) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, request) in requests.iter().enumerate() {
        groups.entry(identity_slot(request.identity())).or_default().push(i);
    }
    groups.into_values().collect()
}

/// Decides `dimensions` spread over several slots (see the module docs).
pub(crate) async fn check_all(
    store: &RedisStore,
    dimensions: &Dimensions<'_>,
    groups: &[Vec<usize>],
) -> Result<MultiDecision, Error> {
    let requests = dimensions.requests();
    // Owned, per slot, for the task.
    let parts: Vec<Vec<Request<'static>>> =
        groups.iter().map(|g| g.iter().map(|&i| requests[i].clone().into_owned()).collect()).collect();
    let (store, groups, count) = (store.clone(), groups.to_vec(), requests.len());
    let (answer, answered) = oneshot::channel();
    tokio::spawn(async move {
        let (result, charged) = reserve(&store, &parts).await;
        // Admitted when every part was charged.
        let admitted = result.as_ref().is_ok_and(|replies| charged.len() == replies.len());
        let release_charged = async || {
            for (index, reply) in &charged {
                release(&store, &parts[*index], reply).await;
            }
        };
        // Released before the answer: a caller's next check sees the state
        // its denial left (the conformance suite's sequential checks do).
        if !admitted {
            release_charged().await;
        }
        let decided = result.map(|replies| {
            let mut decisions = vec![None; count];
            for (group, reply) in groups.iter().zip(replies) {
                for (&i, decision) in group.iter().zip(reply.decisions) {
                    decisions[i] = Some(decision);
                }
            }
            MultiDecision::from_decisions(decisions.into_iter().flatten().collect())
        });
        if let Err(Ok(unwanted)) = answer.send(decided)
            && unwanted.allowed
        {
            // The caller gave up after every slot admitted: the request was
            // answered otherwise (by the failure policy), so it must not
            // stay charged.
            release_charged().await;
        }
    });
    answered.await.unwrap_or_else(|_| {
        Err(Error::new(ErrorKind::Backend, "the cross-slot check ended without an answer"))
    })
}

/// Reserves every part (one slot's dimensions each) concurrently. Returns
/// the replies in part order (or the first failure) and the charged parts
/// (index, reply): all of them when every part admitted; otherwise those
/// to release, whose decisions already show the room they give back.
async fn reserve(
    store: &RedisStore,
    parts: &[Vec<Request<'_>>],
) -> (Result<Vec<Reply>, Error>, Vec<(usize, Reply)>) {
    let now = match store.now() {
        Ok(now) => now,
        Err(error) => return (Err(error), Vec::new()),
    };
    let calls: Vec<_> = parts
        .iter()
        .map(|part| {
            let part: Vec<&Request<'_>> = part.iter().collect();
            general::call(
                store.scripts(),
                store.prefix(),
                &part,
                now,
                store.uses_field_ttl(),
                general::Mode::Check,
            )
        })
        .collect();
    let replies = join_all(calls.iter().map(|call| store.send(call))).await;

    let mut decoded: Vec<Option<Reply>> = Vec::with_capacity(parts.len());
    let mut failure = None;
    for (part, reply) in parts.iter().zip(replies) {
        let rules: Vec<&Rule> = part.iter().map(Request::rule).collect();
        match reply.and_then(|reply| general::decode(&rules, &reply)) {
            Ok(reply) => decoded.push(Some(reply)),
            Err(error) => {
                decoded.push(None);
                failure.get_or_insert(error);
            }
        }
    }
    // A part is charged when all its dimensions admitted.
    let charged: Vec<(usize, Reply)> = decoded
        .iter()
        .enumerate()
        .filter_map(|(i, reply)| {
            reply.clone().filter(|r| r.decisions.iter().all(|d| d.allowed)).map(|r| (i, r))
        })
        .collect();
    if failure.is_none() && charged.len() == parts.len() {
        return (Ok(decoded.into_iter().flatten().collect()), charged);
    }
    for &(i, _) in &charged {
        if let Some(reply) = &mut decoded[i] {
            // A budget's charge stays (it is never taken back).
            for (decision, request) in reply.decisions.iter_mut().zip(&parts[i]) {
                if !request.rule().is_budget() {
                    decision.remaining =
                        decision.remaining.saturating_add(request.cost()).min(decision.limit);
                }
            }
        }
    }
    let result = match failure {
        Some(error) => Err(error),
        None => Ok(decoded.into_iter().flatten().collect()),
    };
    (result, charged)
}

/// Releases one slot's reservation, once: an answer that came back (or
/// was lost) after the script ran cannot be told apart from one that never
/// ran, and running it twice could take back another request's charge of
/// the same millisecond. If it fails, the charge stays until it leaves
/// the window (every key has a TTL): the error errs on the side of the limit.
///
/// A budget's charge stays: it records what was spent, whatever the other
/// dimensions decided.
async fn release(store: &RedisStore, part: &[Request<'_>], reply: &Reply) {
    let (part, receipts): (Vec<Request<'_>>, Vec<i64>) = part
        .iter()
        .zip(&reply.receipts)
        .filter(|(request, _)| !request.rule().is_budget())
        .map(|(request, &receipt)| (request.clone(), receipt))
        .unzip();
    if part.is_empty() {
        return;
    }
    let call = release_call::call(store.scripts(), store.prefix(), &part, &receipts, reply.now);
    match store.send(&call).await {
        Ok(_) => metrics::counter!("slidegate_cross_slot_releases_total").increment(1),
        Err(error) => {
            metrics::counter!("slidegate_cross_slot_release_failures_total").increment(1);
            tracing::error!(target: "slidegate", %error, "could not release a cross-slot reservation; it stays charged until it leaves the window");
        }
    }
}
