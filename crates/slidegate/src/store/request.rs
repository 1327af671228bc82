//! What crosses the [`Store`](super::Store) boundary: requests validated
//! once, where they enter the core, and trusted below.

use std::borrow::Cow;

use crate::limits::MAX_DIMENSIONS;
use crate::store::validate_cost;
use crate::{Dimension, Error, ErrorKind, Rule, WeightedDimension};

use super::Identity;

/// One request to a store: a rule, an encoded [`Identity`] and a cost that
/// rule can admit (1 to its limit; any cost for a
/// [budget](Rule::budget), which the store records whatever remains). Built by [`Request::new`], which does
/// all the validation a store may rely on.
///
/// ```
/// use std::num::NonZeroU32;
/// use slidegate::{ErrorKind, Rule, store::Request};
///
/// let rule = Rule::per_second(NonZeroU32::new(5).unwrap());
/// let request = Request::new(&rule, "a{b}", 2)?;
/// assert!(request.identity().as_str().starts_with('#'));
/// assert_eq!(Request::new(&rule, "alice", 6).unwrap_err().kind(), ErrorKind::InvalidCost);
/// assert_eq!(Request::new(&rule, "", 1).unwrap_err().kind(), ErrorKind::InvalidKey);
/// # Ok::<(), slidegate::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    rule: RuleOf<'a>,
    identity: Identity<'a>,
    cost: u32,
}

/// A request's rule: the caller's, borrowed, or its own (scaled, or owned
/// to be queued), boxed — a request stays six words, not eighteen, and is
/// built and returned without copying a whole rule.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RuleOf<'a> {
    Borrowed(&'a Rule),
    Owned(Box<Rule>),
}

impl RuleOf<'_> {
    fn get(&self) -> &Rule {
        match self {
            RuleOf::Borrowed(rule) => rule,
            RuleOf::Owned(rule) => rule,
        }
    }
}

impl<'a> Request<'a> {
    /// A request of `cost` for `key` under `rule`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidCost`] for a cost of 0 or above the limit of a
    /// rule that is no budget; [`ErrorKind::InvalidKey`] for an empty key.
    pub fn new(rule: &'a Rule, key: &'a str, cost: u32) -> Result<Request<'a>, Error> {
        validate_cost(rule, cost)?;
        Ok(Request { rule: RuleOf::Borrowed(rule), identity: Identity::new(key)?, cost })
    }

    /// The rule to decide under.
    pub fn rule(&self) -> &Rule {
        self.rule.get()
    }

    /// Whose state it is.
    pub fn identity(&self) -> &Identity<'a> {
        &self.identity
    }

    /// The request's weight: at least 1, except for a budget (any).
    pub fn cost(&self) -> u32 {
        self.cost
    }

    /// The same request under `rule`, the same state with another limit (an
    /// adaptively scaled one). The caller keeps `cost ≤ rule.limit()`.
    pub(crate) fn enforcing(self, rule: Cow<'a, Rule>) -> Request<'a> {
        debug_assert_eq!(rule.state_prefix(), self.rule().state_prefix());
        let rule = match rule {
            Cow::Borrowed(rule) => RuleOf::Borrowed(rule),
            Cow::Owned(rule) => RuleOf::Owned(Box::new(rule)),
        };
        Request { rule, ..self }
    }

    /// The rule as the caller gave it, when the request borrows it (every
    /// request built by [`Request::new`] does, until scaled or owned).
    pub(crate) fn borrowed_rule(&self) -> Option<&'a Rule> {
        match self.rule {
            RuleOf::Borrowed(rule) => Some(rule),
            RuleOf::Owned(_) => None,
        }
    }

    /// The same request, owning its parts (e.g. to queue it).
    pub fn into_owned(self) -> Request<'static> {
        Request {
            rule: match self.rule {
                RuleOf::Borrowed(rule) => RuleOf::Owned(Box::new(rule.clone())),
                RuleOf::Owned(rule) => RuleOf::Owned(rule),
            },
            identity: self.identity.into_owned(),
            cost: self.cost,
        }
    }
}

/// The dimensions of one multi-dimension request: 1 to [`MAX_DIMENSIONS`]
/// [`Request`]s, each with its own cost, no two sharing state (the same
/// rule state and identity would each see the other's quota as free and
/// admit twice the cost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimensions<'a> {
    requests: Vec<Request<'a>>,
}

