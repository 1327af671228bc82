//! What a request met: one item per limit a descriptor matched, with the
//! counter it charges (its identity) and its weight; items sharing a
//! counter are grouped into one dimension.

use std::sync::Arc;

use slidegate::{Decision, Rule, WeightedDimension};

use crate::config::{Enforcement, How, Limit, MatchPath};
use crate::decide::request::{CheckError, LimitOverride};

/// One limit a request met.
pub(super) struct Item {
    pub(super) descriptor: usize,
    pub(super) limit: Arc<Limit>,
    /// The stats key when the request's values name it
    /// (`detailed_metric`, `value_to_metric`); else the limit's own.
    pub(super) stat_key: Option<String>,
    pub(super) identity: String,
    pub(super) cost: u64,
    pub(super) shadow: bool,
    pub(super) outcome: Option<Decision>,
}

impl Item {
    pub(super) fn rule(&self) -> Option<&Rule> {
        self.limit.rule()
    }
}

/// Items sharing one counter (the same limit and identity, from repeated
/// descriptors), decided as one dimension of their summed weight.
pub(super) struct Group {
    pub(super) members: Vec<usize>,
    pub(super) cost: u32,
}

/// Groups `which` by counter. A group's weight above its limit (or above
/// any `u32`) is the limiter's to answer: it denies it.
pub(super) fn merge(items: &[Item], which: &[usize]) -> Vec<Group> {
    let mut groups: Vec<(Vec<usize>, u64)> = Vec::new();
    for &i in which {
        let same = groups.iter_mut().find(|(members, _)| {
            let first = &items[members[0]];
            Arc::ptr_eq(&first.limit, &items[i].limit) && first.identity == items[i].identity
        });
        match same {
            Some((members, cost)) => {
                members.push(i);
                *cost = cost.saturating_add(items[i].cost);
            }
            None => groups.push((vec![i], items[i].cost)),
        }
    }
    groups
        .into_iter()
        .filter(|(members, _)| items[members[0]].rule().is_some())
        // A peek asks about a request of weight 1 at least.
        .map(|(members, cost)| Group { members, cost: u32::try_from(cost.max(1)).unwrap_or(u32::MAX) })
        .collect()
}

pub(super) fn dimensions<'a>(items: &'a [Item], groups: &[Group]) -> Vec<WeightedDimension<'a>> {
    groups
        .iter()
        .filter_map(|g| {
            let item = &items[g.members[0]];
            Some((item.rule()?, item.identity.as_str(), g.cost))
        })
        .collect()
}

pub(super) fn invalid(error: &slidegate::Error) -> CheckError {
    CheckError::Invalid(error.to_string())
}

