//! From a file's YAML to a domain's descriptor tree, checking everything
//! and collecting every problem (not only the first).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_saphyr::Spanned;
use slidegate::Rule;

use super::descriptors::{Level, Node, Pattern};
use super::error::ConfigError;
use super::yaml::{DescriptorYaml, FileYaml, LimitFile, LimitYaml, line_column, position};

mod in_flight;
mod limit;
pub(super) mod tolerant;

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

/// Builds the domain of one file's `text`, adding every problem to
/// `errors`, in file order.
pub(super) fn domain(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<Built> {
    let first = errors.len();
    let built = domain_of(file, text, errors);
    in_file_order(&mut errors[first..]);
    built
}

/// Puts one file's problems in the order of their positions (a problem of
/// the whole file first).
pub(super) fn in_file_order(errors: &mut [ConfigError]) {
    errors.sort_by_key(|e| (e.line, e.column));
}

fn domain_of(file: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Option<Built> {
    if text.lines().all(|line| line.trim().is_empty() || line.trim_start().starts_with('#')) {
        errors.push(ConfigError::whole(
            file,
            "the file is empty: it must name a `domain` and its `descriptors`",
        ));
        return None;
    }
    let options = || {
        let mut options = serde_saphyr::Options::default();
        let mut budget = options.budget.unwrap_or_default();
        // Each level of descriptors is two levels of YAML (a list, a map).
        budget.max_depth = 2 * MAX_DEPTH + 8;
        options.budget = Some(budget);
        options
    };
    let (yaml, _): (FileYaml, _) = tolerant::parse(file, text, options, &["descriptors"], errors)?;
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
    ConfigError::at(file, at, in_our_words(message))
}

/// The parser's message, where it speaks of its own options, in the
/// terms of the file.
fn in_our_words(message: String) -> String {
    if message.contains("did not match any variant of untagged enum") {
        return "expected one value here (a number or a word), not a list or a map".to_owned();
    }
    if message == "invalid boolean" {
        return "expected `true` or `false`".to_owned();
    }
    let Some(rest) = message.strip_prefix("duplicate mapping key") else { return message };
    let key = rest.split_once(", set DuplicateKeyPolicy").map_or(rest, |(key, _)| key);
    match key.strip_prefix(": ") {
        Some(key) => format!("`{key}` is given twice here: write each key once"),
        None => "a key is given twice here: write each key once".to_owned(),
    }
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
        let limits: Vec<Spanned<LimitYaml>> = match (yaml.rate_limit, yaml.rate_limits) {
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
            if let Some(limit) = self.limit(limit.value, LimitFile::Rules, (at, index), shadow, &stat_key) {
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
}
