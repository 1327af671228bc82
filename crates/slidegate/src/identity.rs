//! Identities (the "who" of a check) are untrusted input; this module turns
//! them into bounded, safe key material.

use std::borrow::Cow;
use std::fmt::Write;

use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind};
use crate::limits::MAX_IDENTITY_LEN;
use crate::rule::Rule;

/// Turns a caller-supplied key into the identity stores use.
///
/// Identities that could steer a Redis Cluster slot or blow up key size —
/// containing `{`, `}` or control characters, starting with `#`, or longer
/// than [`MAX_IDENTITY_LEN`] bytes — are replaced by `#` followed by 32 hex
/// digits of their SHA-256. A digest is stable across processes, so every
/// node maps the same hostile key to the same identity (and limits it), and
/// no plain identity can equal a digest because plain ones never start with `#`.
///
/// # Errors
///
/// [`ErrorKind::InvalidKey`] for an empty key.
///
/// ```
/// use slidegate::store::encode_identity;
///
/// assert_eq!(encode_identity("user-42").unwrap(), "user-42");
/// let hostile = encode_identity("{slot}\n").unwrap();
/// assert!(hostile.starts_with('#') && hostile.len() == 33);
/// assert!(encode_identity("").is_err());
/// ```
pub fn encode_identity(key: &str) -> Result<Cow<'_, str>, Error> {
    if key.is_empty() {
        return Err(Error::new(ErrorKind::InvalidKey, "key must not be empty"));
    }
    let plain = key.len() <= MAX_IDENTITY_LEN && !key.starts_with('#') && !has_hostile_char(key);
    if plain {
        return Ok(Cow::Borrowed(key));
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(33);
    out.push('#');
    for byte in &digest[..16] {
        let _ = write!(out, "{byte:02x}");
    }
    Ok(Cow::Owned(out))
}

/// Whether `key` holds `{`, `}` or a control character. ASCII keys (the
/// common case) are checked byte by byte; others char by char, since
/// control characters also live outside ASCII (U+0080..U+009F).
fn has_hostile_char(key: &str) -> bool {
    if key.is_ascii() {
        return key.bytes().any(|b| b == b'{' || b == b'}' || b.is_ascii_control());
    }
    key.chars().any(|c| c == '{' || c == '}' || c.is_control())
}

/// An identity made safe for stores: the output of [`encode_identity`],
/// held as a type so it is encoded once, where a request enters the core,
/// and trusted below (stores key their state by [`as_str`](Identity::as_str)).
///
/// ```
/// use slidegate::store::Identity;
///
/// assert_eq!(Identity::new("user-42")?.as_str(), "user-42");
/// assert!(Identity::new("a{b}")?.as_str().starts_with('#'));
/// assert!(Identity::new("").is_err());
/// # Ok::<(), slidegate::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity<'a>(Cow<'a, str>);

impl<'a> Identity<'a> {
    /// Encodes `key` (see [`encode_identity`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidKey`] for an empty key.
    pub fn new(key: &'a str) -> Result<Identity<'a>, Error> {
        encode_identity(key).map(Identity)
    }

    /// The encoded identity: at most [`MAX_IDENTITY_LEN`] bytes, never
    /// empty, never holding `{`, `}` or a control character.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The same identity, owning its text.
    pub fn into_owned(self) -> Identity<'static> {
        Identity(Cow::Owned(self.0.into_owned()))
    }
}

impl std::fmt::Display for Identity<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks that `cost` can ever be admitted under `rule`: 1 to its limit,
/// or any cost for a [budget](Rule::budget).
///
/// # Errors
///
/// [`ErrorKind::InvalidCost`] when `cost` is 0 or larger than the limit
/// of a rule that is no budget.
pub fn validate_cost(rule: &Rule, cost: u32) -> Result<(), Error> {
    if rule.is_budget() {
        return Ok(());
    }
    if cost == 0 {
        return Err(Error::new(ErrorKind::InvalidCost, "cost must be at least 1"));
    }
    if cost > rule.limit() {
        return Err(Error::new(
            ErrorKind::InvalidCost,
            format!("cost {cost} exceeds the limit {} and can never be admitted", rule.limit()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_hostile_and_long_keys() {
        let long = "k".repeat(129);
        let huge = "é".repeat(1 << 19);
        let hostile = ["a{b}", "x\ny", "#abc", "\u{7f}", "é\u{85}", "用{户", "\u{0}", &long, &huge];
        for key in hostile {
            let id = encode_identity(key).unwrap();
            assert!(id.starts_with('#') && id.len() == 33, "{key:?} -> {id}");
            assert_eq!(encode_identity(key).unwrap(), id, "stable");
        }
        assert_ne!(encode_identity("a{b}").unwrap(), encode_identity("a{c}").unwrap());
    }

    #[test]
    fn keeps_plain_keys_including_non_ascii() {
        for key in ["user:42", "10.0.0.1", "用户", "k".repeat(128).as_str(), "a b"] {
            assert_eq!(encode_identity(key).unwrap(), key);
        }
    }
}
