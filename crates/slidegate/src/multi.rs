//! Multi-dimension checks: one request, several (rule, key) pairs — e.g.
//! global per API, per user, per user-and-API — admitted only if every one
//! admits, and then every one is charged; if any denies, none is charged.

use std::time::Duration;

use crate::{Decision, Rule};

/// One dimension of a multi-dimension check: a rule and the key it limits.
pub type Dimension<'a> = (&'a Rule, &'a str);

/// A rule, a key and a cost: one dimension with its own cost (see
/// [`Limiter::check_all_weighted`](crate::Limiter::check_all_weighted)), or
/// one request of a batch ([`Limiter::check_batch`](crate::Limiter::check_batch)).
pub type WeightedDimension<'a> = (&'a Rule, &'a str, u32);

/// The answer to a multi-dimension check.
///
/// `decisions[i]` answers dimension `i`. When the request is denied, the
/// dimensions that had room report `allowed: true` with the quota they had
/// (nothing was charged anywhere); the denying ones report why.
///
/// ```
/// use std::num::NonZeroU32;
/// use slidegate::{Limiter, Rule};
///
/// # tokio_test_shim::block_on(async {
/// let global = Rule::per_second(NonZeroU32::new(1000).unwrap()).named("api-global")?;
/// let per_user = Rule::per_second(NonZeroU32::new(1).unwrap()).named("api-user")?;
/// let limiter = Limiter::in_memory();
///
/// let first = limiter.check_all(&[(&global, "api"), (&per_user, "alice")]).await?;
/// assert!(first.allowed);
/// let second = limiter.check_all(&[(&global, "api"), (&per_user, "alice")]).await?;
/// assert!(!second.allowed);
/// assert_eq!(second.denied_by(), Some(1));
/// // The global rule was not charged for the denied request.
/// assert_eq!(second.decisions[0].remaining, 999);
/// # Ok::<(), slidegate::Error>(()) }).unwrap();
/// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MultiDecision {
    /// Whether every dimension admitted (and so all were charged).
    pub allowed: bool,
    /// One decision per dimension, in the order given.
    pub decisions: Vec<Decision>,
}

impl MultiDecision {
    /// Builds the answer from per-dimension decisions: allowed iff all are.
    pub fn from_decisions(decisions: Vec<Decision>) -> MultiDecision {
        MultiDecision { allowed: decisions.iter().all(|d| d.allowed), decisions }
    }

    /// Index of the first dimension that denied, if any.
    pub fn denied_by(&self) -> Option<usize> {
        self.decisions.iter().position(|d| !d.allowed)
    }

    /// How long until the request could be admitted if nothing else arrives:
    /// the largest `retry_after` of the denying dimensions (zero when allowed).
    pub fn retry_after(&self) -> Duration {
        self.decisions.iter().filter(|d| !d.allowed).map(|d| d.retry_after).max().unwrap_or_default()
    }

    /// The decision that binds the caller most: the denying one with the
    /// longest `retry_after`, or, when allowed, the one with the least
    /// remaining (what `RateLimit` headers should show).
    pub fn binding(&self) -> Option<&Decision> {
        if self.allowed {
            self.decisions.iter().min_by_key(|d| d.remaining)
        } else {
            self.decisions.iter().filter(|d| !d.allowed).max_by_key(|d| d.retry_after)
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::State;

    #[test]
    fn summarises() {
        let ok = Decision::allowed(10, 3, Duration::ZERO);
        let short = Decision::limited(10, 0, Duration::from_secs(2), Duration::from_secs(9));
        let long = Decision::limited(10, 0, Duration::from_secs(5), Duration::from_secs(9));
        let m = MultiDecision::from_decisions(vec![ok, short, long]);
        assert!(!m.allowed);
        assert_eq!(m.denied_by(), Some(1));
        assert_eq!(m.retry_after(), Duration::from_secs(5));
        assert_eq!(m.binding().unwrap().retry_after, Duration::from_secs(5));
        let all = MultiDecision::from_decisions(vec![ok, Decision::allowed(10, 1, Duration::ZERO)]);
        assert!(
            all.allowed
                && all.binding().unwrap().remaining == 1
                && all.binding().unwrap().state == State::Allowed
        );
    }
}
