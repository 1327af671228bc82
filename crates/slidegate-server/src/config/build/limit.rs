//! One limit as written (`rate_limit`, an entry of `rate_limits`, a
//! gateway route's limit), checked and compiled: its window or unit, its
//! number, its algorithm and penalty, into a [`Limit`] holding its rule.

use serde_saphyr::Spanned;
use slidegate::limits::{DEFAULT_BUCKETS, MAX_WINDOW};
use slidegate::{Algorithm, ConcurrencyLimit, Penalty, Rule};

use super::{Builder, Replaces};
use crate::config::limit::{Enforcement, Limit};
use crate::config::unit::Unit;
use crate::config::yaml::{LimitFile, LimitYaml, PenaltyYaml, position};

impl Builder<'_> {
    /// Builds one limit written in `file`, or says what is wrong with it.
    /// `shadow`: its descriptor's `shadow_mode` (the limit's own applies
    /// too).
    pub(in crate::config) fn limit(
        &mut self,
        mut yaml: LimitYaml,
        file: LimitFile,
        (at, index): ((u32, u32), usize),
        shadow: bool,
        stat_key: &str,
    ) -> Option<Limit> {
        let errors_before = self.errors.len();
        for (field_at, why) in yaml.foreign_fields(file) {
            self.error(field_at, why);
        }
        if file == LimitFile::Gateway {
            // Refused above; not read as if they applied.
            (yaml.replaces, yaml.unlimited) = (None, None);
        }
        let shadow = shadow || yaml.shadow_mode.unwrap_or(false);
        let name = yaml.name.as_ref().map(|n| n.value.clone()).filter(|n| !n.is_empty());
        if let Some(name) = &name {
            self.names.push(name.clone());
        }
        let mut replaces = Vec::new();
        for entry in yaml.replaces.take().map(|r| r.value).unwrap_or_default() {
            let entry_at = position(&entry);
            match entry.value.name.map(|n| n.value).filter(|n| !n.is_empty()) {
                None => self.error(entry_at, "a `replaces` entry needs a `name`"),
                Some(replaced) if Some(&replaced) == name.as_ref() => {
                    self.error(entry_at, format!("limit `{replaced}` cannot replace itself"))
                }
                Some(replaced) => {
                    self.replaces.push(Replaces { name: replaced.clone(), position: entry_at });
                    replaces.push(replaced);
                }
            }
        }
        let source = self.source(at);
        let base = |enforcement, unit| Limit {
            name: name.clone(),
            enforcement,
            unit,
            shadow,
            replaces: replaces.clone(),
            index,
            stat_key: stat_key.to_owned(),
            source: source.clone(),
            rates: Default::default(),
            counters: Default::default(),
            usage: Default::default(),
        };

        if let Some(max) = yaml.max_in_flight.take() {
            let (max, ttl) = self.in_flight(&yaml, &max, at)?;
            let name = rule_name(name.as_deref(), stat_key, index);
            return match ConcurrencyLimit::new(&name, max, ttl) {
                Ok(limit) => {
                    (self.errors.len() == errors_before).then(|| base(Enforcement::InFlight(limit), None))
                }
                Err(error) => {
                    self.error(at, format!("this limit cannot be enforced: {error}"));
                    None
                }
            };
        }
        if let Some(ttl) = &yaml.lease_ttl {
            self.error(position(ttl), "`lease_ttl` is a `max_in_flight` limit's field");
        }
        if yaml.unlimited.is_some_and(|u| u.value) {
            if let Some(unit) = &yaml.unit {
                self.error(position(unit), "`unlimited: true` takes no `unit`");
            }
            for (what, given) in [
                ("budget", yaml.budget.as_ref().map(position)),
                ("window", yaml.window.as_ref().map(position)),
                ("algorithm", yaml.algorithm.as_ref().map(position)),
                ("penalty", yaml.penalty.as_deref().map(position)),
            ] {
                if let Some(pos) = given {
                    self.error(pos, format!("`unlimited: true` takes no `{what}`"));
                }
            }
            return (self.errors.len() == errors_before).then(|| base(Enforcement::Unlimited, None));
        }

        let (window, unit) = match (&yaml.unit, &yaml.window) {
            (Some(_), Some(window)) => {
                self.error(position(window), "give `unit` or `window`, not both");
                (None, None)
            }
            (Some(unit), None) => match Unit::parse(unit.value.trim()) {
                Some(u) => (Some(u.duration()), Some(u)),
                None => {
                    self.error(
                        position(unit),
                        format!(
                            "unknown unit `{}`: expected second, minute, hour, day, week, month or year",
                            unit.value
                        ),
                    );
                    (None, None)
                }
            },
            (None, Some(window)) => match humantime::parse_duration(window.value.trim()) {
                Ok(w) if w.is_zero() => {
                    self.error(position(window), "`window` must be longer than zero");
                    (None, None)
                }
                Ok(w) if w > MAX_WINDOW => {
                    self.error(
                        position(window),
                        format!(
                            "`window: {}` is longer than the longest window, 366 days",
                            window.value.trim()
                        ),
                    );
                    (None, None)
                }
                Ok(w) => (Some(w), Unit::of_window(w)),
                Err(e) => {
                    self.error(
                        position(window),
                        format!(
                            "`window: {}`: {e} (expected a duration such as 90s, 5m or 1h)",
                            window.value
                        ),
                    );
                    (None, None)
                }
            },
            (None, None) if self.gateway => {
                self.error(
                    at,
                    "a limit needs a `unit` (second, minute, hour, day, week, month, year) or a \
                     `window` (5m, 90s…)",
                );
                (None, None)
            }
            (None, None) => {
                self.error(
                    at,
                    "a `rate_limit` needs a `unit` (second, minute, hour, day, week, month, year), \
                     a `window` (slidegate: 5m, 90s…) or `unlimited: true`",
                );
                (None, None)
            }
        };
        let requests = match &yaml.requests_per_unit {
            None => {
                self.error(at, "a `rate_limit` needs `requests_per_unit`");
                None
            }
            Some(n) => match n.value.whole() {
                Err(text) => {
                    self.error(
                        position(n),
                        format!("`requests_per_unit` must be a whole number, got `{text}`"),
                    );
                    None
                }
                Ok(v) if v < 0 => {
                    self.error(position(n), format!("`requests_per_unit` must be 0 or more, got {v}"));
                    None
                }
                Ok(v) => match u32::try_from(v) {
                    Ok(v) => Some(v),
                    Err(_) => {
                        self.error(
                            position(n),
                            format!("`requests_per_unit` must be at most {}, got {v}", u32::MAX),
                        );
                        None
                    }
                },
            },
        };
        let algorithm = match &yaml.algorithm {
            None => Some(Algorithm::SlidingLog),
            Some(name) => {
                let algorithm = match name.value.trim().to_ascii_lowercase().as_str() {
                    "log" | "sliding_log" => Some(Algorithm::SlidingLog),
                    "counter" | "sliding_counter" => {
                        Some(Algorithm::SlidingCounter { buckets: DEFAULT_BUCKETS })
                    }
                    "fixed" | "fixed_window" => Some(Algorithm::FixedWindow),
                    "gcra" => Some(Algorithm::Gcra),
                    _ => None,
                };
                if algorithm.is_none() {
                    self.error(
                        position(name),
                        format!("unknown algorithm `{}`: expected log, counter, fixed or gcra", name.value),
                    );
                }
                algorithm
            }
        };
        let penalty = yaml.penalty.as_ref().and_then(|p| self.penalty(p));
        let (Some(window), Some(requests), Some(algorithm)) = (window, requests, algorithm) else {
            return None;
        };
        if self.errors.len() > errors_before {
            return None;
        }
        if requests == 0 {
            if let Some(p) = &yaml.penalty {
                self.error(
                    position(p),
                    "`requests_per_unit: 0` blocks every request: a penalty has nothing to add",
                );
                return None;
            }
            return Some(base(Enforcement::Block(window), unit));
        }
        let rule = Rule::new(requests, window)
            .and_then(|rule| rule.with_algorithm(algorithm))
            .and_then(|rule| rule.named(&rule_name(name.as_deref(), stat_key, index)))
            .map(|rule| rule.in_shadow(shadow))
            .map(|rule| if yaml.budget.as_ref().is_some_and(|b| b.value) { rule.budget() } else { rule });
        let rule = match (rule, penalty) {
            (Ok(rule), Some(penalty)) => rule.with_penalty(penalty),
            (rule, _) => rule,
        };
        match rule {
            Ok(rule) => Some(base(Enforcement::Rule(self.shared(rule)), unit)),
            Err(error) => {
                self.error(at, format!("this limit cannot be enforced: {error}"));
                None
            }
        }
    }

    /// The rule equal to `rule` built before, or `rule`, its derived
    /// strings built now (a clone shares them only once they exist).
    fn shared(&mut self, rule: Rule) -> Rule {
        if let Some(same) = self.rules.get(&rule) {
            return same.clone();
        }
        let _ = rule.state_name();
        self.rules.insert(rule.clone());
        rule
    }

    fn penalty(&mut self, yaml: &Spanned<PenaltyYaml>) -> Option<Penalty> {
        let p = &yaml.value;
        let duration = |this: &mut Self, text: &Spanned<String>, what: &str| match humantime::parse_duration(
            text.value.trim(),
        ) {
            Ok(d) => Some(d),
            Err(e) => {
                this.error(position(text), format!("penalty `{what}: {}`: {e}", text.value));
                None
            }
        };
        let Some(window_text) = &p.window else {
            self.error(
                position(yaml),
                "a `penalty` needs a `window` (over which violations are counted, e.g. 10m)",
            );
            return None;
        };
        let window = duration(self, window_text, "window")?;
        let mut penalty = match Penalty::new(window) {
            Ok(penalty) => penalty,
            Err(error) => {
                self.error(position(window_text), format!("penalty: {error}"));
                return None;
            }
        };
        if let Some(warn) = &p.warn_after {
            penalty = match penalty.warn_after(warn.value) {
                Ok(penalty) => penalty,
                Err(error) => {
                    self.error(position(warn), format!("penalty: {error}"));
                    return None;
                }
            };
        }
        match (&p.ban_after, &p.ban_for) {
            (Some(ban), Some(ban_for)) => {
                let ban_for = duration(self, ban_for, "ban_for")?;
                match penalty.ban_after(ban.value, ban_for) {
                    Ok(penalty) => Some(penalty),
                    Err(error) => {
                        self.error(position(ban), format!("penalty: {error}"));
                        None
                    }
                }
            }
            (None, None) => Some(penalty),
            (Some(ban), None) => {
                self.error(position(ban), "penalty `ban_after` needs `ban_for` (how long a ban lasts)");
                None
            }
            (None, Some(ban_for)) => {
                self.error(
                    position(ban_for),
                    "penalty `ban_for` needs `ban_after` (violations before a ban)",
                );
                None
            }
        }
    }
}