impl<'a> Dimensions<'a> {
    /// Validates `dimensions` for a request of `cost`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidKey`] for no or too many dimensions, an empty key
    /// or a repeated dimension; [`ErrorKind::InvalidCost`] for a cost some
    /// rule cannot admit.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use slidegate::{Rule, store::Dimensions};
    ///
    /// let rule = Rule::per_second(NonZeroU32::new(2).unwrap());
    /// assert_eq!(Dimensions::new(&[(&rule, "a"), (&rule, "b")], 2)?.len(), 2);
    /// let twice = Dimensions::new(&[(&rule, "a"), (&rule, "a")], 1).unwrap_err();
    /// assert!(twice.to_string().contains("appears twice"));
    /// # Ok::<(), slidegate::Error>(())
    /// ```
    pub fn new(dimensions: &[Dimension<'a>], cost: u32) -> Result<Dimensions<'a>, Error> {
        Dimensions::validate(dimensions.len(), dimensions.iter().map(|&(rule, key)| (rule, key, cost)))
    }

    /// Validates `dimensions`, each charged its own cost (e.g. the weights
    /// of an Envoy rate-limit request's descriptors).
    ///
    /// # Errors
    ///
    /// As [`Dimensions::new`], for each dimension's own cost.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use slidegate::{Rule, store::Dimensions};
    ///
    /// let rule = Rule::per_second(NonZeroU32::new(5).unwrap());
    /// let dims = Dimensions::weighted(&[(&rule, "a", 1), (&rule, "b", 5)])?;
    /// assert_eq!(dims.requests()[1].cost(), 5);
    /// assert!(Dimensions::weighted(&[(&rule, "a", 6)]).is_err());
    /// # Ok::<(), slidegate::Error>(())
    /// ```
    pub fn weighted(dimensions: &[WeightedDimension<'a>]) -> Result<Dimensions<'a>, Error> {
        Dimensions::validate(dimensions.len(), dimensions.iter().copied())
    }

    fn validate(
        len: usize,
        dimensions: impl Iterator<Item = WeightedDimension<'a>>,
    ) -> Result<Dimensions<'a>, Error> {
        if len == 0 || len > MAX_DIMENSIONS {
            return Err(Error::new(
                ErrorKind::InvalidKey,
                format!("a check needs 1..={MAX_DIMENSIONS} dimensions, got {len}"),
            ));
        }
        let mut requests: Vec<Request<'a>> = Vec::with_capacity(len);
        for (rule, key, cost) in dimensions {
            let request = Request::new(rule, key, cost)?;
            // Few: comparing pairs costs less than hashing.
            if requests.iter().any(|other| other.shares_state(&request)) {
                return Err(Error::new(
                    ErrorKind::InvalidKey,
                    format!(
                        "dimension {rule} for key {:?} appears twice in one check",
                        key.chars().take(64).collect::<String>()
                    ),
                ));
            }
            requests.push(request);
        }
        Ok(Dimensions { requests })
    }

    /// Dimensions already validated (their requests rebuilt under scaled rules).
    pub(crate) fn from_valid(requests: Vec<Request<'a>>) -> Dimensions<'a> {
        Dimensions { requests }
    }

    /// The requests, one per dimension, in the order given.
    pub fn requests(&self) -> &[Request<'a>] {
        &self.requests
    }

    /// The requests, owned.
    pub(crate) fn into_requests(self) -> Vec<Request<'a>> {
        self.requests
    }

    /// How many dimensions (at least 1).
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Never: a check has at least one dimension.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

impl Request<'_> {
    /// Whether both keep their state in the same place.
    fn shares_state(&self, other: &Request<'_>) -> bool {
        self.rule().state_prefix() == other.rule().state_prefix() && self.identity == other.identity
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    #[test]
    fn rejects_bad_dimension_lists() {
        let rule = Rule::per_second(NonZeroU32::new(2).unwrap());
        let kind = |d: &[Dimension<'_>], cost| Dimensions::new(d, cost).unwrap_err().kind();
        assert_eq!(kind(&[], 1), ErrorKind::InvalidKey);
        let many: Vec<Dimension<'_>> = (0..=MAX_DIMENSIONS).map(|_| (&rule, "k")).collect();
        assert!(Dimensions::new(&many, 1).unwrap_err().to_string().contains("1..=64"));
        let twice = Dimensions::new(&[(&rule, "k"), (&rule, "k")], 1).unwrap_err();
        assert!(twice.to_string().contains("appears twice"), "{twice}");
        assert_eq!(kind(&[(&rule, "k")], 3), ErrorKind::InvalidCost);
        assert_eq!(kind(&[(&rule, "")], 1), ErrorKind::InvalidKey);
        // Two hostile keys with one digest are one identity.
        let long = "x".repeat(300);
        assert!(Dimensions::new(&[(&rule, &long), (&rule, long.as_str())], 1).is_err());
        let dims = Dimensions::new(&[(&rule, "a"), (&rule, "b")], 2).unwrap();
        assert_eq!(dims.len(), 2);
        assert!(dims.requests().iter().all(|r| r.cost() == 2));
        // The same identity under another rule's state is another dimension.
        let other = rule.clone().named("other").unwrap();
        assert!(Dimensions::new(&[(&rule, "a"), (&other, "a")], 1).is_ok());
    }
}
