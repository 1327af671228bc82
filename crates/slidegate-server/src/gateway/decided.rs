//! A gateway's decided request, counted in the service's statistics as
//! every edge counts one.

use std::time::Instant;

use http::Response;
use slidegate::MultiDecision;
use slidegate_tower::{AppliedRules, LimitedKeys};

use super::body::GatewayBody;
use super::counter::DOMAIN;
use crate::config::RouteLimit;
use crate::decide::item::Identity;
use crate::decide::stats::{Counted, ServiceStats};

/// Adds a decided request to the service's statistics, as every edge
/// does ([`ServiceStats::decided`]): each limit is a part, shown as the
/// descriptor its counter counts (`route=<route>, <key>=<value>`, as RLS
/// shows the same limit's). A limited request's decision time is counted
/// here; an admitted one's by the proxy, before it forwards the request.
pub(super) fn count(
    stats: &ServiceStats,
    route_limits: &[RouteLimit],
    response: &Response<GatewayBody>,
    deciding: Instant,
) {
    let Some(multi) = response.extensions().get::<MultiDecision>() else { return };
    // The limits that decided, in the order of the decisions: the route's
    // (the layer's rules are its limits, in order), but for those whose
    // key was missing and skipped.
    let applied = response.extensions().get::<AppliedRules>().map_or(u64::MAX, |a| a.0);
    let decided = route_limits.iter().enumerate().filter(|(i, _)| i < &64 && applied & (1 << i) != 0);
    let limits = decided.zip(&multi.decisions).enumerate().map(|(part, ((_, limit), decision))| Counted {
        part,
        stat_key: &limit.limit.stat_key,
        names_values: false,
        name: limit.limit.label(),
        counters: &limit.limit.counters,
        hits: 1,
        decision: *decision,
    });
    // In the order of the decisions, on every denial (the layer's).
    let keys = response.extensions().get::<LimitedKeys>().map_or(&[][..], |k| k.0.as_slice());
    if multi.allowed {
        stats.decided(DOMAIN, &[], limits);
        return;
    }
    stats.store_call(deciding.elapsed());
    let who: Vec<Vec<(String, String)>> = keys
        .iter()
        .zip(&multi.decisions)
        .map(|((rule, identity), decision)| match decision.allowed {
            true => Vec::new(),
            false => Identity::entries_of(identity).unwrap_or_else(|| vec![(rule.clone(), identity.clone())]),
        })
        .collect();
    let who: Vec<&[(String, String)]> = who.iter().map(Vec::as_slice).collect();
    stats.decided(DOMAIN, &who, limits);
}