/// The name of a configured limit's rule: the limit's `name`, else its
/// descriptor's stats key (`domain.key_value.key`; `.2` after it for the
/// third of `rate_limits`), spelled in the characters a rule name takes;
/// past [`MAX_NAME_LEN`](slidegate::limits::MAX_NAME_LEN), a name keeps
/// its first characters and a stats key its last (its most specific
/// part). It names the limit in quota headers and the library's metrics.
/// A name keys a rule's state apart from its numbers, so a limit whose
/// `requests_per_unit` changes keeps what it has counted (a lowered limit
/// applies at once), and one renamed starts afresh; what tells limits
/// apart — the domain, the descriptor's entries, the limit's position,
/// name and window — is in each counter's identity
/// ([`Limit::write_identity_part`](crate::config::Limit)).
fn rule_name(name: Option<&str>, stat_key: &str, index: usize) -> String {
    let spell = |text: &str| -> Vec<char> {
        text.chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
            .collect()
    };
    let max = slidegate::limits::MAX_NAME_LEN;
    let spelled: Vec<char> = match name {
        Some(name) => spell(name).into_iter().take(max).collect(),
        None => {
            let key = if index == 0 { spell(stat_key) } else { spell(&format!("{stat_key}.{index}")) };
            key[key.len().saturating_sub(max)..].to_vec()
        }
    };
    if spelled.is_empty() { "limit".to_owned() } else { spelled.into_iter().collect() }
}

#[cfg(test)]
mod tests {
    use super::rule_name;

    #[test]
    fn a_rule_is_named_by_its_limit_or_else_its_descriptor() {
        assert_eq!(rule_name(Some("per_user"), "edge.user", 0), "per_user");
        assert_eq!(rule_name(None, "edge.user", 0), "edge.user");
        assert_eq!(rule_name(None, "edge.user", 2), "edge.user.2");
        assert_eq!(rule_name(None, "edge.path_/login.user", 0), "edge.path__login.user");
        assert_eq!(rule_name(Some("ü"), "edge.user", 0), "_");
        let long = format!("edge.{}.user", "a".repeat(100));
        let named = rule_name(None, &long, 0);
        assert_eq!(named.len(), slidegate::limits::MAX_NAME_LEN);
        assert!(named.ends_with("a.user"), "a stats key keeps its last characters: {named}");
        let long = "n".repeat(70) + "x";
        assert_eq!(rule_name(Some(&long), "edge.user", 0), "n".repeat(64), "a name its first");
    }
}
