//! The `window = "…"` literal: `500ms`, `10s`, `1m`, `1h`, `1d`, or a sum
//! such as `1m30s`.

/// The longest window, as `slidegate::limits::MAX_WINDOW` (366 days). Repeated here
/// because a proc-macro crate cannot depend on the crate that re-exports it.
pub(crate) const MAX_WINDOW_MS: u64 = 366 * 24 * 3600 * 1000;

const EXAMPLES: &str = r#"e.g. "500ms", "10s", "1m", "1h", "1d" or "1m30s""#;

/// Milliseconds in a window written like `10s`, or what is wrong with it.
pub(crate) fn parse_window(text: &str) -> Result<u64, String> {
    if text.trim().is_empty() {
        return Err(format!("empty window: write a duration, {EXAMPLES}"));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("malformed window {text:?}: expected a number then a unit, {EXAMPLES}"));
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let unit_ms = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(format!("window {text:?} needs a unit after {number}: ms, s, m, h or d")),
            other => {
                return Err(format!(
                    "unknown unit {other:?} in window {text:?}: use ms, s, m, h or d ({EXAMPLES})"
                ));
            }
        };
        let part = number.parse::<u64>().ok().and_then(|n| n.checked_mul(unit_ms));
        total = part.and_then(|p| total.checked_add(p)).ok_or_else(|| too_long(text))?;
        rest = after;
    }
    if total == 0 {
        return Err(format!("window {text:?} is zero: a window must be at least 1ms"));
    }
    if total > MAX_WINDOW_MS {
        return Err(too_long(text));
    }
    Ok(total)
}

fn too_long(text: &str) -> String {
    format!("window {text:?} is too long: at most 366 days (\"366d\")")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_sums() {
        let cases = [
            ("500ms", 500),
            ("10s", 10_000),
            ("1m", 60_000),
            ("1h", 3_600_000),
            ("1d", 86_400_000),
            ("1m30s", 90_000),
            ("366d", MAX_WINDOW_MS),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_window(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let cases = [
            ("", "empty window"),
            ("10", "needs a unit after 10"),
            ("s", "malformed window"),
            ("10 s", "unknown unit \" s\""),
            ("10parsecs", "unknown unit \"parsecs\""),
            ("-1s", "malformed window"),
            ("0s", "is zero"),
            ("0ms0s", "is zero"),
            ("367d", "too long"),
            ("99999999999999999999ms", "too long"),
            ("1.5s", "unknown unit \".\""),
        ];
        for (text, needle) in cases {
            let err = parse_window(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
