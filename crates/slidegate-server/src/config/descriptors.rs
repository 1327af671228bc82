//! A domain's descriptors as a tree, and envoy ratelimit's matching.
//!
//! At each level, for the request's next entry `(key, value)`: a
//! descriptor with that key and exactly that value first, then the first
//! wildcard value of that key that matches (in file order), then the
//! descriptor with that key and no value (any value, a counter per
//! distinct value). There is no backtracking. A limit applies only at the
//! depth the request's descriptor reaches: a request with more entries
//! than the tree, or stopping above the limit, matches none.

use std::collections::HashMap;
use std::sync::Arc;

use smallvec::SmallVec;

use super::limit::Limit;

/// A `value` with `*` wildcards, each matching zero or more characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The text between the stars (the first and last may be empty).
    parts: Vec<String>,
}

impl Pattern {
    /// The pattern of `value`, if it holds a `*`.
    pub(crate) fn of(value: &str) -> Option<Pattern> {
        value.contains('*').then(|| Pattern { parts: value.split('*').map(str::to_owned).collect() })
    }

    /// Whether `value` matches: it starts with the first part, ends with
    /// the last, and holds the others in order between them.
    pub(crate) fn matches(&self, value: &str) -> bool {
        let (Some(first), Some(last)) = (self.parts.first(), self.parts.last()) else { return false };
        let fixed: usize = self.parts.iter().map(String::len).sum();
        if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
            return false;
        }
        let mut rest = &value[first.len()..value.len() - last.len()];
        for part in &self.parts[1..self.parts.len() - 1] {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// One configured descriptor.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Its key.
    pub(crate) key: String,
    /// Its value as written (`None`: any value).
    pub(crate) value: Option<String>,
    /// Its limits (none: a request ending here is not limited). One
    /// limit, the usual case, is held inline: a request reaches it without
    /// reading a separate allocation first.
    pub(crate) limits: SmallVec<[Arc<Limit>; 1]>,
    /// The descriptors nested in it.
    pub(crate) children: Level,
    /// Stats name the request's values (envoy ratelimit's `detailed_metric`).
    pub(crate) detailed_metric: bool,
    /// Stats name this level's request value (`value_to_metric`).
    pub(crate) value_to_metric: bool,
    /// A wildcard whose matches share one counter (`share_threshold`).
    pub(crate) share_threshold: bool,
    /// `metadata`, as written.
    pub(crate) metadata: Option<serde_json::Value>,
}

impl Node {
    /// `key` or `key_value`: how envoy ratelimit names a level in stats.
    pub(crate) fn composite(&self) -> String {
        match &self.value {
            Some(value) => format!("{}_{value}", self.key),
            None => self.key.clone(),
        }
    }
}

/// The descriptors of one level, by key. Most levels have one key or a
/// few (`rule`, then `user` nested in each): those are kept in a list read
/// in order — one small allocation per level, no hashing, and the key's
/// bytes beside its descriptors — where a map of one key took a table of
/// four slots (a kilobyte per nested level) and a probe of its control
/// bytes first, a cache miss per request once 10,000 rules outgrow the
/// cache. A level with more than eight keys is indexed by a map.
#[derive(Debug, Default)]
pub(crate) struct Level {
    keys: Vec<(Text, Keyed)>,
    /// Each key's place in `keys`, once there are more than `LISTED`.
    index: Option<HashMap<Text, usize>>,
}

/// A key or value as a map's key: up to [`Text::INLINE`] bytes in the map's
/// slot itself. Finding `r1234` among 10,000 values then compares bytes
/// the probe has already read, instead of following a pointer to each
/// candidate's string (a likely cache miss per request once the tree
/// outgrows the core's cache).
#[derive(Debug, Clone)]
enum Text {
    Inline { len: u8, bytes: [u8; Text::INLINE] },
    Heap(Box<[u8]>),
}

impl Text {
    const INLINE: usize = 23;

