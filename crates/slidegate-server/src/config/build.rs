//! From a file's YAML to a domain's descriptor tree, checking everything
//! and collecting every problem (not only the first).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_saphyr::Spanned;
use slidegate::limits::{DEFAULT_BUCKETS, MAX_WINDOW};
use slidegate::{Algorithm, Penalty, Rule};

use super::descriptors::{Level, Node, Pattern};
use super::error::ConfigError;
use super::limit::{Enforcement, Limit};
use super::unit::Unit;
use super::yaml::{DescriptorYaml, FileYaml, PenaltyYaml, RateLimitYaml, line_column, position};

/// The deepest nesting of descriptors a file may have (envoy's requests
/// rarely go past 3 or 4 entries).
pub(crate) const MAX_DEPTH: usize = 16;

/// A domain, built from one file.
pub(super) struct Built {
    pub(super) name: String,
    pub(super) position: (u32, u32),
    pub(super) root: Level,
}

/// A `replaces` entry, checked against the domain's names once all are known.
struct Replaces {
    name: String,
    position: (u32, u32),
}

/// Builds the domain of one file's `text`, adding every problem to `errors`.
pub(super) fn domain(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<Built> {
    if text.lines().all(|line| line.trim().is_empty() || line.trim_start().starts_with('#')) {
        errors.push(ConfigError::whole(
            file,
            "the file is empty: it must name a `domain` and its `descriptors`",
        ));
        return None;
    }
    let mut options = serde_saphyr::Options::default();
    let mut budget = options.budget.unwrap_or_default();
    // Each level of descriptors is two levels of YAML (a list, a map).
    budget.max_depth = 2 * MAX_DEPTH + 8;
    options.budget = Some(budget);
    let yaml: FileYaml = match serde_saphyr::from_str_with_options(text, options) {
        Ok(yaml) => yaml,
        Err(error) => {
            errors.push(yaml_error(file, &error));
            return None;
        }
    };
    let mut builder = Builder::new(file, errors);
    let Some(domain) = yaml.domain else {
        builder.error((1, 1), "the file names no `domain` (one domain per file, as in envoy ratelimit)");
        return None;
    };
    if domain.value.trim().is_empty() {
        builder.error(position(&domain), "`domain` must not be empty");
        return None;
    }
    let mut root = Level::default();
    for descriptor in yaml.descriptors.unwrap_or_default() {
        builder.add(&mut root, descriptor, &domain.value, 1);
    }
    for replaces in std::mem::take(&mut builder.replaces) {
        if !builder.names.contains(&replaces.name) {
            builder.error(
                replaces.position,
                format!(
                    "`replaces` names `{}`, which no limit of domain `{}` is called",
                    replaces.name, domain.value
                ),
            );
        }
    }
    let at = position(&domain);
    Some(Built { name: domain.value, position: at, root })
}

/// A YAML or shape error, at its position.
pub(super) fn yaml_error(file: &Path, error: &serde_saphyr::Error) -> ConfigError {
    // The library's message ends with its own "at line L, column C".
    let message = error.without_snippet().to_string();
    let message = match message.rfind(" at line ") {
        Some(at) if error.location().is_some() => message[..at].to_owned(),
        _ => message,
    };
    let at = error.location().map_or((0, 0), |l| line_column(l.line(), l.column()));
    ConfigError::at(file, at, message)
}

pub(super) struct Builder<'f> {
    file: &'f Path,
    /// Whether the limits are a gateway's (whose messages name its fields).
    gateway: bool,
    errors: &'f mut Vec<ConfigError>,
    /// Every limit name of the domain.
    names: Vec<String>,
    replaces: Vec<Replaces>,
    /// Every rule built so far, once: limits alike share one rule and the
    /// strings derived from it (its state's key prefix, its metric keys),
    /// so deciding any of 10,000 such limits reads the same few cache
    /// lines instead of 10,000 copies of them.
    rules: HashSet<Rule>,
}

