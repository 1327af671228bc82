//! `#[rate_limit]`: guard an `async fn` with a slidegate limiter — the
//! counterpart of a rate-limit annotation on a service method.
//!
//! Use it through the core crate with its `macros` feature
//! (`slidegate = { version = "…", features = ["macros"] }`), as
//! `slidegate::rate_limit`. Before the body runs, the function checks its
//! limiter; over the limit it returns `Err(E::from(RateLimited))` at once,
//! so its error type `E` needs `From<slidegate::RateLimited>`, and nothing
//! else.
//!
//! ```
//! use std::sync::LazyLock;
//! use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};
//!
//! static LIMITER: LazyLock<Limiter<MemoryStore>> = LazyLock::new(Limiter::in_memory);
//!
//! #[derive(Debug)]
//! enum ApiError {
//!     RateLimited(RateLimited),
//! }
//!
//! impl From<RateLimited> for ApiError {
//!     fn from(limited: RateLimited) -> Self {
//!         ApiError::RateLimited(limited)
//!     }
//! }
//!
//! /// Two profile reads per user per minute.
//! #[rate_limit(limiter = LIMITER, limit = 2, window = "1m", key = user_id, message = "slow down")]
//! async fn profile(user_id: &str) -> Result<String, ApiError> {
//!     Ok(format!("profile of {user_id}"))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! assert!(profile("alice").await.is_ok());
//! assert!(profile("alice").await.is_ok());
//! let Err(ApiError::RateLimited(limited)) = profile("alice").await else { panic!("not limited") };
//! assert_eq!(limited.to_string(), "slow down");
//! assert!(limited.retry_after().is_some_and(|wait| wait.as_secs() <= 60));
//! assert!(profile("bob").await.is_ok(), "every user has their own quota");
//! # });
//! ```
//!
//! # Arguments
//!
//! | argument | value |
//! |---|---|
//! | `limiter = <expr>` | required: a `Limiter<S>`, `&Limiter<S>`, or anything that derefs to one — a `static` `LazyLock`, `self.limiter`, a parameter |
//! | `key = <expr>` | required: who is limited, over the function's parameters — `key = user_id`, `key = format!("{}:{}", tenant, user)`; any [`RateLimitKey`](https://docs.rs/slidegate/latest/slidegate/trait.RateLimitKey.html): strings (borrowed, no allocation), integers, IP addresses |
//! | `rule = <expr>` | a `Rule` or `&Rule` (or a `LazyLock<Rule>`…), e.g. a named rule shared with other code |
//! | `limit = <int>, window = "<duration>"` | or an inline rule: `window` is `500ms`, `10s`, `1m`, `1h`, `1d` or a sum such as `1m30s` |
//! | `algorithm = "…"` | inline rules: `"log"` (default, exact sliding log), `"counter"` (sliding counter, 10 buckets), `"fixed"`, `"gcra"` |
//! | `name = "…"` | inline rules: the name keying the rule's state; by default `<module path>.<function>` with `::` written `.` (`<module path>.<Type>.<method>` for a method taking `self`, so methods of one name on two types keep apart) |
//! | `cost = <expr>` | a `u32` weight; 1 by default |
//! | `message = "…"` | the text of a denial, instead of `rate limited: retry after 3s` |
//!
//! Every argument is checked at compile time as far as syntax allows: a zero
//! limit, a malformed or zero window, an unknown algorithm, a missing key or
//! limiter, both `rule` and `limit`, an unknown or repeated argument, a
//! function that is not `async` or does not return a `Result` are errors
//! at the argument in question.
//!
//! # What the generated code does
//!
//! * An inline rule is built once per function, on its first call, and kept
//!   in a `static`: a call allocates nothing beyond what the key needs.
//!   Its default name gives each function its own state, stable across
//!   restarts and shared by every instance checking the same store; moving or
//!   renaming the function starts from an empty quota (set `name` to avoid).
//! * The arguments are borrowed only for the check, so the body can still
//!   move them.
//! * Denied: the function returns `Err(RateLimited)` converted with `From`,
//!   carrying the [`Decision`](https://docs.rs/slidegate/latest/slidegate/struct.Decision.html)
//!   (`retry_after`, `remaining`…) and the `message`.
//! * The limiter returned an `Err` (invalid input: an empty key, a cost of 0
//!   or above the limit): the function returns a `RateLimited` whose
//!   `error()` is that error. Store failures never get here: the limiter's
//!   failure policy answers them with a decision.
//!
//! Generated code names `::slidegate::…`, so the core crate must be a
//! dependency under its own name.
//!
//! # Methods
//!
//! On a method, the limiter can be a field:
//!
//! ```
//! use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};
//!
//! struct Orders {
//!     limiter: Limiter<MemoryStore>,
//! }
//!
//! impl Orders {
//!     #[rate_limit(limiter = self.limiter, limit = 10, window = "1s", key = customer, cost = items)]
//!     async fn place(&self, customer: u64, items: u32) -> Result<u32, RateLimited> {
//!         Ok(items)
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let orders = Orders { limiter: Limiter::in_memory() };
//! assert_eq!(orders.place(7, 8).await.ok(), Some(8));
//! let limited = orders.place(7, 3).await.unwrap_err();
//! assert_eq!(limited.decision().map(|d| d.remaining), Some(2));
//! # });
//! ```

mod args;
mod errors;
mod expand;
mod inline_rule;
mod window;

use proc_macro::TokenStream;

/// Checks a limiter before an `async fn` runs; over the limit, the function
/// returns `Err(RateLimited)` through its own error type. See the
/// [crate documentation](crate) for the arguments.
///
/// ```
/// # use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};
/// # static LIMITER: std::sync::LazyLock<Limiter<MemoryStore>> = std::sync::LazyLock::new(Limiter::in_memory);
/// #[rate_limit(limiter = LIMITER, limit = 5, window = "10s", key = ip)]
/// async fn login(ip: std::net::IpAddr) -> Result<(), RateLimited> {
///     Ok(())
/// }
/// ```
#[proc_macro_attribute]
pub fn rate_limit(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match expand::rate_limit(attr.into(), item.clone()) {
        Ok(expanded) => expanded.into(),
        Err(errors) => {
            // The function as written still follows the errors, so its
            // callers do not add "cannot find function" to them, nor its
            // unused parameters warnings.
            let mut out = errors.to_compile_error();
            out.extend(quote::quote!(#[allow(unused)]));
            out.extend(item);
            out.into()
        }
    }
}
