//! The rules: envoy ratelimit's configuration format, unchanged, plus
//! slidegate's extensions — loaded from a file or a directory, checked
//! whole, compiled into one descriptor tree per domain.
//!
//! ```yaml
//! domain: api
//! descriptors:
//!   - key: remote_address
//!     rate_limit:            # envoy ratelimit: a fixed unit
//!       unit: second
//!       requests_per_unit: 10
//!   - key: user
//!     rate_limits:           # slidegate: several limits, decided together
//!       - { requests_per_unit: 10, unit: second }
//!       - { requests_per_unit: 1000, window: 1d, algorithm: counter }
//! ```

mod build;
mod descriptors;
mod error;
mod explain;
mod files;
mod gateway;
mod limit;
mod rules;
mod unit;
mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

pub(crate) use descriptors::{How, Path as MatchPath};
pub(crate) use descriptors::{Level, Node};
pub use error::{ConfigError, ConfigErrors};
pub use files::{MAX_FILE_BYTES, MAX_FILES};
pub(crate) use files::{Stamps, read};
pub(crate) use gateway::{DEFAULT_MESSAGE, match_order};
pub use gateway::{
    GatewayConfig, GatewayTls, HostMatch, IN_FLIGHT_TTL, KeySpec, MAX_HEADER_BYTES, MAX_PART_LEN, MAX_ROUTES,
    MAX_UPSTREAMS, MIN_HEADER_BYTES, Route, RouteInFlight, RouteLimit, Settings as GatewaySettings,
    TlsCertificate, UpstreamTls,
};
pub use limit::{Enforcement, Limit};
pub(crate) use rules::Rules;
pub use unit::Unit;

/// The stack of the thread that parses rules.
const PARSE_STACK_BYTES: usize = 32 << 20;

/// One domain: the descriptors of one file.
#[derive(Debug)]
pub struct Domain {
    name: String,
    file: PathBuf,
    root: Level,
}

impl Domain {
    /// The domain's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file it was defined in.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The descriptors a request descriptor's `entries` meet, the last one
    /// holding the limits that apply (envoy ratelimit's matching).
    pub(crate) fn lookup<'c>(&'c self, entries: &[(&str, &str)]) -> Option<MatchPath<'c>> {
        self.root.lookup(entries)
    }
}

/// A whole configuration: every domain of a file or a directory.
#[derive(Debug, Default)]
pub struct Config {
    domains: BTreeMap<String, Domain>,
    files: Vec<PathBuf>,
    hash: String,
}

