//! What is derived from a rule's fields, built once per rule: its state
//! name, the prefix of its state's keys (and the state part in it), and
//! its metric keys.

use super::{Algorithm, Rule, StatePrefix};
use crate::telemetry::keys::RuleKeys;

/// [`Rule::state_name`], the state prefix and the metric keys of a rule,
/// computed on first use. Derived from the other fields, so it takes no part in comparing or
/// hashing rules; every change to the name or the algorithm resets it.
#[derive(Debug, Clone, Default)]
pub(super) struct Derived(std::sync::OnceLock<DerivedStrings>);

#[derive(Debug, Clone)]
pub(super) struct DerivedStrings {
    pub(super) state_name: std::sync::Arc<str>,
    /// `<state name>:<state part>:`; shared, so the memory store's keys
    /// can hold it without a copy each.
    pub(super) state_prefix: super::StatePrefix,
    /// The rule's metric keys, labelled with its state name.
    pub(super) metric_keys: std::sync::Arc<RuleKeys>,
}

impl Derived {
    pub(super) const fn empty() -> Derived {
        Derived(std::sync::OnceLock::new())
    }
}

impl PartialEq for Derived {
    fn eq(&self, _: &Derived) -> bool {
        true
    }
}

impl Eq for Derived {}

impl std::hash::Hash for Derived {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Rule {
    /// The derived strings, built on first use.
    pub(super) fn derived(&self) -> &DerivedStrings {
        self.derived.0.get_or_init(|| {
            let state_name: std::sync::Arc<str> = match &self.name {
                Some(name) => std::sync::Arc::from(&**name),
                None => self.unnamed_state_name().into(),
            };
            let mut state_prefix = String::from(&*state_name);
            state_prefix.push(':');
            self.write_state_part(&mut state_prefix);
            state_prefix.push(':');
            let metric_keys = std::sync::Arc::new(RuleKeys::new(&state_name));
            let state_prefix = std::sync::Arc::new(state_prefix.into_boxed_str());
            DerivedStrings { state_name, state_prefix, metric_keys }
        })
    }

    /// `<limit>/<window>ms`: the `/` is outside the alphabet of chosen
    /// names ([`Rule::named`]), so no named rule can meet an unnamed one's
    /// state.
    fn unnamed_state_name(&self) -> String {
        let mut name = String::new();
        push_u64(&mut name, self.state_limit.get().into());
        name.push('/');
        push_u64(&mut name, self.window_ms);
        name.push_str("ms");
        name
    }
}

/// Appends `n` in decimal: what `write!(out, "{n}")` does, without the
/// formatting machinery (the Redis store spells a counter's state part on
/// every call).
fn push_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

impl Rule {
    /// `<state name>:<state part>:` (built once per rule, shared by its clones).
    pub(crate) fn state_prefix(&self) -> &StatePrefix {
        &self.derived().state_prefix
    }

    /// Appends [`Rule::state_part`] to `out`: the one place it is spelled.
    fn write_state_part(&self, out: &mut String) {
        match self.algorithm {
            Algorithm::SlidingLog => out.push_str("log"),
            Algorithm::Gcra => out.push_str("gcra"),
            Algorithm::SlidingCounter { buckets } => {
                out.push('c');
                push_u64(out, buckets.get().into());
                out.push('w');
                push_u64(out, self.window_ms);
            }
            Algorithm::FixedWindow => {
                out.push('f');
                push_u64(out, self.window_ms);
            }
        }
    }

    /// Names the kind of state this rule keeps, so rules that read state
    /// differently never share it: `log`, `gcra`, `c<buckets>w<window ms>`
    /// (bucket indices depend on both) and `f<window ms>`.
    pub fn state_part(&self) -> std::borrow::Cow<'static, str> {
        match self.algorithm {
            Algorithm::SlidingLog => "log".into(),
            Algorithm::Gcra => "gcra".into(),
            Algorithm::SlidingCounter { .. } | Algorithm::FixedWindow => {
                let mut part = String::new();
                self.write_state_part(&mut part);
                part.into()
            }
        }
    }
}