    fn new(text: &str) -> Text {
        let mut bytes = [0u8; Text::INLINE];
        match (bytes.get_mut(..text.len()), u8::try_from(text.len())) {
            (Some(head), Ok(len)) => {
                head.copy_from_slice(text.as_bytes());
                Text::Inline { len, bytes }
            }
            _ => Text::Heap(text.as_bytes().into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Text::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Text::Heap(bytes) => bytes,
        }
    }
}

/// Looked up by the bytes of a `&str` (hashed and compared as bytes).
impl std::borrow::Borrow<[u8]> for Text {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Text {}

/// The descriptors of one level that share a key.
#[derive(Debug, Default)]
struct Keyed {
    exact: HashMap<Text, Node>,
    wildcards: Vec<(Pattern, Node)>,
    any: Option<Node>,
}

/// How a request entry met its descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    /// The same key and value.
    Exact,
    /// A wildcard value.
    Wildcard,
    /// The key alone.
    Any,
}

/// The descriptors a request's entries met, one per entry.
pub(crate) type Path<'c> = Vec<(&'c Node, How)>;

/// Why a descriptor could not be added: another has the same key and value.
#[derive(Debug)]
pub(crate) struct Duplicate;

impl Level {
    /// Keys a level holds in its list alone, found by reading them in order.
    const LISTED: usize = 8;