/// The counter identity of a limit for a descriptor's `entries`: the
/// domain, every entry (a shared wildcard's pattern instead of its value),
/// and the limit's own part — `limit`'s position and name for the
/// configured limit `path` led to, `request` for the descriptor's own
/// (`path` and `limit` are `None`). Each part is length-prefixed, so no
/// two requests' identities meet whatever bytes their values hold; the
/// library digests long identities.
pub(super) fn identity(
    domain: &str,
    entries: &[(&str, &str)],
    configured: Option<(&MatchPath<'_>, &Limit)>,
) -> String {
    let mut out = Identity::with_capacity(
        24 + domain.len() + entries.iter().map(|(k, v)| k.len() + v.len() + 8).sum::<usize>(),
    );
    out.part(domain);
    for (i, &(key, value)) in entries.iter().enumerate() {
        out.part(key);
        let shared = configured
            .and_then(|(path, _)| path.get(i))
            .filter(|(node, how)| node.share_threshold && *how == How::Wildcard)
            .and_then(|(node, _)| node.value.as_deref());
        out.part(shared.unwrap_or(value));
    }
    match configured {
        Some((_, limit)) => limit.write_identity_part(&mut out.0),
        None => out.0.push_str("|request"),
    }
    out.0
}

/// A counter's identity, written part by part: each part length-prefixed
/// (`<len>:<bytes>`), then the limit's own part (`|…`). The one spelling of
/// a counter on every edge: RLS and the HTTP API through [`identity`], the
/// gateway through [`Identity::keyed`].
pub(crate) struct Identity(String);

impl Identity {
    pub(crate) fn with_capacity(capacity: usize) -> Identity {
        Identity(String::with_capacity(capacity))
    }

    /// Appends one part. Lengths by itoa, not `write!`: every request
    /// builds one per limit.
    pub(crate) fn part(&mut self, part: &str) {
        self.0.push_str(itoa::Buffer::new().format(part.len()));
        self.0.push(':');
        self.0.push_str(part);
    }

    /// What is written so far.
    pub(crate) fn into_string(self) -> String {
        self.0
    }

    /// The identity of `value` between a `prefix` (domain and entries,
    /// written with [`part`](Self::part)) and a limit's part `suffix`.
    pub(crate) fn keyed(prefix: &str, value: &str, suffix: &str) -> String {
        let mut out = Identity::with_capacity(prefix.len() + value.len() + suffix.len() + 8);
        out.0.push_str(prefix);
        out.part(value);
        out.0.push_str(suffix);
        out.0
    }

    /// The descriptor an identity counts: its parts after the domain, up
    /// to the limit's own, as `(key, value)` entries. `None` when
    /// `identity` is not one.
    pub(crate) fn entries_of(identity: &str) -> Option<Vec<(String, String)>> {
        let mut parts = Vec::new();
        let mut rest = identity;
        while !rest.starts_with('|') {
            let (length, tail) = rest.split_once(':')?;
            let length: usize = length.parse().ok()?;
            parts.push(tail.get(..length)?);
            rest = &tail[length..];
        }
        let (_domain, entries) = parts.split_first()?;
        if entries.len() % 2 != 0 {
            return None;
        }
        Some(entries.chunks(2).map(|pair| (pair[0].to_owned(), pair[1].to_owned())).collect())
    }
}

/// The stats key of a match whose request values name it, as envoy
/// ratelimit builds it: with `detailed_metric` on the matched descriptor,
/// every entry's `key_value`; with `value_to_metric` on a level matched by
/// key or wildcard, that level's `key_value`. `None`: the limit's own key.
pub(super) fn dynamic_stat_key(
    domain: &str,
    entries: &[(&str, &str)],
    path: &MatchPath<'_>,
) -> Option<String> {
    let detailed = path.last().is_some_and(|(node, _)| node.detailed_metric);
    if !detailed && !path.iter().any(|(node, how)| node.value_to_metric && *how != How::Exact) {
        return None;
    }
    let mut key = domain.to_owned();
    for (&(entry_key, value), (node, how)) in entries.iter().zip(path) {
        key.push('.');
        if detailed
            || (node.value_to_metric && !node.share_threshold && *how != How::Exact && !value.is_empty())
        {
            key.push_str(entry_key);
            key.push('_');
            key.push_str(value);
        } else {
            key.push_str(&node.composite());
        }
    }
    Some(key)
}

/// Where a descriptor's own limit comes from (its `source`).
pub(super) const OVERRIDE_SOURCE: &str = "the request's descriptor";

/// The limit a descriptor gives itself.
pub(super) fn override_limit(
    domain: &str,
    entries: &[(&str, &str)],
    given: LimitOverride,
) -> Result<Limit, CheckError> {
    let window = given.unit.duration();
    let enforcement = match given.requests_per_unit {
        0 => Enforcement::Block(window),
        n => Enforcement::Rule(Rule::new(n, window).map_err(|e| invalid(&e))?),
    };
    let mut stat_key = domain.to_owned();
    for (key, value) in entries {
        stat_key.push('.');
        stat_key.push_str(key);
        if !value.is_empty() {
            stat_key.push('_');
            stat_key.push_str(value);
        }
    }
    Ok(Limit {
        name: None,
        enforcement,
        unit: Some(given.unit),
        shadow: false,
        replaces: Vec::new(),
        index: 0,
        stat_key,
        source: OVERRIDE_SOURCE.into(),
        rates: Default::default(),
        counters: Default::default(),
        usage: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_identity_gives_back_its_entries() {
        let mut prefix = Identity::with_capacity(16);
        prefix.part("gateway");
        prefix.part("route");
        prefix.part("r");
        prefix.part("client_ip");
        let prefix = prefix.into_string();
        for value in ["10.0.0.1", "", "a:b|c", "12:x", "ü"] {
            let identity = Identity::keyed(&prefix, value, "|0#r.ip@60000");
            let entries = Identity::entries_of(&identity).expect("an identity");
            let expected = [("route", "r"), ("client_ip", value)].map(|(k, v)| (k.to_owned(), v.to_owned()));
            assert_eq!(entries, expected, "{identity}");
        }
        assert_eq!(Identity::keyed("7:gateway", "x", "|0#@1"), "7:gateway1:x|0#@1");
        let built = identity("edge", &[("user", "a|b"), ("path", "")], None);
        let entries = Identity::entries_of(&built).expect("an identity");
        assert_eq!(entries, [("user", "a|b"), ("path", "")].map(|(k, v)| (k.to_owned(), v.to_owned())));
        for not_one in ["", "plain", "7:gateway", "7:gateway1:x|0", "9:gateway|0", "3:ü|", "x:a|"] {
            assert_eq!(Identity::entries_of(not_one), None, "{not_one:?}");
        }
    }

    #[test]
    fn an_identity_spells_each_part_with_its_length() {
        assert_eq!(
            identity("edge", &[("user", "ab"), ("path", "")], None),
            "4:edge4:user2:ab4:path0:|request"
        );
    }
}
