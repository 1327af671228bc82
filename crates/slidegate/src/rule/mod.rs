//! Rules: a limit per window, and the algorithm that enforces it.

use std::fmt;
use std::num::{NonZeroU16, NonZeroU32};
use std::time::Duration;

use crate::error::Error;
use crate::limits::{DEFAULT_BUCKETS, GCRA_MAX_PRODUCT, MAX_BUCKETS, MAX_NAME_LEN, MAX_WINDOW};
use crate::penalty::Penalty;

mod derived;

use derived::Derived;

/// A rule's state prefix as its keys in the memory store hold it: shared,
/// and one word wide (an `Arc<str>` would take two in every key).
pub(crate) type StatePrefix = std::sync::Arc<Box<str>>;

/// How a rule counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// Exact: a request is admitted iff the costs admitted in the last
    /// window plus its own cost stay within the limit. Memory O(limit).
    SlidingLog,
    /// The window is cut into `buckets` buckets; a bucket counts while any
    /// part of it lies inside the window. Never admits more than the limit in
    /// any true window, may admit slightly less. Memory O(buckets).
    SlidingCounter {
        /// Number of buckets per window (1..=[`MAX_BUCKETS`], at most one per millisecond).
        buckets: NonZeroU16,
    },
    /// Classic fixed windows aligned to multiples of the window length.
    /// Allows up to twice the limit across a window boundary; offered for
    /// migration and comparison.
    FixedWindow,
    /// Generic cell rate algorithm (a token bucket of `limit` tokens refilled
    /// evenly over the window).
    Gcra,
}

impl Algorithm {
    /// A sliding counter with the default bucket count (10).
    pub const SLIDING_COUNTER: Algorithm = Algorithm::SlidingCounter { buckets: DEFAULT_BUCKETS };

    /// A short, stable name: `log`, `counter`, `fixed`, `gcra`.
    ///
    /// Stores use it to keep the state of different algorithms apart.
    pub fn short_name(&self) -> &'static str {
        match self {
            Algorithm::SlidingLog => "log",
            Algorithm::SlidingCounter { .. } => "counter",
            Algorithm::FixedWindow => "fixed",
            Algorithm::Gcra => "gcra",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::SlidingLog => f.write_str("sliding log"),
            Algorithm::SlidingCounter { buckets } => write!(f, "sliding counter ({buckets} buckets)"),
            Algorithm::FixedWindow => f.write_str("fixed window"),
            Algorithm::Gcra => f.write_str("GCRA"),
        }
    }
}

/// A rate limit: at most `limit` units of cost per `window`, enforced by an
/// [`Algorithm`]. A `Rule` cannot hold invalid values.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use slidegate::{Algorithm, Rule};
///
/// // 100 per minute, exact sliding log (the default algorithm).
/// let rule = Rule::per_minute(NonZeroU32::new(100).unwrap());
/// assert_eq!(rule.limit(), 100);
///
/// // The general constructor says what is wrong.
/// let err = Rule::new(0, Duration::from_secs(1)).unwrap_err();
/// assert!(err.to_string().contains("limit must be at least 1"));
///
/// // Refinements are fallible when they can be invalid.
/// let counter = Rule::new(50, Duration::from_secs(10))?
///     .with_algorithm(Algorithm::SLIDING_COUNTER)?
///     .named("login")?;
/// assert_eq!(counter.name(), Some("login"));
/// # Ok::<(), slidegate::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    limit: NonZeroU32,
    window_ms: u64,
    algorithm: Algorithm,
    /// Names the state in the store. Without a name, the state is keyed by
    /// the rule's parameters, so changing the limit starts from empty; with
    /// one, the state survives a change of limit or window.
    name: Option<Box<str>>,
    /// Escalation against repeat offenders, if any.
    penalty: Option<Penalty>,
    /// Decided and counted, but its denials are overruled ([`Rule::in_shadow`]).
    shadow: bool,
    /// Admits while something remains and records every cost ([`Rule::budget`]).
    budget: bool,
    /// The limit an unnamed rule's state is keyed by: the configured limit,
    /// also when adaptive limits enforce another one ([`Rule::scaled`]), so
    /// the scaled rule keeps counting in the configured rule's state.
    state_limit: NonZeroU32,
    /// Strings derived from the fields above, built once: every check
    /// builds a key from them and labels a metric with the state name.
    derived: Derived,
}

const fn ms(d: Duration) -> u64 {
    d.as_secs() * 1000 + d.subsec_millis() as u64
}

