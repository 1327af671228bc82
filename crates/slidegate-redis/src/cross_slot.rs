//! Multi-dimension checks whose keys live in different Cluster slots.
//!
//! One script can only touch keys of one slot. So each slot's dimensions
//! are *reserved* by one general-script call (charged only if all of that
//! slot's dimensions admit), the calls run concurrently, and if any slot
//! denied — or failed — the slots that were charged are *released* again
//! (release.lua takes back exactly the charged units). The request is
//! admitted only if every slot admitted: it never over-admits, and a
//! released reservation leaves no charge behind. While a reservation is
//! held (one round trip), a concurrent request may see less room than
//! there will be; that errs on the side of the limit.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use slidegate::{Dimension, Error, MultiDecision, Rule};

use crate::cluster::identity_slot;
use crate::commands::{self, GeneralReply};
use crate::store::RedisStore;

/// Dimension indices grouped by the slot of their keys, in slot order.
pub(crate) fn group_by_slot(dimensions: &[Dimension<'_>]) -> Result<Vec<Vec<usize>>, Error> {
    let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, (_, key)) in dimensions.iter().enumerate() {
        groups.entry(identity_slot(key)?).or_default().push(i);
    }
    Ok(groups.into_values().collect())
}

/// Decides `dimensions` spread over several slots (see the module docs).
pub(crate) async fn check_all(
    store: &RedisStore,
    dimensions: &[Dimension<'_>],
    groups: &[Vec<usize>],
    cost: u32,
) -> Result<MultiDecision, Error> {
    let now = store.now_arg();
    let parts: Vec<Vec<Dimension<'_>>> =
        groups.iter().map(|g| g.iter().map(|&i| dimensions[i]).collect()).collect();
    let mut calls = Vec::with_capacity(parts.len());
    for part in &parts {
        calls.push(commands::general(
            store.scripts(),
            store.prefix(),
            part,
            cost,
            &now,
            store.uses_field_ttl(),
        )?);
    }
    let replies = join_all(calls.iter().map(|call| store.send(call))).await;

    let mut decoded: Vec<Option<GeneralReply>> = Vec::with_capacity(parts.len());
    let mut failure = None;
    for (part, reply) in parts.iter().zip(replies) {
        let rules: Vec<&Rule> = part.iter().map(|(rule, _)| *rule).collect();
        match reply.and_then(|reply| commands::general_reply(&rules, &reply)) {
            Ok(reply) => decoded.push(Some(reply)),
            Err(error) => {
                decoded.push(None);
                failure.get_or_insert(error);
            }
        }
    }
    let admitted =
        failure.is_none() && decoded.iter().flatten().all(|reply| reply.decisions.iter().all(|d| d.allowed));
    if !admitted {
        // Take back every slot that was charged (all its dimensions admitted).
        for (part, reply) in parts.iter().zip(decoded.iter_mut()) {
            let Some(reply) = reply else { continue };
            if reply.decisions.iter().all(|d| d.allowed) {
                release(store, part, reply, cost).await;
                for decision in &mut reply.decisions {
                    decision.remaining = decision.remaining.saturating_add(cost).min(decision.limit);
                }
            }
        }
    }
    if let Some(error) = failure {
        return Err(error);
    }
    let mut decisions = vec![None; dimensions.len()];
    for (group, reply) in groups.iter().zip(decoded) {
        for (&i, decision) in group.iter().zip(reply.map(|r| r.decisions).unwrap_or_default()) {
            decisions[i] = Some(decision);
        }
    }
    Ok(MultiDecision::from_decisions(decisions.into_iter().flatten().collect()))
}

/// Releases one slot's reservation, once: an answer that came back (or
/// was lost) after the script ran cannot be told apart from one that never
/// ran, and running it twice could take back another request's charge of
/// the same millisecond. If it fails, the charge stays until it leaves
/// the window (every key has a TTL): the error errs on the side of the limit.
async fn release(store: &RedisStore, part: &[Dimension<'_>], reply: &GeneralReply, cost: u32) {
    let call =
        match commands::release(store.scripts(), store.prefix(), part, &reply.receipts, cost, reply.now) {
            Ok(call) => call,
            Err(error) => {
                tracing::error!(target: "slidegate", %error, "cannot build a release");
                return;
            }
        };
    match store.send(&call).await {
        Ok(_) => metrics::counter!("slidegate_cross_slot_releases_total").increment(1),
        Err(error) => {
            metrics::counter!("slidegate_cross_slot_release_failures_total").increment(1);
            tracing::error!(target: "slidegate", %error, "could not release a cross-slot reservation; it stays charged until it leaves the window");
        }
    }
}
