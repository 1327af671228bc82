//! Text with `{key}` placeholders: the descriptors and headers of
//! `bench --target`, written anew for every request's key. `{key%N}`
//! stands for the key modulo `N`: `rule=r{key%10},user={key}` spreads
//! the keys' identities over ten rules.

use std::fmt::Write as _;

use anyhow::{Context as _, bail};

/// Text with placeholders, split once so writing it is cheap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    /// The literal text before the first placeholder.
    head: String,
    /// Each placeholder — the modulus of `{key%N}`, `None` for the key
    /// itself — and the literal text after it.
    parts: Vec<(Option<u64>, String)>,
}

impl Template {
    /// `text`, with every `{key}` and `{key%N}` a placeholder.
    ///
    /// # Errors
    ///
    /// A `{key%N}` whose `N` is not a whole number above zero.
    pub(crate) fn new(text: &str) -> anyhow::Result<Template> {
        let (mut head, mut parts) = (String::new(), Vec::new());
        let mut rest = text;
        while let Some(at) = rest.find("{key") {
            let literal = match parts.last_mut() {
                Some((_, after)) => after,
                None => &mut head,
            };
            literal.push_str(&rest[..at]);
            let after = &rest[at + 4..];
            let (modulus, tail) = if let Some(tail) = after.strip_prefix('}') {
                (None, tail)
            } else if let Some((modulus, tail)) = after.strip_prefix('%').and_then(|m| m.split_once('}')) {
                let modulus = modulus.parse::<u64>().ok().filter(|&m| m > 0).with_context(|| {
                    format!("`{text}`: in `{{key%{modulus}}}` the modulus must be a whole number above zero")
                })?;
                (Some(modulus), tail)
            } else {
                // Not a placeholder: `{key` taken literally.
                literal.push_str("{key");
                rest = after;
                continue;
            };
            parts.push((modulus, String::new()));
            rest = tail;
        }
        match parts.last_mut() {
            Some((_, after)) => after.push_str(rest),
            None => head.push_str(rest),
        }
        Ok(Template { head, parts })
    }

    /// Writes the text with `key` in every placeholder to `out` (cleared first).
    pub(crate) fn write(&self, key: u64, out: &mut String) {
        out.clear();
        out.push_str(&self.head);
        for (modulus, after) in &self.parts {
            let _ = write!(out, "{}", modulus.map_or(key, |m| key % m));
            out.push_str(after);
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
            Ok((Template::new(key)?, Template::new(value)?))
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
    let template = Template::new(value).with_context(|| format!("--header `{text}`"))?;
    let mut probe = String::new();
    template.write(0, &mut probe);
    http::HeaderValue::from_str(&probe).with_context(|| format!("--header `{text}`: not a valid value"))?;
    Ok((name, template))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_keys_into_placeholders() {
        let mut out = String::from("left over");
        let write = |text: &str, key: u64, out: &mut String| Template::new(text).unwrap().write(key, out);
        write("u{key}-{key}", 42, &mut out);
        assert_eq!(out, "u42-42");
        write("{key}", 7, &mut out);
        assert_eq!(out, "7");
        write("plain", 7, &mut out);
        assert_eq!(out, "plain");
        write("r{key%10},u{key}", 12345, &mut out);
        assert_eq!(out, "r5,u12345");
        write("{key%1}{key", 9, &mut out);
        assert_eq!(out, "0{key");
        write("{keys}{key%x", 9, &mut out);
        assert_eq!(out, "{keys}{key%x");
        for bad in ["{key%0}", "{key%-1}", "{key%ten}", "{key%}"] {
            assert!(Template::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_descriptors_and_headers() {
        let entries = parse_descriptor("path=/api,user=u{key}").unwrap();
        assert_eq!(entries.len(), 2);
        let mut out = String::new();
        entries[1].1.write(3, &mut out);
        assert_eq!(out, "u3");
        // A value may hold `=`.
        assert_eq!(parse_descriptor("q=a=b").unwrap()[0].1, Template::new("a=b").unwrap());
        for bad in ["", "user", "=x", "a=1,,b=2", "rule=r{key%0}"] {
            assert!(parse_descriptor(bad).is_err(), "{bad}");
        }
        let (name, value) = parse_header("X-User: {key}").unwrap();
        assert_eq!((name.as_str(), value), ("x-user", Template::new("{key}").unwrap()));
        for bad in ["no colon", "bad name: v", ": v", "x: a\u{7f}b", "x: {key%0}"] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
    }
}