impl Config {
    /// Loads `path`: one file, or every `*.yaml` / `*.yml` file of a
    /// directory and its subdirectories (names starting with `.` are
    /// skipped — Kubernetes keeps a ConfigMap's versions in `..data` and
    /// `..<timestamp>` beside the links to the current one).
    ///
    /// # Errors
    ///
    /// Every problem found, each naming its file, line and column.
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        let files = files::files_of(path)?;
        let mut texts = Vec::with_capacity(files.len());
        let mut errors = Vec::new();
        for file in files {
            match read(&file) {
                Ok(text) => texts.push((file, text)),
                Err(error) => errors.push(error),
            }
        }
        match Config::from_texts(&texts) {
            Ok(config) if errors.is_empty() => Ok(config),
            Ok(_) => Err(ConfigErrors(errors)),
            Err(ConfigErrors(more)) => {
                errors.extend(more);
                Err(ConfigErrors(errors))
            }
        }
    }

    /// Builds a configuration from `(file name, contents)` pairs.
    ///
    /// # Errors
    ///
    /// Every problem found, each naming its file, line and column.
    pub fn from_texts(texts: &[(PathBuf, String)]) -> Result<Config, ConfigErrors> {
        // Parsing recurses once per level of YAML: on a thread whose stack
        // holds the deepest file accepted (the parser's budget refuses
        // deeper ones), whatever thread loads the rules.
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("slidegate-rules".into())
                .stack_size(PARSE_STACK_BYTES)
                .spawn_scoped(scope, || Config::build(texts))
                .map_err(|e| {
                    ConfigErrors(vec![ConfigError::whole(Path::new("."), format!("cannot parse: {e}"))])
                })?
                .join()
                .unwrap_or_else(|_| {
                    Err(ConfigErrors(vec![ConfigError::whole(Path::new("."), "the rules parser failed")]))
                })
        })
    }

    fn build(texts: &[(PathBuf, String)]) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut domains: BTreeMap<String, Domain> = BTreeMap::new();
        let mut hasher = Sha256::new();
        for (file, text) in texts {
            hasher.update(file.to_string_lossy().as_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
            hasher.update([0]);
            let Some(built) = build::domain(file, text, &mut errors) else { continue };
            if let Some(first) = domains.get(&built.name) {
                errors.push(ConfigError::at(
                    file,
                    built.position,
                    format!("domain `{}` is already defined in {}", built.name, first.file.display()),
                ));
                continue;
            }
            domains.insert(
                built.name.clone(),
                Domain { name: built.name, file: file.clone(), root: built.root },
            );
        }
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        let hash = hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        Ok(Config { domains, files: texts.iter().map(|(f, _)| f.clone()).collect(), hash })
    }

    /// The domain called `name`.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// Every domain, by name.
    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        self.domains.values()
    }

    /// The files it was loaded from.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// A digest of the files' names and contents (16 hex digits): equal
    /// hashes, equal configurations.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Every limit of every domain, with its domain, in domain order.
    pub fn limits(&self) -> Vec<(&str, &std::sync::Arc<Limit>)> {
        fn walk<'c>(domain: &'c str, level: &'c Level, out: &mut Vec<(&'c str, &'c std::sync::Arc<Limit>)>) {
            let mut nodes: Vec<&Node> = level.nodes().collect();
            nodes.sort_by(|a, b| (&a.key, &a.value).cmp(&(&b.key, &b.value)));
            for node in nodes {
                out.extend(node.limits.iter().map(|limit| (domain, limit)));
                walk(domain, &node.children, out);
            }
        }
        let mut out = Vec::new();
        for domain in self.domains.values() {
            walk(&domain.name, &domain.root, &mut out);
        }
        out
    }

    /// Hands each limit that counts as one of `previous`'s (same domain,
    /// descriptor, position, name and parameters) that limit's rates, so
    /// the status page's charts go on across a reload.
    pub(crate) fn adopt_rates(&self, previous: &Config) {
        let mut old: std::collections::HashMap<(&str, &str, usize), &std::sync::Arc<Limit>> =
            std::collections::HashMap::new();
        previous.for_each_limit(&mut |domain, l| {
            old.insert((domain, l.stat_key.as_str(), l.index), l);
        });
        self.for_each_limit(&mut |domain, limit| {
            if let Some(same) = old.get(&(domain, limit.stat_key.as_str(), limit.index))
                && same.counts_like(limit)
            {
                limit.rates.adopt(&same.rates);
                limit.usage.adopt(&same.usage);
            }
        });
    }

    /// Calls `f` with every limit and its domain, in no particular order
    /// ([`Config::limits`] sorts them, which a reload need not do).
    fn for_each_limit<'c>(&'c self, f: &mut impl FnMut(&'c str, &'c std::sync::Arc<Limit>)) {
        fn walk<'c>(
            domain: &'c str,
            level: &'c Level,
            f: &mut impl FnMut(&'c str, &'c std::sync::Arc<Limit>),
        ) {
            for node in level.nodes() {
                for limit in &node.limits {
                    f(domain, limit);
                }
                walk(domain, &node.children, f);
            }
        }
        for domain in self.domains.values() {
            walk(&domain.name, &domain.root, f);
        }
    }

    /// The configuration as `GET /v1/rules` shows it.
    pub(crate) fn view(&self) -> Vec<DomainView<'_>> {
        self.domains
            .values()
            .map(|d| DomainView {
                domain: &d.name,
                file: d.file.to_string_lossy(),
                descriptors: level_view(&d.root),
            })
            .collect()
    }
}

/// A domain in `/v1/rules`.
#[derive(Debug, Serialize)]
pub(crate) struct DomainView<'a> {
    domain: &'a str,
    /// As text (a name that is not UTF-8 shown with replacement characters).
    file: std::borrow::Cow<'a, str>,
    descriptors: Vec<NodeView<'a>>,
}

/// A descriptor in `/v1/rules`.
#[derive(Debug, Serialize)]
struct NodeView<'a> {
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    limits: Vec<limit::LimitView<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    detailed_metric: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    share_threshold: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    descriptors: Vec<NodeView<'a>>,
}

fn level_view(level: &Level) -> Vec<NodeView<'_>> {
    let mut nodes: Vec<NodeView<'_>> = level
        .nodes()
        .map(|node| NodeView {
            key: &node.key,
            value: node.value.as_deref(),
            limits: node.limits.iter().map(|l| l.view()).collect(),
            detailed_metric: node.detailed_metric,
            share_threshold: node.share_threshold,
            metadata: node.metadata.as_ref(),
            descriptors: level_view(&node.children),
        })
        .collect();
    nodes.sort_by(|a, b| (a.key, a.value).cmp(&(b.key, b.value)));
    nodes
}
