//! A request's path in the one form the gateway acts on: routes are
//! matched on it, `key: path` limits count it, and it is what the
//! upstream gets. Spellings an upstream may read as the same path are
//! made one (RFC 3986 §6.2.2): escapes of unreserved characters decoded
//! (`/%61pi` is `/api`), other escapes in upper case (`%2a` is `%2A`),
//! runs of slashes merged (`//api` is `/api`). Spellings upstreams read
//! in different ways are refused, so that no route can be chosen for a
//! path an upstream resolves elsewhere: `.` and `..` segments (however
//! encoded), `;` path parameters (servlet containers drop them, and
//! `/..;/` is `/../` to them), `\` and encoded `/` or `\` (some upstreams
//! decode them into separators), and `%` not starting an escape.

use std::borrow::Cow;

/// Why a path is refused: the body of the 400 answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) &'static str);

const NOT_ABSOLUTE: Refused = Refused("the path must start with `/`\n");
const DOT_SEGMENT: Refused = Refused("the path must not have `.` or `..` segments\n");
const PARAMETERS: Refused =
    Refused("the path must not hold `;` (path parameters): upstreams disagree on what they mean\n");
const SEPARATOR: Refused = Refused(
    "the path must not hold `\\`, `%2F` or `%5C`: upstreams disagree on whether they separate segments\n",
);
const BAD_ESCAPE: Refused = Refused("a `%` in the path must start an escape of two hex digits\n");

/// `path` in the gateway's form: borrowed when it is already in it (the
/// usual case: one look at each byte, nothing copied).
///
/// # Errors
///
/// The reason, when the path is refused (see the module docs).
pub(crate) fn normalize(path: &str) -> Result<Cow<'_, str>, Refused> {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(NOT_ABSOLUTE);
    }
    if in_form(bytes)? {
        if has_dot_segment(bytes) {
            return Err(DOT_SEGMENT);
        }
        return Ok(Cow::Borrowed(path));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                // Two hex digits: `in_form` checked them.
                let byte = escaped(bytes, i).unwrap_or(b'%');
                if unreserved(byte) {
                    out.push(byte);
                } else {
                    out.extend_from_slice(&[b'%', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xF)]]);
                }
                i += 3;
            }
            b'/' if out.last() == Some(&b'/') => i += 1,
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    if has_dot_segment(&out) {
        return Err(DOT_SEGMENT);
    }
    // Only ASCII was decoded or replaced; every other byte is the path's own.
    String::from_utf8(out).map(Cow::Owned).map_err(|_| BAD_ESCAPE)
}

/// Whether `path` is in the gateway's form already (refusing what cannot
/// be put in it): no escape of an unreserved character, none in lower
/// case, no run of slashes.
fn in_form(path: &[u8]) -> Result<bool, Refused> {
    let mut in_form = true;
    let mut previous = 0;
    let mut i = 0;
    while i < path.len() {
        let byte = path[i];
        match byte {
            b'%' => {
                let decoded = escaped(path, i).ok_or(BAD_ESCAPE)?;
                if matches!(decoded, b'/' | b'\\') {
                    return Err(SEPARATOR);
                }
                if unreserved(decoded) || path[i + 1..i + 3].iter().any(u8::is_ascii_lowercase) {
                    in_form = false;
                }
                i += 3;
                previous = b'%';
                continue;
            }
            b';' => return Err(PARAMETERS),
            b'\\' => return Err(SEPARATOR),
            b'/' if previous == b'/' => in_form = false,
            _ => {}
        }
        previous = byte;
        i += 1;
    }
    Ok(in_form)
}

/// The byte the escape at `path[at]` (a `%`) stands for, if it is one.
fn escaped(path: &[u8], at: usize) -> Option<u8> {
    let digit = |at: usize| path.get(at).and_then(|b| char::from(*b).to_digit(16));
    // Two hex digits: below 256.
    u8::try_from(digit(at + 1)? * 16 + digit(at + 2)?).ok()
}

/// RFC 3986 §2.3: what an escape never needs to stand for.
fn unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn has_dot_segment(path: &[u8]) -> bool {
    path.contains(&b'.') && path.split(|b| *b == b'/').any(|segment| segment == b"." || segment == b"..")
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_path_become_one() {
        for (path, form) in [
            ("/", "/"),
            ("/api/x", "/api/x"),
            ("//api/x", "/api/x"),
            ("///api//x/", "/api/x/"),
            ("/%61pi/x", "/api/x"),
            ("/ap%69/x", "/api/x"),
            ("/%41%7a%2D%2e%5F%7E", "/Az-._~"),
            ("/p/%62", "/p/b"),
            ("/p/%2a", "/p/%2A"),
            ("/p/%e2%82%AC", "/p/%E2%82%AC"),
            ("/p/%20x", "/p/%20x"),
            ("/a.b/..x/.well-known", "/a.b/..x/.well-known"),
            ("/100%25", "/100%25"),
            ("/caf\u{e9}", "/caf\u{e9}"),
        ] {
            assert_eq!(normalize(path).as_deref(), Ok(form), "{path}");
        }
        assert!(matches!(normalize("/api/x"), Ok(Cow::Borrowed(_))));
        assert!(matches!(normalize("/a.b/%2A"), Ok(Cow::Borrowed(_))), "already in form: not copied");
    }

    #[test]
    fn spellings_upstreams_disagree_on_are_refused() {
        for (path, why) in [
            ("*", NOT_ABSOLUTE),
            ("", NOT_ABSOLUTE),
            ("api", NOT_ABSOLUTE),
            ("/a/../b", DOT_SEGMENT),
            ("/..", DOT_SEGMENT),
            ("/a/./b", DOT_SEGMENT),
            ("/a/.", DOT_SEGMENT),
            ("/a/%2e%2e/b", DOT_SEGMENT),
            ("/a/%2E./b", DOT_SEGMENT),
            ("/a/.%2e", DOT_SEGMENT),
            ("//..//b", DOT_SEGMENT),
            ("/site/..;/api/x", PARAMETERS),
            ("/api;jsessionid=1/x", PARAMETERS),
            ("/a/..%2fx", SEPARATOR),
            ("/api%2Fx", SEPARATOR),
            ("/a/%5cb", SEPARATOR),
            ("/a\\..\\b", SEPARATOR),
            ("/a\\b", SEPARATOR),
            ("/100%", BAD_ESCAPE),
            ("/a%2", BAD_ESCAPE),
            ("/a%zz", BAD_ESCAPE),
            ("/a%+1", BAD_ESCAPE),
        ] {
            assert_eq!(normalize(path), Err(why), "{path}");
        }
    }

    #[test]
    fn the_form_is_its_own_form() {
        for path in ["//%61//b%2a/", "/x/%7e/%41", "/p/%e2%82%ac//"] {
            let once = normalize(path).unwrap().into_owned();
            assert_eq!(normalize(&once).as_deref(), Ok(once.as_str()), "{path}");
        }
    }
}