impl Rule {
    /// An unnamed sliding-log rule without penalty.
    const fn sliding_log(limit: NonZeroU32, window_ms: u64) -> Rule {
        Rule {
            limit,
            window_ms,
            algorithm: Algorithm::SlidingLog,
            name: None,
            penalty: None,
            shadow: false,
            budget: false,
            state_limit: limit,
            derived: Derived::empty(),
        }
    }

    /// `limit` per second, sliding log.
    pub const fn per_second(limit: NonZeroU32) -> Rule {
        Rule::sliding_log(limit, 1000)
    }

    /// `limit` per minute, sliding log.
    pub const fn per_minute(limit: NonZeroU32) -> Rule {
        Rule::sliding_log(limit, 60_000)
    }

    /// `limit` per hour, sliding log.
    pub const fn per_hour(limit: NonZeroU32) -> Rule {
        Rule::sliding_log(limit, 3_600_000)
    }

    /// `limit` per day, sliding log.
    pub const fn per_day(limit: NonZeroU32) -> Rule {
        Rule::sliding_log(limit, 86_400_000)
    }

    /// `limit` per `window`, sliding log.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidRule`](crate::ErrorKind::InvalidRule) when `limit`
    /// is 0, `window` is shorter than 1 ms, longer than [`MAX_WINDOW`], or not
    /// a whole number of milliseconds.
    pub fn new(limit: u32, window: Duration) -> Result<Rule, Error> {
        let limit =
            NonZeroU32::new(limit).ok_or_else(|| Error::invalid_rule("limit must be at least 1, got 0"))?;
        if window < Duration::from_millis(1) {
            return Err(Error::invalid_rule(format!("window must be at least 1ms, got {window:?}")));
        }
        if window > MAX_WINDOW {
            return Err(Error::invalid_rule(format!(
                "window must be at most {} days, got {window:?}",
                MAX_WINDOW.as_secs() / 86_400
            )));
        }
        if !window.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid_rule(format!(
                "window must be a whole number of milliseconds, got {window:?}"
            )));
        }
        Ok(Rule::sliding_log(limit, ms(window)))
    }

    /// The same rule enforced by another algorithm.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidRule`](crate::ErrorKind::InvalidRule) when a
    /// sliding counter has more than [`MAX_BUCKETS`] buckets or more buckets
    /// than the window has milliseconds, or when GCRA's `limit × window (ms)`
    /// reaches [`GCRA_MAX_PRODUCT`].
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Result<Rule, Error> {
        match algorithm {
            Algorithm::SlidingCounter { buckets } => {
                if buckets.get() > MAX_BUCKETS {
                    return Err(Error::invalid_rule(format!(
                        "a sliding counter has at most {MAX_BUCKETS} buckets, got {buckets}"
                    )));
                }
                if u64::from(buckets.get()) > self.window_ms {
                    return Err(Error::invalid_rule(format!(
                        "{buckets} buckets do not fit a {}ms window (at most one bucket per millisecond)",
                        self.window_ms
                    )));
                }
            }
            Algorithm::Gcra => {
                if u64::from(self.limit.get()).saturating_mul(self.window_ms) >= GCRA_MAX_PRODUCT {
                    return Err(Error::invalid_rule(format!(
                        "GCRA needs limit × window(ms) < 2^53, got {} × {}",
                        self.limit, self.window_ms
                    )));
                }
            }
            Algorithm::SlidingLog | Algorithm::FixedWindow => {}
        }
        self.algorithm = algorithm;
        self.derived = Derived::empty();
        Ok(self)
    }

    /// The same rule under a stable name, which keys its state in the store.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidRule`](crate::ErrorKind::InvalidRule) unless the
    /// name is 1 to [`MAX_NAME_LEN`] characters of `A-Z a-z 0-9 _ - .`.
    pub fn named(mut self, name: &str) -> Result<Rule, Error> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok_char) {
            return Err(Error::invalid_rule(format!(
                "rule name must be 1..={MAX_NAME_LEN} characters of A-Z a-z 0-9 _ - ., got {:?}",
                name.chars().take(80).collect::<String>()
            )));
        }
        self.name = Some(name.into());
        self.derived = Derived::empty();
        Ok(self)
    }

    /// The same rule with penalty escalation: warnings, then bans for
    /// identities that keep hitting it (see [`Penalty`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidRule`](crate::ErrorKind::InvalidRule) when the
    /// warning threshold is not below the ban threshold.
    pub fn with_penalty(mut self, penalty: Penalty) -> Result<Rule, Error> {
        if let (Some(warn), Some(ban)) = (penalty.warn_threshold(), penalty.ban_threshold())
            && warn >= ban
        {
            return Err(Error::invalid_rule(format!(
                "warn_after ({warn}) must be below ban_after ({ban}): a ban would come before the warning"
            )));
        }
        self.penalty = Some(penalty);
        Ok(self)
    }

    /// The same rule in shadow mode (or out of it): every check is decided
    /// and counted as usual, but a denial is overruled — the request is
    /// admitted, its [`Decision::source`](crate::Decision::source) is
    /// [`Source::Shadow`](crate::Source::Shadow), and nothing is charged to
    /// this rule. A multi-dimension check whose only denials are shadow
    /// rules' decides its other dimensions again without them, so they are
    /// charged as if the shadow rules were absent. For trying a limit on
    /// live traffic before enforcing it. The rule's state is the same in
    /// and out of shadow mode.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use slidegate::{Limiter, Rule, Source};
    ///
    /// # tokio_test_shim::block_on(async {
    /// let trial = Rule::per_minute(NonZeroU32::new(1).unwrap()).in_shadow(true);
    /// let limiter = Limiter::in_memory();
    /// assert!(limiter.check(&trial, "alice").await?.allowed);
    /// let second = limiter.check(&trial, "alice").await?;
    /// assert!(second.allowed && second.source == Source::Shadow);
    /// # Ok::<(), slidegate::Error>(()) }).unwrap();
    /// # mod tokio_test_shim { pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #   tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f) } }
    /// ```
    #[must_use]
    pub fn in_shadow(mut self, shadow: bool) -> Rule {
        self.shadow = shadow;
        self
    }

    /// Whether the rule is in shadow mode ([`Rule::in_shadow`]).
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The same rule as a **budget** (tokens, bytes, money): a check
    /// admits while the budget is not exhausted — while anything at all
    /// remains — and records its whole cost, whatever remains, denied or
    /// not: the identity may go into debt
    /// ([`Decision::debt`](crate::Decision::debt)) and later checks are
    /// denied until the debt has left the window (see
    /// [`Limiter::charge`](crate::Limiter::charge)). Any cost is taken,
    /// also 0 (is anything left?) and more than the limit. Ordinary rules
    /// keep "a denied request costs nothing". The state is the same rule's.
    #[must_use]
    pub fn budget(mut self) -> Rule {
        self.budget = true;
        self
    }

    /// Whether the rule is a budget ([`Rule::budget`]).
    pub fn is_budget(&self) -> bool {
        self.budget
    }

    /// The penalty given with [`Rule::with_penalty`], if any.
    pub fn penalty(&self) -> Option<&Penalty> {
        self.penalty.as_ref()
    }

    /// The most cost admitted per window.
    pub fn limit(&self) -> u32 {
        self.limit.get()
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The window length in milliseconds.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// The algorithm enforcing this rule.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The name given with [`Rule::named`], if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The name under which stores keep this rule's state: the rule's name,
    /// or, for an unnamed rule, its parameters (`<limit>/<window ms>ms`, e.g.
    /// `100/60000ms`, with the configured limit even while adaptive limits
    /// enforce another). A chosen name holds only `A-Z a-z 0-9 _ - .`, so it
    /// never equals a derived one: a rule named `100-60000` does not share
    /// the unnamed 100-per-minute rule's state.
    pub fn state_name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&self.derived().state_name)
    }

    /// [`Rule::state_name`], shared: built once per rule, then cloned
    /// without allocating (what metrics label every decision with).
    /// The keys of the rule's metrics (built once per rule, shared by its clones).
    pub(crate) fn metric_keys(&self) -> &crate::telemetry::keys::RuleKeys {
        &self.derived().metric_keys
    }

    pub(crate) fn state_label(&self) -> std::sync::Arc<str> {
        self.derived().state_name.clone()
    }

    /// The same rule — the same state in every store — enforcing `limit`
    /// instead: what [adaptive limits](crate::adaptive) check with. The state
    /// name stays the configured rule's, also for an unnamed rule, so
    /// charges made under either limit count against both.
    ///
    /// For [`Algorithm::Gcra`] the limit is capped so that `limit × window`
    /// stays below [`GCRA_MAX_PRODUCT`] (a valid rule's own limit always is).
    pub(crate) fn scaled(&self, limit: NonZeroU32) -> Rule {
        let limit = if self.algorithm == Algorithm::Gcra {
            let cap = (GCRA_MAX_PRODUCT - 1) / self.window_ms.max(1);
            let cap = u32::try_from(cap).unwrap_or(u32::MAX);
            NonZeroU32::new(limit.get().min(cap)).unwrap_or(self.limit)
        } else {
            limit
        };
        Rule { limit, ..self.clone() }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = &self.name {
            write!(f, "{name}: ")?;
        }
        write!(f, "{} per {:?} ({})", self.limit, self.window(), self.algorithm)?;
        if let Some(p) = &self.penalty {
            write!(f, " with penalty over {:?}", p.window())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
