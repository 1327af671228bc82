//! The error a function guarded by `#[rate_limit]` returns when it is not
//! admitted.
//!
//! The core crate otherwise has one error type, [`Error`], and treats being
//! over the limit as a [`Decision`], not an error. [`RateLimited`] is the
//! exception on purpose: a guarded function has no other way to say "not
//! now" than its own error type, so the attribute converts a denial into
//! this value and lets `From<RateLimited>` turn it into the function's error.
//! [`Limiter`](crate::Limiter) itself never returns it.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::{Decision, Error, State};

/// Why a guarded call did not run: it was denied ([`decision`](Self::decision)),
/// or the limiter could not decide ([`error`](Self::error)).
///
/// The function under `#[rate_limit]` returns early with
/// `Err(E::from(rate_limited))`, so `From<RateLimited>` is the only bound its
/// error type `E` needs. Both causes arrive through that one conversion: a
/// limiter `Err` is invalid input — an empty key, a cost of 0 or above the
/// limit — since store failures are answered by the limiter's
/// [`FailurePolicy`](crate::FailurePolicy) as decisions.
///
/// ```
/// use std::time::Duration;
/// use slidegate::{Decision, RateLimited};
///
/// let denial = Decision::limited(10, 0, Duration::from_secs(3), Duration::from_secs(9));
/// let limited = RateLimited::denied(denial);
/// assert_eq!(limited.to_string(), "rate limited: retry after 3s");
/// assert_eq!(limited.retry_after(), Some(Duration::from_secs(3)));
///
/// let limited = limited.with_message("too many login attempts");
/// assert_eq!(limited.to_string(), "too many login attempts");
/// assert!(limited.is_denied());
/// ```
#[derive(Debug)]
pub struct RateLimited {
    cause: Cause,
    /// Shown instead of the default text for a denial: what the caller of
    /// the guarded function should read, chosen where the rule is applied.
    message: Option<Cow<'static, str>>,
}

#[derive(Debug)]
enum Cause {
    Denied(Decision),
    Failed(Error),
}

impl RateLimited {
    /// The limiter denied the call with `decision`.
    ///
    /// Meant for denied decisions (`allowed == false`); the value is kept as
    /// given.
    pub fn denied(decision: Decision) -> Self {
        RateLimited { cause: Cause::Denied(decision), message: None }
    }

    /// The limiter could not decide: it returned `error`.
    pub fn failed(error: Error) -> Self {
        RateLimited { cause: Cause::Failed(error), message: None }
    }

    /// The same value with `message` as its text for a denial.
    ///
    /// A failure keeps describing its [`Error`]: the message is about being
    /// over the limit, which a failure is not.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// The denying decision (limit, remaining, `retry_after`, state…), or
    /// `None` when the limiter could not decide.
    pub fn decision(&self) -> Option<&Decision> {
        match &self.cause {
            Cause::Denied(decision) => Some(decision),
            Cause::Failed(_) => None,
        }
    }

    /// How long until the same call would be admitted, when it was denied.
    pub fn retry_after(&self) -> Option<Duration> {
        self.decision().map(|d| d.retry_after)
    }

    /// The limiter's error, when it could not decide.
    pub fn error(&self) -> Option<&Error> {
        match &self.cause {
            Cause::Denied(_) => None,
            Cause::Failed(error) => Some(error),
        }
    }

    /// The limiter's error, by value, when it could not decide.
    pub fn into_error(self) -> Option<Error> {
        match self.cause {
            Cause::Denied(_) => None,
            Cause::Failed(error) => Some(error),
        }
    }

    /// Whether the call was denied (rather than undecidable).
    pub fn is_denied(&self) -> bool {
        matches!(self.cause, Cause::Denied(_))
    }

    /// The message given with [`with_message`](Self::with_message) (or the
    /// attribute's `message = "…"`), if any.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.cause, &self.message) {
            (Cause::Failed(error), _) => write!(f, "rate limit check failed: {error}"),
            (Cause::Denied(_), Some(message)) => f.write_str(message),
            (Cause::Denied(decision), None) => {
                f.write_str(if decision.state == State::Banned { "banned" } else { "rate limited" })?;
                if !decision.retry_after.is_zero() {
                    // Debug of a Duration is the readable form: 3s, 1.5s, 250ms.
                    write!(f, ": retry after {:?}", decision.retry_after)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for RateLimited {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn denial(retry_ms: u64) -> Decision {
        Decision::limited(5, 0, Duration::from_millis(retry_ms), Duration::from_secs(1))
    }

    #[test]
    fn display_of_a_denial() {
        assert_eq!(RateLimited::denied(denial(1500)).to_string(), "rate limited: retry after 1.5s");
        assert_eq!(RateLimited::denied(denial(0)).to_string(), "rate limited");
        let banned = Decision { state: State::Banned, ..denial(60_000) };
        assert_eq!(RateLimited::denied(banned).to_string(), "banned: retry after 60s");
        let limited = RateLimited::denied(denial(10)).with_message(String::from("slow down"));
        assert_eq!(limited.to_string(), "slow down");
        assert_eq!(limited.message(), Some("slow down"));
    }

    #[test]
    fn a_failure_keeps_its_error() {
        let limited = RateLimited::failed(Error::new(ErrorKind::InvalidKey, "key must not be empty"))
            .with_message("slow down");
        assert!(!limited.is_denied());
        assert_eq!(limited.decision(), None);
        assert_eq!(limited.retry_after(), None);
        assert_eq!(limited.error().map(Error::kind), Some(ErrorKind::InvalidKey));
        assert_eq!(limited.to_string(), "rate limit check failed: invalid key: key must not be empty");
        let source = std::error::Error::source(&limited).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("invalid key: key must not be empty"));
        assert_eq!(limited.into_error().map(|e| e.kind()), Some(ErrorKind::InvalidKey));
    }
}
