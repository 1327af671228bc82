//! Reading a file past its broken list items: a shape error inside one
//! descriptor (or route) — an unknown field, a list for a number — is
//! reported, that item is set aside, and the rest of the file is read
//! again, so one `--check` reports every broken item, each at its
//! position, not only the first. A YAML syntax error stops the reading
//! there: past it, the parser's view of the text cannot be trusted.

use std::ops::Range;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::yaml_error;
use crate::config::error::ConfigError;

/// The most items set aside in one file before the rest goes unread.
const MAX_SET_ASIDE: usize = 100;

/// The most bytes parsed for one file's rounds after the first: a 4 MiB
/// file is read again at most 16 times.
const MAX_PARSED_BYTES: usize = 64 << 20;

/// Parses `text` as `T`, adding each error to `errors`. A shape error
/// inside an item of a block list that is the value of one of `list_keys`
/// sets that item aside (its lines are blanked, so every position holds) and the
/// text is parsed again. `None` after a syntax error, an error anywhere
/// else, or when
/// the file has more broken items than it may be read again for
/// ([`MAX_SET_ASIDE`], [`MAX_PARSED_BYTES`]): nothing of the file is
/// built. With the value, how many items were set aside.
pub(in crate::config) fn parse<T: DeserializeOwned>(
    file: &Path,
    text: &str,
    options: impl Fn() -> serde_saphyr::Options,
    list_keys: &[&str],
    errors: &mut Vec<ConfigError>,
) -> Option<(T, usize)> {
    let mut lines: Vec<&str> = text.lines().collect();
    let mut current = std::borrow::Cow::Borrowed(text);
    let rounds = MAX_SET_ASIDE.min(MAX_PARSED_BYTES / text.len().max(1));
    for set_aside in 0..=rounds {
        let error = match serde_saphyr::from_str_with_options::<T>(&current, options()) {
            Ok(parsed) => return Some((parsed, set_aside)),
            Err(error) => error,
        };
        errors.push(yaml_error(file, &error));
        if is_syntax(&error) {
            return None;
        }
        let line = error.location().and_then(|l| usize::try_from(l.line()).ok())?.checked_sub(1)?;
        let item = enclosing_item(&lines, line, list_keys)?;
        if set_aside == rounds {
            errors.push(ConfigError::at(
                file,
                // Below the last problem read, where reading stopped.
                (u32::try_from(line + 2).unwrap_or(u32::MAX), 1),
                format!("{} items could not be read: the rest of the file is not checked", set_aside + 1),
            ));
            return None;
        }
        for blanked in &mut lines[item] {
            *blanked = "";
        }
        let mut next = lines.join("\n");
        next.push('\n');
        current = std::borrow::Cow::Owned(next);
    }
    None
}

/// Whether `error` is the YAML parser's own (the text is no YAML there),
/// not a value of the wrong shape.
fn is_syntax(error: &serde_saphyr::Error) -> bool {
    matches!(
        error.without_snippet(),
        serde_saphyr::Error::ExternalMessage { .. } | serde_saphyr::Error::Eof { .. }
    )
}

/// The lines (0-based) of the innermost item holding line `line` of a
/// block list that is the value of one of `list_keys`: from its `- ` to
/// the line before the next one indented no deeper than its dash.
fn enclosing_item(lines: &[&str], line: usize, list_keys: &[&str]) -> Option<Range<usize>> {
    let mut limit = usize::MAX;
    for start in (0..=line.min(lines.len().checked_sub(1)?)).rev() {
        let Some(dash) = dash_column(lines[start]) else { continue };
        if dash >= limit {
            continue;
        }
        let end = (start + 1..lines.len())
            .find(|&i| indent(lines[i]).is_some_and(|at| at <= dash))
            .unwrap_or(lines.len());
        if line >= end {
            continue;
        }
        if list_keys.iter().any(|key| parent_key(lines, start, dash) == Some(*key)) {
            return Some(start..end);
        }
        // An item of another list (a limit of `rate_limits`): look for the
        // item holding it.
        limit = dash;
    }
    None
}

/// The column of a line's list dash (`- …` or a lone `-`), if it is an item.
fn dash_column(line: &str) -> Option<usize> {
    let at = indent(line)?;
    let rest = &line[at..];
    (rest == "-" || rest.starts_with("- ")).then_some(at)
}

/// A line's indentation, `None` for a blank or comment line.
fn indent(line: &str) -> Option<usize> {
    let trimmed = line.trim_start_matches(' ');
    (!trimmed.is_empty() && !trimmed.starts_with('#')).then(|| line.len() - trimmed.len())
}

/// The key whose value is the list the item at line `start` (dash at
/// `dash`) belongs to: the first line above it that is neither deeper nor
/// a sibling item.
fn parent_key<'a>(lines: &[&'a str], start: usize, dash: usize) -> Option<&'a str> {
    let line = (0..start).rev().map(|i| lines[i]).find(|line| match indent(line) {
        None => false,
        Some(at) if at > dash => false,
        Some(at) => !(at == dash && dash_column(line) == Some(at)),
    })?;
    let text = line.trim_start();
    let text = text.strip_prefix("- ").unwrap_or(text).trim_start();
    let (key, rest) = text.split_once(':')?;
    let rest = rest.trim();
    (rest.is_empty() || rest.starts_with('#')).then_some(key.trim())
}

#[cfg(test)]
mod tests {
    use super::enclosing_item;

    const FILE: &str = "\
domain: d
descriptors:
  - key: a
    rate_limits:
      - {unit: minute, requests_per_unit: 5}
      - {unit: minute, requests_per_unit: x}
    descriptors:
    - key: nested
      rate_limit: {unit: hour}

  # a comment
  - key: b
";

    #[test]
    fn the_item_holding_a_line_is_its_innermost_descriptor() {
        let lines: Vec<&str> = FILE.lines().collect();
        let item = |line| enclosing_item(&lines, line, &["descriptors"]);
        assert_eq!(item(0), None, "the domain is no item");
        assert_eq!(item(1), None);
        assert_eq!(item(2), Some(2..11), "from its dash to the next sibling");
        assert_eq!(item(5), Some(2..11), "a limit of `rate_limits` is its descriptor's");
        assert_eq!(item(8), Some(7..11), "a nested descriptor, dash at its key's column");
        assert_eq!(item(11), Some(11..12), "the last one, to the end");
    }
}
