//! What `#[rate_limit(key = …)]` accepts as a key.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::Arc;

/// A value that names who is limited: the `key` of `#[rate_limit]`.
///
/// Strings are used as they are (borrowed, no allocation); integers and IP
/// addresses are formatted. Implement it for your own identifier types, or
/// write `key = format!(…)` in the attribute.
///
/// ```
/// use std::borrow::Cow;
/// use slidegate::RateLimitKey;
///
/// struct UserId(u64);
///
/// impl RateLimitKey for UserId {
///     fn rate_limit_key(&self) -> Cow<'_, str> {
///         Cow::Owned(format!("user-{}", self.0))
///     }
/// }
///
/// assert_eq!(UserId(7).rate_limit_key(), "user-7");
/// assert_eq!("alice".rate_limit_key(), "alice");
/// assert_eq!(42_u32.rate_limit_key(), "42");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a rate-limit key",
    label = "not a rate-limit key",
    note = "keys are strings, integers or IP addresses: use `key = format!(...)`, or implement `slidegate::RateLimitKey` for `{Self}`"
)]
pub trait RateLimitKey {
    /// The key, as the string the limiter checks.
    fn rate_limit_key(&self) -> Cow<'_, str>;
}

impl RateLimitKey for str {
    fn rate_limit_key(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl RateLimitKey for String {
    fn rate_limit_key(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl RateLimitKey for Cow<'_, str> {
    fn rate_limit_key(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

/// Forwards to the pointee, so `&str`, `&&String`, `Box<str>`, `Arc<str>`… work.
macro_rules! forward {
    ($($ty:ty),*) => {$(
        impl<T: RateLimitKey + ?Sized> RateLimitKey for $ty {
            fn rate_limit_key(&self) -> Cow<'_, str> {
                (**self).rate_limit_key()
            }
        }
    )*};
}

forward!(&T, &mut T, Box<T>, Rc<T>, Arc<T>);

macro_rules! formatted {
    ($($ty:ty),*) => {$(
        impl RateLimitKey for $ty {
            fn rate_limit_key(&self) -> Cow<'_, str> {
                Cow::Owned(self.to_string())
            }
        }
    )*};
}

formatted!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, char);
formatted!(IpAddr, Ipv4Addr, Ipv6Addr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_borrowed_and_the_rest_formatted() {
        let owned = String::from("bob");
        assert!(matches!(owned.rate_limit_key(), Cow::Borrowed("bob")));
        assert!(matches!((&&owned).rate_limit_key(), Cow::Borrowed("bob")));
        let shared: Arc<str> = Arc::from("carol");
        assert!(matches!(shared.rate_limit_key(), Cow::Borrowed("carol")));
        assert_eq!((-3_i64).rate_limit_key(), "-3");
        assert_eq!(IpAddr::from([10, 0, 0, 1]).rate_limit_key(), "10.0.0.1");
        assert_eq!('x'.rate_limit_key(), "x");
    }
}