    /// Where `key` is in `keys`.
    fn position(&self, key: &[u8]) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.keys.iter().position(|(listed, _)| listed.as_bytes() == key),
        }
    }

    /// The descriptors of `key`.
    fn keyed(&self, key: &[u8]) -> Option<&Keyed> {
        self.keys.get(self.position(key)?).map(|(_, keyed)| keyed)
    }

    /// The descriptors of `key`, added empty if it has none yet.
    fn keyed_mut(&mut self, key: &str) -> &mut Keyed {
        let at = self.position(key.as_bytes()).unwrap_or_else(|| {
            if self.keys.len() < Level::LISTED {
                // A level's few keys take no more room than they need.
                self.keys.reserve_exact(1);
            }
            self.keys.push((Text::new(key), Keyed::default()));
            let at = self.keys.len() - 1;
            match &mut self.index {
                Some(index) => {
                    index.insert(Text::new(key), at);
                }
                None if self.keys.len() > Level::LISTED => {
                    let index = self.keys.iter().enumerate().map(|(i, (key, _))| (key.clone(), i)).collect();
                    self.index = Some(index);
                }
                None => {}
            }
            at
        });
        &mut self.keys[at].1
    }

    /// Adds `node`.
    pub(crate) fn insert(&mut self, node: Node) -> Result<(), Duplicate> {
        let keyed = self.keyed_mut(&node.key);
        match node.value.as_deref() {
            None if keyed.any.is_some() => Err(Duplicate),
            None => {
                keyed.any = Some(node);
                Ok(())
            }
            Some(value) => match Pattern::of(value) {
                Some(pattern) => {
                    if keyed.wildcards.iter().any(|(_, other)| other.value == node.value) {
                        return Err(Duplicate);
                    }
                    keyed.wildcards.push((pattern, node));
                    Ok(())
                }
                None if keyed.exact.contains_key(value.as_bytes()) => Err(Duplicate),
                None => {
                    keyed.exact.insert(Text::new(value), node);
                    Ok(())
                }
            },
        }
    }

    /// The descriptors `entries` meet, the last holding the limits that
    /// apply; `None` when some entry meets none.
    pub(crate) fn lookup<'c>(&'c self, entries: &[(&str, &str)]) -> Option<Path<'c>> {
        let mut level = self;
        let mut path = Vec::with_capacity(entries.len());
        for (i, &(key, value)) in entries.iter().enumerate() {
            let keyed = level.keyed(key.as_bytes())?;
            let (node, how) = if let Some(node) = keyed.exact.get(value.as_bytes()) {
                (node, How::Exact)
            } else if let Some((_, node)) = keyed.wildcards.iter().find(|(p, _)| p.matches(value)) {
                (node, How::Wildcard)
            } else {
                (keyed.any.as_ref()?, How::Any)
            };
            path.push((node, how));
            if i + 1 < entries.len() {
                level = &node.children;
            }
        }
        (!path.is_empty()).then_some(path)
    }

    /// Every descriptor of this level, in no particular order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.keys.iter().flat_map(|(_, keyed)| {
            keyed.exact.values().chain(keyed.wildcards.iter().map(|(_, node)| node)).chain(keyed.any.as_ref())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values short enough to sit in the map's slot and longer ones, each
    /// found exactly and only by itself.
    #[test]
    fn values_inline_or_not_are_found_exactly() {
        let values: Vec<String> =
            (0..=40).map(|n| "v".repeat(n)).chain(["é".repeat(12), "日本".into()]).collect();
        let mut level = Level::default();
        for value in &values {
            let node = Node { key: "k".into(), value: Some(value.clone()), ..Node::default() };
            if value.is_empty() {
                // No value: the key alone.
                level.insert(Node { value: None, ..node }).unwrap();
            } else {
                level.insert(node).unwrap();
            }
        }
        for value in &values {
            let path = level.lookup(&[("k", value)]).unwrap();
            let (node, how) = path[0];
            if value.is_empty() {
                assert_eq!((node.value.as_deref(), how), (None, How::Any));
            } else {
                assert_eq!((node.value.as_deref(), how), (Some(value.as_str()), How::Exact), "{value}");
            }
        }
        // A value one byte off is another value: the key alone answers.
        let path = level.lookup(&[("k", &"v".repeat(41))]).unwrap();
        assert_eq!(path[0].1, How::Any);
        assert!(level.lookup(&[("other", "v")]).is_none());
        let duplicate = Node { key: "k".into(), value: Some("v".repeat(30)), ..Node::default() };
        assert!(level.insert(duplicate).is_err(), "a long value is a duplicate too");
    }

    /// Keys are found alike while a level lists them and once it indexes
    /// them; a key's second descriptor with the same value is refused either way.
    #[test]
    fn levels_of_few_keys_and_of_many_find_each() {
        let mut level = Level::default();
        for n in 0..40 {
            let key = format!("key{n}");
            level.insert(Node { key: key.clone(), value: Some("v".into()), ..Node::default() }).unwrap();
            level.insert(Node { key: key.clone(), value: None, ..Node::default() }).unwrap();
            assert_eq!(level.index.is_some(), n + 1 > Level::LISTED, "{n}");
            for m in 0..=n {
                let key = format!("key{m}");
                let path = level.lookup(&[(&key, "v")]).unwrap();
                assert_eq!((path[0].0.key.as_str(), path[0].1), (key.as_str(), How::Exact));
                assert_eq!(level.lookup(&[(&key, "w")]).unwrap()[0].1, How::Any);
            }
            assert!(level.lookup(&[(&format!("key{}", n + 1), "v")]).is_none());
            let again = Node { key, value: Some("v".into()), ..Node::default() };
            assert!(level.insert(again).is_err());
        }
        assert_eq!(level.nodes().count(), 80);
    }

    #[test]
    fn wildcards_match_anywhere() {
        let p = |s: &str| Pattern::of(s).unwrap();
        assert!(p("foo*").matches("foo1") && p("foo*").matches("foo") && !p("foo*").matches("bar"));
        let mid = p("bar*b");
        assert!(mid.matches("barab") && mid.matches("bar123b") && mid.matches("barb"));
        assert!(!mid.matches("bara") && !mid.matches("xbarb"));
        let multi = p("foo*bar*baz");
        assert!(multi.matches("foo123bar456baz") && multi.matches("foobarbaz"));
        assert!(!multi.matches("foo123baz") && !multi.matches("bar456baz"));
        let path = p("/api/*/action");
        assert!(path.matches("/api/123/action") && !path.matches("/api/123/other"));
        assert!(p("*").matches("") && p("*").matches("anything"));
        // The fixed parts may not overlap.
        assert!(!p("ab*ba").matches("aba"));
        assert!(Pattern::of("plain").is_none());
    }
}