impl<'f> Builder<'f> {
    /// A builder of limits written in `file`, adding problems to `errors`.
    pub(super) fn new(file: &'f Path, errors: &'f mut Vec<ConfigError>) -> Builder<'f> {
        Builder {
            file,
            errors,
            gateway: false,
            names: Vec::new(),
            replaces: Vec::new(),
            rules: HashSet::new(),
        }
    }

    /// A builder of a gateway file's limits.
    pub(super) fn for_gateway(file: &'f Path, errors: &'f mut Vec<ConfigError>) -> Builder<'f> {
        Builder { gateway: true, ..Builder::new(file, errors) }
    }

    pub(super) fn error(&mut self, at: (u32, u32), message: impl Into<String>) {
        self.errors.push(ConfigError::at(self.file, at, message));
    }

    /// How many problems have been found so far.
    pub(super) fn error_count(&self) -> usize {
        self.errors.len()
    }

    pub(super) fn source(&self, at: (u32, u32)) -> String {
        format!("{}:{}:{}", self.file.display(), at.0, at.1)
    }

    /// Adds `descriptor` (at `depth`, under stats path `parent`) to `level`.
    fn add(&mut self, level: &mut Level, descriptor: Spanned<DescriptorYaml>, parent: &str, depth: usize) {
        let at = position(&descriptor);
        if depth > MAX_DEPTH {
            self.error(at, format!("descriptors nest deeper than {MAX_DEPTH} levels"));
            return;
        }
        let yaml = descriptor.value;
        let Some(key) = yaml.key.as_ref().map(|k| k.value.clone()).filter(|k| !k.is_empty()) else {
            self.error(at, "a descriptor needs a non-empty `key`");
            return;
        };
        // `value: ""` is no value, as in envoy ratelimit.
        let value = yaml.value.as_ref().map(|v| v.value.clone()).filter(|v| !v.is_empty());
        let mut node = Node {
            key,
            value,
            detailed_metric: yaml.detailed_metric.unwrap_or(false),
            value_to_metric: yaml.value_to_metric.unwrap_or(false),
            share_threshold: false,
            metadata: yaml.metadata,
            ..Node::default()
        };
        let stat_key = format!("{parent}.{}", node.composite());
        if let Some(share) = &yaml.share_threshold
            && share.value
        {
            if node.value.as_deref().and_then(Pattern::of).is_none() {
                self.error(
                    position(share),
                    format!(
                        "`share_threshold` only applies to a wildcard value (one with `*`); `{}` has none",
                        node.composite()
                    ),
                );
            }
            node.share_threshold = true;
        }
        if let Some(quota) = &yaml.quota_mode
            && quota.value
        {
            self.error(
                position(quota),
                "`quota_mode` is not supported: slidegate decides a request's limits together, all or \
                 nothing, and a quota descriptor over its limit would let the others pass uncharged",
            );
        }
        let shadow = yaml.shadow_mode.unwrap_or(false);
        let limits: Vec<Spanned<RateLimitYaml>> = match (yaml.rate_limit, yaml.rate_limits) {
            (Some(_), Some(many)) => {
                self.error(position(&many), "give `rate_limit` or `rate_limits`, not both");
                Vec::new()
            }
            (Some(one), None) => vec![*one],
            (None, Some(many)) => {
                if many.value.is_empty() {
                    self.error(position(&many), "`rate_limits` is empty: give at least one limit");
                }
                if many.value.len() > slidegate::limits::MAX_DIMENSIONS {
                    self.error(
                        position(&many),
                        format!(
                            "`rate_limits` has {} limits; a request is decided with at most {} limits \
                             together",
                            many.value.len(),
                            slidegate::limits::MAX_DIMENSIONS
                        ),
                    );
                }
                many.value
            }
            (None, None) => Vec::new(),
        };
        for (index, limit) in limits.into_iter().enumerate() {
            let at = position(&limit);
            if let Some(limit) = self.limit(limit.value, at, index, shadow, &stat_key) {
                node.limits.push(Arc::new(limit));
            }
        }
        if node.limits.len() > 1 && node.limits.iter().any(|l| l.is_unlimited()) {
            self.error(at, "an `unlimited` limit cannot stand beside other limits of the same descriptor");
        }
        for child in yaml.descriptors.unwrap_or_default() {
            self.add(&mut node.children, child, &stat_key, depth + 1);
        }
        let composite = node.composite();
        if level.insert(node).is_err() {
            self.error(at, format!("duplicate descriptor `{composite}`: `{stat_key}` is defined twice"));
        }
    }

    /// Builds one limit, or says what is wrong with it.
    pub(super) fn limit(
        &mut self,
        yaml: RateLimitYaml,
        at: (u32, u32),
        index: usize,
        shadow: bool,
        stat_key: &str,
    ) -> Option<Limit> {
        let errors_before = self.errors.len();
        let name = yaml.name.as_ref().map(|n| n.value.clone()).filter(|n| !n.is_empty());
        if let Some(name) = &name {
            self.names.push(name.clone());
        }
        let mut replaces = Vec::new();
        for entry in yaml.replaces.unwrap_or_default() {
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
        let base = |enforcement, requests_per_unit, window, unit| Limit {
            name: name.clone(),
            enforcement,
            requests_per_unit,
            window,
            unit,
            shadow,
            replaces: replaces.clone(),
            index,
            stat_key: stat_key.to_owned(),
            source: source.clone(),
            rates: Default::default(),
        };

        if yaml.unlimited.unwrap_or(false) {
            if let Some(unit) = &yaml.unit {
                self.error(position(unit), "`unlimited: true` takes no `unit`");
            }
            for (what, given) in [
                ("window", yaml.window.as_ref().map(position)),
                ("algorithm", yaml.algorithm.as_ref().map(position)),
                ("penalty", yaml.penalty.as_deref().map(position)),
            ] {
                if let Some(pos) = given {
                    self.error(pos, format!("`unlimited: true` takes no `{what}`"));
                }
            }
            return (self.errors.len() == errors_before)
                .then(|| base(Enforcement::Unlimited, u32::MAX, Duration::ZERO, None));
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
            return Some(base(Enforcement::Block, 0, window, unit));
        }
        let rule = Rule::new(requests, window)
            .and_then(|rule| rule.with_algorithm(algorithm))
            .and_then(|rule| rule.named(COUNTER_NAME))
            .map(|rule| rule.in_shadow(shadow));
        let rule = match (rule, penalty) {
            (Ok(rule), Some(penalty)) => rule.with_penalty(penalty),
            (rule, _) => rule,
        };
        match rule {
            Ok(rule) => Some(base(Enforcement::Rule(self.shared(rule)), requests, window, unit)),
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

/// The name of every configured limit's rule. A name keys a rule's state
/// apart from its numbers, so a limit whose `requests_per_unit` changes
/// keeps what it has counted (a lowered limit applies at once); what tells
/// limits apart — the domain, the descriptor's entries, the limit's
/// position, name and window — is in each counter's identity
/// ([`Limit::write_identity_part`](super::Limit)), and limits alike share
/// one rule.
const COUNTER_NAME: &str = "service";
