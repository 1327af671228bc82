//! Printing Redis URLs safely.

/// `url` with any password in its user info replaced by `***`, so URLs can
/// be printed in messages, summaries and `Debug` output.
///
/// ```
/// assert_eq!(slidegate_redis::redact_url("redis://app:s3cret@db:6380/0"), "redis://app:***@db:6380/0");
/// assert_eq!(slidegate_redis::redact_url("redis://db:6380/"), "redis://db:6380/");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_owned() };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        // `redis://secret@host`: a lone user info is the password.
        None => format!("{scheme}://***{}", &rest[at..]),
    }
}
