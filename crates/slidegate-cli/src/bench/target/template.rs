//! Text with `{key}` placeholders: the descriptors and headers of
//! `bench --target`, written anew for every request's key.

use std::fmt::Write as _;

use anyhow::{Context as _, bail};

/// What stands for the request's key.
pub(crate) const PLACEHOLDER: &str = "{key}";

/// Text with placeholders, split once so writing it is cheap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    /// The literal pieces; the key goes between each two.
    pieces: Vec<String>,
}

impl Template {
    /// `text`, with every `{key}` a placeholder.
    pub(crate) fn new(text: &str) -> Template {
        Template { pieces: text.split(PLACEHOLDER).map(str::to_owned).collect() }
    }

    /// Writes the text with `key` in every placeholder to `out` (cleared first).
    pub(crate) fn write(&self, key: u64, out: &mut String) {
        out.clear();
        for (i, piece) in self.pieces.iter().enumerate() {
            if i > 0 {
                let _ = write!(out, "{key}");
            }
            out.push_str(piece);
        }
    }
}

/// One descriptor entry, key and value each a template.
pub(crate) type EntryTemplate = (Template, Template);

/// Parses `--descriptor key=value[,key=value…]`.
///
/// # Errors
///
/// An empty descriptor, an entry without `=`, or an empty entry key.
pub(crate) fn parse_descriptor(text: &str) -> anyhow::Result<Vec<EntryTemplate>> {
    if text.trim().is_empty() {
        bail!("an empty --descriptor: give `key=value[,key=value…]`");
    }
    text.split(',')
        .map(|entry| {
            let (key, value) = entry
                .split_once('=')
                .with_context(|| format!("--descriptor `{text}`: the entry `{entry}` has no `=`"))?;
            if key.is_empty() {
                bail!("--descriptor `{text}`: the entry `{entry}` has an empty key");
            }
            Ok((Template::new(key), Template::new(value)))
        })
        .collect()
}

/// Parses `--header 'name: value'` into a valid header name and a value template.
///
/// # Errors
///
/// No `:`, or a name HTTP does not allow.
pub(crate) fn parse_header(text: &str) -> anyhow::Result<(http::HeaderName, Template)> {
    let (name, value) =
        text.split_once(':').with_context(|| format!("--header `{text}` is not `name: value`"))?;
    let name = http::HeaderName::from_bytes(name.trim().as_bytes())
        .with_context(|| format!("--header `{text}`: `{}` is not a header name", name.trim()))?;
    let value = value.trim();
    // The value with a key in it must still be a valid header value.
    let mut probe = String::new();
    Template::new(value).write(0, &mut probe);
    http::HeaderValue::from_str(&probe).with_context(|| format!("--header `{text}`: not a valid value"))?;
    Ok((name, Template::new(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_keys_into_placeholders() {
        let mut out = String::from("left over");
        Template::new("u{key}-{key}").write(42, &mut out);
        assert_eq!(out, "u42-42");
        Template::new("{key}").write(7, &mut out);
        assert_eq!(out, "7");
        Template::new("plain").write(7, &mut out);
        assert_eq!(out, "plain");
    }

    #[test]
    fn parses_descriptors_and_headers() {
        let entries = parse_descriptor("path=/api,user=u{key}").unwrap();
        assert_eq!(entries.len(), 2);
        let mut out = String::new();
        entries[1].1.write(3, &mut out);
        assert_eq!(out, "u3");
        // A value may hold `=`.
        assert_eq!(parse_descriptor("q=a=b").unwrap()[0].1, Template::new("a=b"));
        for bad in ["", "user", "=x", "a=1,,b=2"] {
            assert!(parse_descriptor(bad).is_err(), "{bad}");
        }
        let (name, value) = parse_header("X-User: {key}").unwrap();
        assert_eq!((name.as_str(), value), ("x-user", Template::new("{key}")));
        for bad in ["no colon", "bad name: v", ": v", "x: a\u{7f}b"] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
    }
}
