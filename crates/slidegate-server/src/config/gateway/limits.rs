//! The limits of a route, or the gateway's: each a limit as the rules
//! write one, with a `key` and `on_missing`, compiled into a rule named
//! `<route>.<name>` (or `gateway.<name>`).

use std::sync::Arc;
use std::time::Duration;

use serde_saphyr::Spanned;
use slidegate::{ConcurrencyLimit, Rule};
use slidegate_tower::MissingKey;

use super::{KeySpec, MAX_PART_LEN, RouteInFlight, RouteLimit};
use crate::config::build::Builder;
use crate::config::limit::Enforcement;
use crate::config::yaml::{LimitFile, LimitYaml, position};

/// Whether `name` can be part of a rule's name.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PART_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// The limits of a route (or the gateway's, `scope` "gateway"): its rate
/// limits and budgets, and its `max_in_flight` limits.
pub(super) fn limits(
    builder: &mut Builder<'_>,
    yaml: Vec<Spanned<LimitYaml>>,
    scope: &str,
) -> (Vec<RouteLimit>, Vec<RouteInFlight>) {
    let mut out: Vec<RouteLimit> = Vec::new();
    let mut in_flight: Vec<RouteInFlight> = Vec::new();
    for limit in yaml {
        let at = position(&limit);
        let mut limit = limit.value;
        let key = match limit.key.take() {
            None => {
                builder.error(
                    at,
                    "a limit needs a `key`: global, client_ip, peer_ip, path, route or header:<name>",
                );
                None
            }
            Some(key) => match KeySpec::parse(&key.value) {
                Ok(key) => Some(key),
                Err(message) => {
                    builder.error(position(&key), message);
                    None
                }
            },
        };
        let missing = match limit.on_missing.take() {
            None => Some(MissingKey::default()),
            Some(m) => match m.value.trim() {
                "shared" => Some(MissingKey::default()),
                "skip" => Some(MissingKey::Skip),
                "reject" => Some(MissingKey::Reject),
                other => {
                    builder.error(
                        position(&m),
                        format!("unknown `on_missing: {other}`: expected shared, skip or reject"),
                    );
                    None
                }
            },
        };
        let cost_header = match limit.cost_header.take() {
            None => Some(None),
            Some(name) if !limit.budget.as_ref().is_some_and(|b| b.value) => {
                builder.error(
                    position(&name),
                    "`cost_header` says what a budget is charged: add `budget: true` to this limit",
                );
                None
            }
            Some(name) => match http::HeaderName::from_bytes(name.value.trim().as_bytes()) {
                Ok(header) => Some(Some(header)),
                Err(_) => {
                    builder
                        .error(position(&name), format!("`cost_header: {}` is no header name", name.value));
                    None
                }
            },
        };
        let shaping = shaping(builder, &mut limit);
        // The rule's name is `<scope>.<name>`, set below.
        let name = match (&limit.name.take(), &key) {
            (Some(name), _) if !valid_name(name.value.trim()) => {
                builder.error(
                    position(name),
                    format!(
                        "limit name `{}` must be 1 to {} characters of A-Z a-z 0-9 _ -",
                        name.value, MAX_PART_LEN
                    ),
                );
                None
            }
            (Some(name), _) => Some(name.value.trim().to_owned()),
            (None, Some(key)) => {
                let name = key.name().replace(':', "-");
                if valid_name(&name) {
                    Some(name)
                } else {
                    builder.error(
                        at,
                        format!(
                            "this limit needs a `name`: its key `{}` makes no name of 1 to {MAX_PART_LEN} \
                             characters of A-Z a-z 0-9 _ -",
                            key.name()
                        ),
                    );
                    None
                }
            }
            (None, None) => None,
        };
        if let Some(max) = limit.max_in_flight.take() {
            let checked = builder.in_flight(&limit, &max, at);
            if cost_header.as_ref().is_some_and(Option::is_some) {
                builder.error(at, "a `max_in_flight` limit takes no `cost_header`");
            }
            if shaping.as_ref().is_some_and(|(delay, _)| delay.is_some()) {
                builder
                    .error(at, "a `max_in_flight` limit takes no `delay`: its requests are refused at once");
            }
            let (Some(key), Some(missing), Some(name), Some((max, ttl))) = (key, missing, name, checked)
            else {
                continue;
            };
            let rule_name = format!("{scope}.{name}");
            let taken = out
                .iter()
                .filter_map(|l| l.rule().and_then(Rule::name))
                .chain(in_flight.iter().map(|l| l.limit.name()));
            if taken.into_iter().any(|n| n == rule_name) {
                builder.error(at, format!("two limits of `{scope}` are called `{name}`; give each a `name`"));
                continue;
            }
            match ConcurrencyLimit::new(&rule_name, max, ttl) {
                Ok(limit) => in_flight.push(RouteInFlight { limit, key, missing, usage: Arc::default() }),
                Err(error) => builder.error(at, format!("`max_in_flight: {max}`: {error}")),
            }
            continue;
        }
        // The stats key of the descriptor it counts as (see
        // `gateway::counter`): `gateway.route_<route>.<key>`, or
        // `gateway.<key>` for a gateway-wide limit.
        let key_name = key.as_ref().map(KeySpec::name).unwrap_or_default();
        let stat_key = match scope {
            "gateway" => format!("gateway.{key_name}"),
            route => format!("gateway.route_{route}.{key_name}"),
        };
        // Position 0: a gateway limit's key and name tell it apart (two of
        // one scope with the same name are refused below), and the same
        // limit in a rules file is a descriptor's only `rate_limit`.
        let built = builder.limit(limit, LimitFile::Gateway, (at, 0), false, &stat_key);
        let (Some(key), Some(missing), Some(name), Some(mut built), Some(cost_header), Some((delay, burst))) =
            (key, missing, name, built, cost_header, shaping)
        else {
            continue;
        };
        let rule_name = format!("{scope}.{name}");
        let rule = match &built.enforcement {
            Enforcement::Rule(rule) => rule.clone().named(&rule_name),
            // `max_in_flight` was taken above: never built here.
            Enforcement::Block(_) | Enforcement::Unlimited | Enforcement::InFlight(_) => {
                builder.error(
                    at,
                    "`requests_per_unit` must be at least 1 (to refuse a route's requests, leave it out)",
                );
                continue;
            }
        };
        let rule = match rule {
            Ok(rule) => rule,
            Err(error) => {
                builder.error(at, format!("this limit cannot be enforced: {error}"));
                continue;
            }
        };
        if in_flight.iter().any(|l| l.limit.name() == rule_name) {
            builder.error(at, format!("two limits of `{scope}` are called `{name}`; give each a `name`"));
            continue;
        }
        if let Some(other) = out.iter().find(|l| l.rule().and_then(Rule::name) == Some(rule_name.as_str())) {
            builder.error(
                at,
                format!(
                    "two limits of `{scope}` are called `{name}` (the first at {}); give each a `name`",
                    other.limit.source
                ),
            );
            continue;
        }
        built.name = Some(rule_name);
        built.enforcement = Enforcement::Rule(rule);
        out.push(RouteLimit {
            limit: Arc::new(built),
            gateway_wide: scope == "gateway",
            key,
            missing,
            cost_header,
            delay,
            burst,
        });
    }
    (out, in_flight)
}

