//! The order a request tries the routes in, and the routes it never
//! reaches: most specific first — an exact host, then a host suffix, then
//! any host; a longer path prefix first; a route of some methods before
//! one of all; equal routes in file order. A route every request of
//! which an earlier one takes can never match: it loads, with a warning.

use std::cmp::Reverse;

use super::{HostMatch, Route};

/// The indexes of `routes` in the order a request tries them.
pub(crate) fn match_order(routes: &[Route]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..routes.len()).collect();
    // Stable: equal routes stay in file order.
    order.sort_by_key(|&i| {
        let route = &routes[i];
        let host = match &route.host {
            Some(HostMatch::Exact(_)) => 0,
            Some(HostMatch::Suffix(_)) => 1,
            None => 2,
        };
        (host, Reverse(route.path_prefix.len()), route.methods.is_empty())
    });
    order
}

/// For each route that can never match, its index and the index of the
/// route tried before it that takes all its requests.
pub(super) fn unreachable(routes: &[Route]) -> Vec<(usize, usize)> {
    let order = match_order(routes);
    let mut found = Vec::new();
    for (at, &later) in order.iter().enumerate() {
        if let Some(&earlier) =
            order[..at].iter().find(|&&earlier| takes_all(&routes[earlier], &routes[later]))
        {
            found.push((later, earlier));
        }
    }
    found
}

/// Whether every request `later` would take, `earlier` takes.
fn takes_all(earlier: &Route, later: &Route) -> bool {
    let hosts = match (&earlier.host, &later.host) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(HostMatch::Exact(a)), Some(HostMatch::Exact(b))) => a == b,
        (Some(HostMatch::Exact(_)), Some(HostMatch::Suffix(_))) => false,
        (Some(suffix @ HostMatch::Suffix(_)), Some(HostMatch::Exact(host))) => suffix.matches(host),
        // `*.b.example.com`'s hosts all end in `.example.com`.
        (Some(HostMatch::Suffix(a)), Some(HostMatch::Suffix(b))) => b.ends_with(a.as_str()),
    };
    let methods = earlier.methods.is_empty()
        || (!later.methods.is_empty() && later.methods.iter().all(|m| earlier.methods.contains(m)));
    hosts && methods && later.path_prefix.starts_with(earlier.path_prefix.as_str())
}
