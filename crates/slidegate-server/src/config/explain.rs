//! What a sample request would meet, in words (`slidegate serve --check
//! --explain`): per descriptor, the limits it matches, or why none.

use super::{Config, Enforcement, Limit};

impl Config {
    /// One line per descriptor of a request for `domain`: the limits its
    /// `entries` match (envoy ratelimit's matching, as the service does
    /// it), or why it matches none. A domain no file defines is one line
    /// naming the domains defined.
    pub fn explain(&self, domain: &str, descriptors: &[Vec<(String, String)>]) -> Vec<String> {
        let Some(found) = self.domain(domain) else {
            let known: Vec<&str> = self.domains().map(super::Domain::name).collect();
            return vec![format!(
                "domain `{domain}` is not defined (defined: {}): no descriptor of the request meets a limit",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )];
        };
        descriptors
            .iter()
            .enumerate()
            .map(|(i, entries)| {
                let shown: Vec<String> = entries.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let entries: Vec<(&str, &str)> =
                    entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let met = found.lookup(&entries).and_then(|path| path.last().map(|(node, _)| *node));
                let limits = match met {
                    None => "matches no descriptor of the domain: no limit".to_owned(),
                    Some(node) if node.limits.is_empty() => {
                        "matches a descriptor without a limit at this depth: no limit".to_owned()
                    }
                    Some(node) => {
                        let limits: Vec<String> = node.limits.iter().map(|l| describe(l)).collect();
                        limits.join("; ")
                    }
                };
                format!("descriptor {} ({}): {limits}", i + 1, shown.join(", "))
            })
            .collect()
    }
}

/// A limit in words: its name (or stats key), its numbers, and whether
/// it is in shadow mode.
fn describe(limit: &Limit) -> String {
    let name = limit.name.as_deref().unwrap_or(&limit.stat_key);
    let what = match &limit.enforcement {
        Enforcement::Unlimited => "unlimited".to_owned(),
        Enforcement::Block(_) => "blocks every request (requests_per_unit: 0)".to_owned(),
        Enforcement::InFlight(limit) => {
            format!("at most {} at once (leases of {:?}, POST /v1/acquire)", limit.limit(), limit.ttl())
        }
        Enforcement::Rule(rule) => format!(
            "{} per {:?} ({})",
            rule.limit(),
            std::time::Duration::from_millis(rule.window_ms()),
            rule.algorithm().short_name()
        ),
    };
    let shadow = if limit.shadow { ", shadow mode" } else { "" };
    format!("limit `{name}`: {what}{shadow}")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_sample_request_in_words() {
        let rules = "domain: api\ndescriptors:\n  - key: path\n    value: /login\n    descriptors:\n      \
                     - key: user\n        rate_limit: { name: login_per_user, unit: minute, requests_per_unit: 5 }\n  \
                     - key: tenant\n    shadow_mode: true\n    rate_limit: { unit: hour, requests_per_unit: 100 }\n";
        let config = Config::from_texts(&[(PathBuf::from("rules.yaml"), rules.to_owned())]).expect("valid");
        let lines = config.explain(
            "api",
            &[
                entries(&[("path", "/login"), ("user", "mallory")]),
                entries(&[("path", "/login")]),
                entries(&[("tenant", "t1")]),
                entries(&[("nope", "x")]),
            ],
        );
        assert_eq!(
            lines,
            [
                "descriptor 1 (path=/login, user=mallory): limit `login_per_user`: 5 per 60s (log)",
                "descriptor 2 (path=/login): matches a descriptor without a limit at this depth: no limit",
                "descriptor 3 (tenant=t1): limit `api.tenant`: 100 per 3600s (log), shadow mode",
                "descriptor 4 (nope=x): matches no descriptor of the domain: no limit",
            ]
        );
        let unknown = config.explain("apii", &[entries(&[("user", "u")])]);
        assert_eq!(
            unknown,
            ["domain `apii` is not defined (defined: api): no descriptor of the request meets a limit"]
        );
    }
}