/// The longest a request may wait for a delay (shaping): an admission
/// held longer than this is a client left hanging.
const MAX_DELAY: Duration = Duration::from_secs(300);

/// A limit's `delay` and `burst`, checked (`None`: refused, said why).
fn shaping(builder: &mut Builder<'_>, limit: &mut LimitYaml) -> Option<(Option<Duration>, Option<u32>)> {
    let delay = match limit.delay.take() {
        None => None,
        Some(text) => match humantime::parse_duration(text.value.trim()) {
            Ok(d) if !d.is_zero() && d <= MAX_DELAY => Some(d),
            Ok(_) => {
                builder.error(position(&text), "`delay` must be longer than zero and at most 5m");
                return None;
            }
            Err(e) => {
                builder.error(
                    position(&text),
                    format!("`delay: {}`: {e} (a duration such as 500ms or 3s)", text.value),
                );
                return None;
            }
        },
    };
    if delay.is_some()
        && let Some(penalty) = &limit.penalty
    {
        builder.error(
            position(penalty.as_ref()),
            "a limit with a `penalty` takes no `delay`: each denial of a waiting request would count as a violation",
        );
        return None;
    }
    let burst = match limit.burst.take() {
        None => None,
        Some(burst) if delay.is_none() => {
            builder.error(position(&burst), "`burst` says how many requests wait: give the limit a `delay`");
            return None;
        }
        Some(burst) if burst.value == 0 => {
            builder
                .error(position(&burst), "`burst` must be at least 1 (leave `delay` out to refuse at once)");
            return None;
        }
        Some(burst) => Some(burst.value),
    };
    Some((delay, burst))
}
