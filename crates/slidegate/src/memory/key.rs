//! The memory store's keys: a rule's state prefix, shared by every key of
//! the rule, and an identity, held in the map's slot when short.
//!
//! A check reads one slot instead of following pointers to a key string
//! built from both: with 10,000 keys the table no longer fits in a core's
//! L2 cache, and each pointer followed is a likely miss.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use crate::rule::StatePrefix;

/// Identities up to this many bytes live in the slot itself.
const INLINE: usize = 22;

/// One key of the store.
pub(super) struct Key {
    prefix: StatePrefix,
    identity: Identity,
}

enum Identity {
    Inline { len: u8, bytes: [u8; INLINE] },
    Boxed(Box<str>),
}

impl Identity {
    fn new(identity: &str) -> Identity {
        let mut bytes = [0u8; INLINE];
        match bytes.get_mut(..identity.len()) {
            Some(head) => {
                head.copy_from_slice(identity.as_bytes());
                // `identity.len() <= INLINE < 256` here.
                Identity::Inline { len: identity.len() as u8, bytes }
            }
            None => Identity::Boxed(identity.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Identity::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Identity::Boxed(boxed) => boxed.as_bytes(),
        }
    }
}

impl Key {
    pub(super) fn new(prefix: &StatePrefix, identity: &str) -> Key {
        Key { prefix: Arc::clone(prefix), identity: Identity::new(identity) }
    }

    /// Whether this is the key of `identity` under `prefix`. The prefix is
    /// almost always the very same allocation (a rule and its clones share
    /// it); rules built separately with equal prefixes share state too.
    pub(super) fn is(&self, prefix: &StatePrefix, identity: &str) -> bool {
        self.identity.as_bytes() == identity.as_bytes()
            && (Arc::ptr_eq(&self.prefix, prefix) || *self.prefix == **prefix)
    }

    pub(super) fn hash(&self, hasher: &impl BuildHasher) -> u64 {
        hash(hasher, &self.prefix, self.identity.as_bytes())
    }

    /// The key as text, `<prefix><identity>` (for tests and diagnostics).
    #[cfg(test)]
    pub(super) fn text(&self) -> String {
        format!("{}{}", self.prefix, String::from_utf8_lossy(self.identity.as_bytes()))
    }
}

/// The hash of the key of `identity` under `prefix`: what [`Key::hash`]
/// gives once the key is stored.
pub(super) fn hash(hasher: &impl BuildHasher, prefix: &str, identity: &[u8]) -> u64 {
    let mut state = hasher.build_hasher();
    prefix.hash(&mut state);
    identity.hash(&mut state);
    state.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_identities_inline_long_ones_boxed_both_compare_and_hash_alike() {
        let hasher = foldhash::fast::RandomState::default();
        let prefix: StatePrefix = Arc::new("100-60000:log:".into());
        let twin: StatePrefix = Arc::new("100-60000:log:".into());
        let other: StatePrefix = Arc::new("100-60000:gcra:".into());
        for identity in
            ["u", "k".repeat(INLINE).as_str(), "k".repeat(INLINE + 1).as_str(), "é".repeat(64).as_str()]
        {
            let key = Key::new(&prefix, identity);
            assert_eq!(matches!(key.identity, Identity::Inline { .. }), identity.len() <= INLINE);
            assert!(key.is(&prefix, identity) && key.is(&twin, identity), "{identity}");
            let shorter: String = identity.chars().skip(1).collect();
            assert!(!key.is(&other, identity) && !key.is(&prefix, &shorter));
            assert_eq!(key.hash(&hasher), hash(&hasher, &twin, identity.as_bytes()));
            assert_eq!(key.text(), format!("{prefix}{identity}"));
        }
        assert_eq!(std::mem::size_of::<Key>(), 32);
    }
}
