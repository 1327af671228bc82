//! A route's budgets and `max_in_flight` limits in use, recorded as the
//! service records its own (the status page's "in use"): a budget's use
//! and debt after each response's cost is charged, a limit's leases
//! running as they are taken and given back.

use std::sync::Arc;

use slidegate::{ConcurrencyLimit, Decision, Rule};
use slidegate_tower::Observer;

use super::counter::DOMAIN;
use crate::config::{GatewayConfig, Route, RouteInFlight, RouteLimit};
use crate::decide::budget_used;
use crate::decide::item::Identity;
use crate::decide::stats;

/// The layer's [`Observer`] for one route.
pub(super) struct RouteUsage {
    route: Arc<str>,
    /// `<route>.`, which the route's own limits' names start with.
    own: String,
    budgets: Vec<RouteLimit>,
    in_flight: Vec<RouteInFlight>,
}

impl RouteUsage {
    /// `None` when the route has neither budgets nor `max_in_flight` limits.
    pub(super) fn of(route: &Route) -> Option<RouteUsage> {
        let budgets: Vec<RouteLimit> =
            route.limits.iter().filter(|l| l.rule().is_some_and(Rule::is_budget)).cloned().collect();
        if budgets.is_empty() && route.in_flight.is_empty() {
            return None;
        }
        let own = format!("{}.", route.name);
        Some(RouteUsage {
            route: Arc::from(route.name.as_str()),
            own,
            budgets,
            in_flight: route.in_flight.clone(),
        })
    }

    fn in_flight(&self, limit: &ConcurrencyLimit) -> Option<&RouteInFlight> {
        self.in_flight.iter().find(|l| l.limit.name() == limit.name())
    }

    /// A lease's identity as the page shows the route's rate limits':
    /// `gateway: route=<route>, <key>=<value>` (a gateway-wide limit's
    /// without the route).
    fn lease_identity(&self, limit: &RouteInFlight, key: &str) -> String {
        let mut entries = Vec::with_capacity(2);
        if limit.limit.name().starts_with(&self.own) {
            entries.push(("route".to_owned(), self.route.to_string()));
        }
        entries.push((limit.key.name(), key.to_owned()));
        stats::shown(DOMAIN, &entries)
    }
}

impl Observer for RouteUsage {
    fn charged(&self, rule: &Rule, key: &str, after: &Decision) {
        let Some(limit) = self.budgets.iter().find(|l| l.rule().and_then(Rule::name) == rule.name()) else {
            return;
        };
        // The key is the service's counter key (counter.rs): its entries.
        let shown = Identity::entries_of(key).map_or_else(|| key.to_owned(), |e| stats::shown(DOMAIN, &e));
        limit.limit.usage.record(&shown, budget_used(after), after);
    }

    fn acquired(&self, limit: &ConcurrencyLimit, key: &str, decision: &Decision) {
        if let Some(in_flight) = self.in_flight(limit) {
            let running = decision.limit.saturating_sub(decision.remaining);
            in_flight.usage.record(&self.lease_identity(in_flight, key), u64::from(running), decision);
        }
    }

    fn released(&self, limit: &ConcurrencyLimit, key: &str) {
        if let Some(in_flight) = self.in_flight(limit) {
            in_flight.usage.released(&self.lease_identity(in_flight, key));
        }
    }
}

/// What the budgets and `max_in_flight` limits of `config` that `previous`
/// had under the same names hold, taken over (the status page's "in
/// use"): a limit's leases count on one record across a reload, so those
/// taken before it are told given back where they are counted.
pub(super) fn keep_usage(config: &mut GatewayConfig, previous: &GatewayConfig) {
    for route in &mut config.routes {
        let Some(before) = previous.routes.iter().find(|r| r.name == route.name) else { continue };
        for limit in &route.limits {
            if let Some(same) = before.limits.iter().find(|l| l.rule().is_some() && l.rule() == limit.rule())
            {
                limit.limit.usage.adopt(&same.limit.usage);
            }
        }
        for in_flight in &mut route.in_flight {
            if let Some(same) = before.in_flight.iter().find(|l| l.limit == in_flight.limit) {
                in_flight.usage = Arc::clone(&same.usage);
            }
        }
    }
}
