//! Key layout: `<prefix><rule>:{<identity>}:<part>`.
//!
//! `<rule>` is [`Rule::state_name`] (a chosen name, or `<limit>/<window>ms`
//! for an unnamed rule: the two can never be equal) and `<part>`
//! [`Rule::state_part`] (`log`, `gcra`, `c<buckets>w<window>`, `f<window>`),
//! so rules that read state differently never share a key; the penalty's
//! keys add `:viol` and `:ban` to the state's part, so they are as apart as
//! the states are.
//!
//! The `{identity}` hash tag puts every key of one identity (its state,
//! its violations and its ban) in one Cluster slot, so one script may
//! touch them all. The identity has already been made safe by
//! [`slidegate::store::encode_identity`]: it cannot contain braces, so nobody can
//! steer the slot, and it is at most 128 bytes.

use slidegate::store::Identity;
use slidegate::{Error, ErrorKind, Rule};

/// The longest key prefix: keys stay short, and a prefix is a namespace,
/// not data.
pub const MAX_PREFIX_LEN: usize = 64;

/// Checks a key prefix ([`RedisStoreBuilder::prefix`](crate::RedisStoreBuilder::prefix)).
///
/// # Errors
///
/// [`InvalidConfig`](ErrorKind::InvalidConfig) when the prefix is longer
/// than [`MAX_PREFIX_LEN`] bytes or holds whitespace, a control character
/// or a brace. Braces are refused because every key's `{identity}` hash
/// tag picks its Cluster slot: a brace in the prefix would become the tag,
/// put unrelated identities in one slot and split one identity's keys.
///
/// ```
/// assert!(slidegate_redis::check_prefix("myapp:limits:").is_ok());
/// let err = slidegate_redis::check_prefix("app{1}:").unwrap_err();
/// assert!(err.to_string().contains("hash tag"));
/// ```
pub fn check_prefix(prefix: &str) -> Result<(), Error> {
    let refuse = |why: String| Err(Error::new(ErrorKind::InvalidConfig, why));
    if prefix.len() > MAX_PREFIX_LEN {
        return refuse(format!(
            "the key prefix is {} bytes; at most {MAX_PREFIX_LEN} are allowed",
            prefix.len()
        ));
    }
    if let Some(bad) = prefix.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return refuse(format!(
            "the key prefix must not contain whitespace or control characters (found {bad:?})"
        ));
    }
    if prefix.contains(['{', '}']) {
        return refuse(
            "the key prefix must not contain `{` or `}` (they would become the keys' hash tag)".to_owned(),
        );
    }
    Ok(())
}

/// The Redis key holding `rule`'s state for `key`.
///
/// # Errors
///
/// [`InvalidKey`](slidegate::ErrorKind::InvalidKey) for an empty key.
///
/// ```
/// use std::num::NonZeroU32;
/// use slidegate::Rule;
///
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap()).named("api")?;
/// assert_eq!(slidegate_redis::state_key("sg:", &rule, "user-1")?, "sg:api:{user-1}:log");
/// let hostile = slidegate_redis::state_key("sg:", &rule, "a}{b")?;
/// assert!(hostile.starts_with("sg:api:{#"));
/// # Ok::<(), slidegate::Error>(())
/// ```
pub fn state_key(prefix: &str, rule: &Rule, key: &str) -> Result<String, Error> {
    let identity = Identity::new(key)?;
    Ok(key_for(prefix, rule, identity.as_str(), &rule.state_part()))
}

/// The keys of `rule`'s penalty for `key`: its violations and its ban,
/// in the same hash tag (Cluster slot) as its state, and as apart from
/// other rules' as the state is (`<state key>:viol`, `<state key>:ban`).
///
/// # Errors
///
/// [`InvalidKey`](slidegate::ErrorKind::InvalidKey) for an empty key.
///
/// ```
/// use std::num::NonZeroU32;
/// use slidegate::Rule;
///
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap());
/// let [violations, ban] = slidegate_redis::penalty_keys("sg:", &rule, "u")?;
/// assert_eq!(violations, "sg:100/60000ms:{u}:log:viol");
/// assert_eq!(ban, "sg:100/60000ms:{u}:log:ban");
/// # Ok::<(), slidegate::Error>(())
/// ```
pub fn penalty_keys(prefix: &str, rule: &Rule, key: &str) -> Result<[String; 2], Error> {
    let identity = Identity::new(key)?;
    let [_, violations, ban] = keys_of(prefix, rule, identity.as_str());
    Ok([violations, ban])
}

/// The state, violations and ban keys of `rule` for an encoded identity.
pub(crate) fn keys_of(prefix: &str, rule: &Rule, identity: &str) -> [String; 3] {
    let state = key_for(prefix, rule, identity, &rule.state_part());
    let violations = format!("{state}:viol");
    let ban = format!("{state}:ban");
    [state, violations, ban]
}

/// `<prefix><rule>:{<identity>}:<part>` for an already encoded identity.
pub(crate) fn key_for(prefix: &str, rule: &Rule, identity: &str, part: &str) -> String {
    let name = rule.state_name();
    let mut out = String::with_capacity(prefix.len() + name.len() + identity.len() + part.len() + 4);
    out.push_str(prefix);
    out.push_str(&name);
    out.push_str(":{");
    out.push_str(identity);
    out.push_str("}:");
    out.push_str(part);
    out
}
