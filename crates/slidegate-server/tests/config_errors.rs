//! Malformed configurations: each is refused with its message at the right
//! file, line and column, every problem of a file is listed, and hostile
//! input (deep nesting, alias bombs, random bytes, huge files) is an error,
//! never a panic or a hang.

#[path = "support/config.rs"]
mod config_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use config_support::{assert_at, assert_whole, error, errors, refused};
use slidegate_server::config::{Config, ConfigError, ConfigErrors, MAX_FILE_BYTES};

/// The path a test's text is loaded as.
const FILE: &str = "rules/test.yaml";

/// Loads `yaml` as the one rules file, [`FILE`].
fn load(yaml: &str) -> Result<Config, ConfigErrors> {
    Config::from_texts(&[(PathBuf::from(FILE), yaml.to_owned())])
}

/// Every error `texts` (several files) give (they must give one).
#[track_caller]
fn errors_of(texts: &[(PathBuf, String)]) -> Vec<ConfigError> {
    refused(Config::from_texts(texts), &format!("{texts:#?}"))
}

// ---------------------------------------------------------------------------
// Unknown keys, per level.

#[test]
fn misspelled_rate_limit() {
    // envoy ratelimit's test/config/misspelled_key.yaml, in substance.
    let e = error(
        "\
domain: test-domain
descriptors:
  - key: key1
    ratelimit:
      unit: day
      requests_per_unit: 5
",
    );
    assert_at(&e, 4, 5, &["ratelimit"]);
}

#[test]
fn misspelled_requests_per_unit() {
    let e = error(
        "\
domain: test-domain
descriptors:
  - key: key1
    rate_limit:
      unit: day
      requestsperunit: 5
",
    );
    assert_at(&e, 6, 7, &["requestsperunit"]);
}

#[test]
fn unknown_top_level_key() {
    let e = error("domain: d\ndescriptor:\n  - key: k\n");
    assert_at(&e, 2, 1, &["descriptor"]);
}

#[test]
fn known_key_at_the_wrong_level() {
    // `unit` is a rate_limit key: beside `key` it is a mistake (envoy
    // ratelimit's flat allow-list would ignore it).
    let e = error(
        "\
domain: d
descriptors:
  - key: k
    unit: second
    rate_limit:
      unit: second
      requests_per_unit: 1
",
    );
    assert_at(&e, 4, 5, &["unit"]);

    // `domain` inside a descriptor.
    let e = error("domain: d\ndescriptors:\n  - key: k\n    domain: other\n");
    assert_at(&e, 4, 5, &["domain"]);

    // A gateway limit's `key` and `on_missing` inside a rate_limit: named
    // as the gateway's, with what a rules file says instead.
    let limit = |field: &str| {
        format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      {field}\n      unit: second\n      \
             requests_per_unit: 1\n"
        )
    };
    let e = error(&limit("key: x"));
    assert_at(&e, 5, 12, &["`key` is a gateway limit's field", "descriptors' `key` and `value`"]);
    let e = error(&limit("on_missing: skip"));
    assert_at(&e, 5, 19, &["`on_missing` is a gateway limit's field"]);
}

// ---------------------------------------------------------------------------
// Descriptors.

#[test]
fn duplicate_descriptor() {
    // envoy ratelimit's test/config/duplicate_key.yaml, in substance.
    let e = error(
        "\
domain: test-domain
descriptors:
  - key: key1
    value: value1
    rate_limit:
      unit: second
      requests_per_unit: 5
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 6
",
    );
    assert_at(&e, 8, 5, &["duplicate", "key1_value1", "test-domain.key1_value1"]);
}

#[test]
fn duplicate_nested_descriptor_and_key_only_duplicate() {
    let e = error(
        "\
domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
      - key: c
      - key: b
",
    );
    assert_at(&e, 7, 9, &["duplicate", "d.a.b"]);

    // The same wildcard twice.
    let e = error("domain: d\ndescriptors:\n  - key: a\n    value: x*\n  - key: a\n    value: x*\n");
    assert_at(&e, 5, 5, &["duplicate", "a_x*"]);
}

#[test]
fn same_key_different_values_are_not_duplicates() {
    let config = Config::from_texts(&[(
        PathBuf::from(FILE),
        "domain: d\ndescriptors:\n  - key: a\n  - key: a\n    value: x\n  - key: a\n    value: x*\n"
            .to_owned(),
    )]);
    assert!(config.is_ok(), "{:?}", config.err());
}

#[test]
fn descriptor_without_key() {
    let e = error(
        "\
domain: d
descriptors:
  - value: v
    rate_limit:
      unit: second
      requests_per_unit: 1
",
    );
    assert_at(&e, 3, 5, &["key"]);

    let e = error("domain: d\ndescriptors:\n  - key: ''\n    value: v\n");
    assert_at(&e, 3, 5, &["non-empty `key`"]);
}

#[test]
fn share_threshold_without_a_wildcard() {
    let e = error(
        "\
domain: d
descriptors:
  - key: files
    value: files/a.pdf
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
",
    );
    assert_at(&e, 5, 22, &["share_threshold", "files_files/a.pdf"]);
    // `false` without a wildcard is fine (as envoy ratelimit's example 11 writes).
    assert!(
        Config::from_texts(&[(
            PathBuf::from(FILE),
            "domain: d\ndescriptors:\n  - key: f\n    value: v\n    share_threshold: false\n".into()
        )])
        .is_ok()
    );
}

#[test]
fn quota_mode_is_refused() {
    let e = error(
        "\
domain: d
descriptors:
  - key: k
    quota_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
",
    );
    assert_at(&e, 4, 17, &["quota_mode", "not supported"]);
    // `quota_mode: false` is accepted, so envoy ratelimit's files load.
    assert!(
        Config::from_texts(&[(
            PathBuf::from(FILE),
            "domain: d\ndescriptors:\n  - key: k\n    quota_mode: false\n".into()
        )])
        .is_ok()
    );
}

#[test]
fn rate_limit_and_rate_limits_together() {
    let e = error(
        "\
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 1
    rate_limits:
      - unit: minute
        requests_per_unit: 10
",
    );
    assert_eq!(e.line, 8, "at `rate_limits`' list: {e}");
    assert!(e.message.contains("`rate_limit` or `rate_limits`"), "{e}");
}

#[test]
fn more_limits_on_one_descriptor_than_one_decision_takes() {
    let limits: String =
        (1..=65).map(|n| format!("      - {{ unit: minute, requests_per_unit: {n} }}\n")).collect();
    let e = error(&format!("domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n{limits}"));
    assert_at(&e, 5, 7, &["65 limits", "at most 64"]);
}

#[test]
fn descriptors_nested_too_deep() {
    // 17 levels: one more than the 16 allowed.
    let mut yaml = String::from("domain: d\ndescriptors:\n");
    for depth in 0..17 {
        let indent = "  ".repeat(2 * depth);
        yaml.push_str(&format!("{indent}  - key: k{depth}\n{indent}    descriptors:\n"));
    }
    let all = errors(&yaml);
    assert!(all.iter().any(|e| e.message.contains("deeper")), "{all:#?}");
    // 16 levels load.
    let mut yaml = String::from("domain: d\ndescriptors:\n");
    for depth in 0..16 {
        let indent = "  ".repeat(2 * depth);
        yaml.push_str(&format!("{indent}  - key: k{depth}\n"));
        if depth < 15 {
            yaml.push_str(&format!("{indent}    descriptors:\n"));
        }
    }
    assert!(Config::from_texts(&[(PathBuf::from(FILE), yaml)]).is_ok());
}

// ---------------------------------------------------------------------------
// Limits.

#[test]
fn unlimited_with_a_unit() {
    // envoy ratelimit's test/config/unlimited_with_unit.yaml, in substance.
    let e = error(
        "\
domain: test-domain
descriptors:
  - key: foo
    rate_limit:
      unlimited: true
      unit: day
",
    );
    assert_at(&e, 6, 13, &["unlimited", "unit"]);
}

#[test]
fn unknown_unit() {
    // envoy ratelimit's test/config/bad_limit_unit.yaml.
    let e = error(
        "\
domain: test-domain
descriptors:
  - key: key1
    value: value1
    rate_limit:
      unit: foo
      requests_per_unit: 5
",
    );
    assert_at(&e, 6, 13, &["unknown unit `foo`", "second"]);
}

#[test]
fn missing_unit_and_window() {
    let e = error(
        "\
domain: d
descriptors:
  - key: k
    rate_limit:
      requests_per_unit: 5
",
    );
    assert_at(&e, 5, 7, &["`unit`", "`window`"]);
}

#[test]
fn requests_per_unit_negative() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
    );
    assert_at(&e, 6, 26, &["requests_per_unit", "-1"]);
}

#[test]
fn requests_per_unit_missing() {
    let e = error("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n");
    assert_at(&e, 5, 7, &["requests_per_unit"]);
}

#[test]
fn requests_per_unit_above_u32() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967296\n",
    );
    assert_at(&e, 6, 26, &["requests_per_unit", "4294967295", "4294967296"]);
    // u32::MAX itself is fine.
    assert!(
        Config::from_texts(&[(
            PathBuf::from(FILE),
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967295\n"
                .into()
        )])
        .is_ok()
    );
}

#[test]
fn requests_per_unit_beyond_i64() {
    // Too big for any integer type: the same message as just above u32::MAX.
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 99999999999999999999999\n",
    );
    assert_at(&e, 6, 26, &["requests_per_unit", "4294967295"]);
}

#[test]
fn requests_per_unit_not_a_number() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: ten\n",
    );
    // The message names the field, not the Rust type it is read into.
    assert_at(&e, 6, 26, &["requests_per_unit"]);
    assert!(!e.message.contains("i64"), "{e}");
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1.5\n",
    );
    assert_at(&e, 6, 26, &["requests_per_unit"]);
}

#[test]
fn zero_window() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      window: 0s\n      requests_per_unit: 5\n",
    );
    assert_at(&e, 5, 15, &["window", "longer than zero"]);
}

#[test]
fn window_too_long() {
    // At the `window` value, as every other `window` problem.
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n      window: 367d\n",
    );
    assert_at(&e, 6, 15, &["window", "366 days"]);
    // A year (365 days) is fine, and so are 366 days.
    for window in ["unit: year", "window: 366d"] {
        let yaml = format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      {window}\n      requests_per_unit: 5\n"
        );
        assert!(Config::from_texts(&[(PathBuf::from(FILE), yaml)]).is_ok(), "{window}");
    }
    // A window humantime cannot even hold.
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      window: 99999999999999999999y\n      requests_per_unit: 5\n",
    );
    assert_at(&e, 5, 15, &["window: 99999999999999999999y"]);
}

#[test]
fn window_not_a_duration() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      window: soon\n      requests_per_unit: 5\n",
    );
    assert_at(&e, 5, 15, &["window: soon"]);
}

#[test]
fn both_unit_and_window() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      window: 5m\n      requests_per_unit: 5\n",
    );
    assert_at(&e, 6, 15, &["`unit` or `window`"]);
}

#[test]
fn unknown_algorithm() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: leaky\n",
    );
    assert_at(&e, 7, 18, &["unknown algorithm `leaky`", "gcra"]);
}

#[test]
fn replaces_names_no_limit() {
    let e = error(
        "\
domain: d
descriptors:
  - key: a
    rate_limit:
      name: real
      unit: second
      requests_per_unit: 5
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 5
      replaces:
        - name: imaginary
",
    );
    assert_at(&e, 13, 11, &["imaginary", "`d`"]);
}

#[test]
fn replaces_a_limit_of_a_later_descriptor() {
    // Names are checked once the whole domain is read: order does not matter.
    let config = Config::from_texts(&[(
        PathBuf::from(FILE),
        "\
domain: d
descriptors:
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 5
      replaces:
        - name: later
  - key: a
    descriptors:
      - key: c
        rate_limit:
          name: later
          unit: second
          requests_per_unit: 5
"
        .into(),
    )]);
    assert!(config.is_ok(), "{:?}", config.err());
}

#[test]
fn limit_replacing_itself() {
    let e = error(
        "\
domain: d
descriptors:
  - key: a
    rate_limit:
      name: me
      unit: second
      requests_per_unit: 5
      replaces:
        - name: me
",
    );
    assert_at(&e, 9, 11, &["`me`", "itself"]);
}

#[test]
fn replaces_entry_without_name() {
    let e = error(
        "\
domain: d
descriptors:
  - key: a
    rate_limit:
      name: x
      unit: second
      requests_per_unit: 5
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 5
      replaces:
        - name: ''
",
    );
    assert_at(&e, 13, 11, &["`replaces`", "`name`"]);
}

#[test]
fn penalty_ban_after_without_ban_for() {
    let e = error(
        "\
domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 5
      penalty:
        window: 1m
        ban_after: 3
",
    );
    assert_at(&e, 9, 20, &["ban_after", "ban_for"]);
}

#[test]
fn penalty_without_window() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      penalty:\n        warn_after: 1\n",
    );
    assert!(e.message.contains("window"), "{e}");
    assert!((7..=8).contains(&e.line), "{e}");
}

// ---------------------------------------------------------------------------
// Domain and file.

#[test]
fn empty_domain() {
    let e = error("domain: ''\ndescriptors:\n  - key: a\n");
    assert!(e.message.contains("domain"), "{e}");
    assert_eq!(e.line, 1, "{e}");
    // Written further down, the error points there.
    let e = error("# rules\ndescriptors:\n  - key: a\ndomain: ''\n");
    assert!(e.message.contains("domain"), "{e}");
    assert_eq!(e.line, 4, "at the empty `domain`: {e}");
}

#[test]
fn missing_domain() {
    let e = error("descriptors:\n  - key: a\n");
    assert_at(&e, 1, 1, &["`domain`"]);
}

#[test]
fn empty_file() {
    for text in ["", "\n\n", "# only a comment\n"] {
        let e = error(text);
        assert_eq!(e.file, Path::new(FILE));
        assert!(e.message.contains("empty"), "{text:?}: {e}");
        assert!(e.message.contains("domain"), "{text:?}: {e}");
        assert!(e.line <= 1, "{text:?}: {e}");
    }
}

#[test]
fn not_yaml() {
    // envoy ratelimit's test/config/bad_yaml.yaml.
    let e = error("'''");
    assert_eq!(e.file, Path::new(FILE));
    assert_at(&e, 1, 1, &["quote"]);
    let e = error("domain: d\ndescriptors:\n  - key: [unclosed\n");
    assert_eq!(e.line, 3, "{e}");
}

#[test]
fn not_a_mapping() {
    let e = error("- just\n- a list\n");
    assert_eq!(e.line, 1, "{e}");
    let e = error("domain: d\ndescriptors: 5\n");
    assert_eq!(e.line, 2, "{e}");
    let e = error("domain: d\ndescriptors:\n  - a\n");
    assert_eq!(e.line, 3, "{e}");
}

#[test]
fn duplicate_yaml_key() {
    // In the file's terms, not the parser's options.
    let e = error("domain: d\ndescriptors:\n  - key: a\n    key: b\n");
    assert_eq!(e.line, 4, "at the second `key`: {e}");
    assert_eq!(e.message, "`key` is given twice here: write each key once");
    let e = error("domain: d\ndomain: e\n");
    assert_eq!(e.line, 2, "{e}");
    assert_eq!(e.message, "`domain` is given twice here: write each key once");
    assert!(!e.message.contains("DuplicateKeyPolicy"));
}

#[test]
fn several_errors_are_all_listed() {
    let all = errors(
        "\
domain: d
descriptors:
  - key: a
    rate_limit:
      unit: fortnight
      requests_per_unit: 5
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: -3
  - key: c
    rate_limit:
      unit: second
      requests_per_unit: 5
      algorithm: magic
  - key: a
  - key: d
    quota_mode: true
",
    );
    let lines: Vec<u32> = all.iter().map(|e| e.line).collect();
    assert_eq!(all.len(), 5, "{all:#?}");
    for (line, needle) in [(5, "fortnight"), (10, "-3"), (15, "magic"), (16, "duplicate"), (18, "quota_mode")]
    {
        assert!(
            all.iter().any(|e| e.line == line && e.message.contains(needle)),
            "no error at line {line} saying {needle}: {lines:?} {all:#?}"
        );
    }
    // In file order.
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted);
    // Display lists them all.
    let shown = ConfigErrors(all).to_string();
    assert!(shown.starts_with("5 problems"), "{shown}");
    assert_eq!(shown.lines().count(), 6, "{shown}");
}

/// A descriptor the parser cannot read (an unknown field, a list for a
/// number, a word for a boolean) is reported and set aside; the rest of
/// the file is still read and checked, so every problem is listed, in
/// file order, in slidegate's words.
#[test]
fn shape_errors_in_several_descriptors_are_all_listed() {
    let all = errors(
        "\
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minutes, requests_per_unit: 5}
  - key: b
    rate_limt: {unit: minute, requests_per_unit: 5}
  - key: c
    rate_limit: {unit: minute, requests_per_unit: [5]}
  - key: e
    descriptors:
      - key: nested
        shadow_mode: maybe
      - key: fine
        rate_limit: {unit: hour, requests_per_unit: -1}
  - key: f
    rate_limits:
      - {unit: minute, requests_per_unit: 1}
      - {unit: minute, requests_per_unit: 2, colour: red}
  - key: g
    rate_limit: {unit: fortnight, requests_per_unit: 1}
",
    );
    let found: Vec<(u32, &str)> = all.iter().map(|e| (e.line, e.message.as_str())).collect();
    let expected = [
        (4, "unknown unit `minutes`"),
        (6, "unknown field `rate_limt`"),
        (8, "expected one value here (a number or a word), not a list or a map"),
        (12, "expected `true` or `false`"),
        (14, "`requests_per_unit` must be 0 or more, got -1"),
        (18, "unknown field `colour`"),
        (20, "unknown unit `fortnight`"),
    ];
    assert_eq!(found.len(), expected.len(), "{all:#?}");
    for ((line, message), (want_line, needle)) in found.iter().zip(expected) {
        assert_eq!(*line, want_line, "{message}");
        assert!(message.contains(needle), "line {line}: {message:?} lacks {needle:?}");
    }
}

/// A file is read again at most a hundred times: past that many broken
/// descriptors, the rest goes unchecked, and the last problem says so.
#[test]
fn past_a_hundred_broken_descriptors_the_rest_goes_unread_and_says_so() {
    let mut text = String::from("domain: d\ndescriptors:\n");
    for i in 0..150 {
        text.push_str(&format!("  - key: k{i}\n    colour: red\n"));
    }
    let all = errors(&text);
    assert_eq!(all.len(), 102, "101 read, and a word: {:#?}", &all[99..]);
    assert!(all[..101].iter().all(|e| e.message.contains("unknown field `colour`")));
    let last = &all[101];
    assert_eq!(last.line, 205, "below the 101st, on line 204: {last}");
    assert!(
        last.message.contains("101 items could not be read: the rest of the file is not checked"),
        "{last}"
    );
}

/// A YAML syntax error is reported once, and the reading stops there:
/// past it, the parser's view of the text would blame good descriptors.
#[test]
fn a_syntax_error_stops_the_reading_there() {
    let all = errors(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5\n  - key: b\n    \
         rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: c\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    );
    assert_eq!(all.len(), 1, "{all:#?}");
}

/// An error outside any descriptor stops the file there (nothing to set
/// aside), and is still reported at its position.
#[test]
fn a_shape_error_outside_the_descriptors_is_reported_alone() {
    let all = errors("domain: d\ndomian: e\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight}\n");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].line, 2);
    assert!(all[0].message.contains("unknown field `domian`"), "{}", all[0]);
}

#[test]
fn errors_of_several_files_are_all_listed() {
    let all = errors_of(&[
        (
            PathBuf::from("a.yaml"),
            "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: foo, requests_per_unit: 1}\n".into(),
        ),
        (PathBuf::from("b.yaml"), "domain: b\ndescriptors:\n  - key: k\n    ratelimit: {}\n".into()),
        (PathBuf::from("c.yaml"), "domain: c\ndescriptors:\n  - key: k\n".into()),
    ]);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_eq!(all[0].file, Path::new("a.yaml"));
    assert_eq!(all[0].line, 4);
    assert_eq!(all[1].file, Path::new("b.yaml"));
    assert_eq!(all[1].line, 4);
}

#[test]
fn duplicate_domain_from_texts() {
    let all = errors_of(&[
        (PathBuf::from("first.yaml"), "domain: same\ndescriptors:\n  - key: k\n".into()),
        (PathBuf::from("second.yaml"), "\n\ndomain: same\n".into()),
    ]);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].file, Path::new("second.yaml"));
    assert_eq!(all[0].line, 3);
    assert!(all[0].message.contains("same") && all[0].message.contains("first.yaml"), "{}", all[0]);
}

// ---------------------------------------------------------------------------
// Files on disk.

#[test]
fn directory_without_rules_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "domain: d\n").unwrap();
    std::fs::write(dir.path().join(".hidden.yaml"), "domain: d\n").unwrap();
    let ConfigErrors(all) = Config::load(dir.path()).expect_err("no rules files");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_whole(&all[0], dir.path(), &["no rules files"]);
}

#[test]
fn missing_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.yaml");
    let ConfigErrors(all) = Config::load(&path).expect_err("no such file");
    assert_eq!(all.len(), 1);
    assert_whole(&all[0], &path, &["cannot read"]);
}

#[test]
fn non_utf8_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.yaml");
    std::fs::write(&path, b"domain: caf\xe9\ndescriptors: []\n").unwrap();
    let ConfigErrors(all) = Config::load(&path).expect_err("not UTF-8");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_whole(&all[0], &path, &["UTF-8", "11"]);
}

#[test]
fn oversized_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let mut text = b"domain: d\ndescriptors:\n".to_vec();
    text.resize(usize::try_from(MAX_FILE_BYTES).unwrap() + 1, b'#');
    std::fs::write(&path, &text).unwrap();
    let ConfigErrors(all) = Config::load(&path).expect_err("too big");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_whole(&all[0], &path, &[&(MAX_FILE_BYTES + 1).to_string(), &MAX_FILE_BYTES.to_string()]);
}

#[test]
fn a_bad_file_fails_the_whole_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.yaml"), "domain: good\ndescriptors:\n  - key: k\n").unwrap();
    std::fs::write(dir.path().join("bad.yaml"), b"domain: bad\ndescriptors:\n  - key: \xff\n").unwrap();
    std::fs::write(dir.path().join("worse.yml"), "domain: worse\ndescriptors:\n  - kee: k\n").unwrap();
    let ConfigErrors(all) = Config::load(dir.path()).expect_err("bad files");
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all.iter().any(|e| e.file == dir.path().join("bad.yaml") && e.message.contains("UTF-8")));
    assert!(
        all.iter()
            .any(|e| e.file == dir.path().join("worse.yml") && e.line == 3 && e.message.contains("kee"))
    );
}

// ---------------------------------------------------------------------------
// Hostile input.

/// The stack a thread has unless told otherwise: std's default for
/// spawned threads and Tokio's for its workers and blocking threads, where
/// a server reloading its rules parses them.
const THREAD_STACK: usize = 2 << 20;

/// Runs `f` on a thread with [`THREAD_STACK`], in a child process running
/// only the test `name` of this binary: a stack overflow aborts the process,
/// and would otherwise take every other test of the binary with it. Fails
/// if the child fails, aborts or runs longer than `limit`.
fn isolated(name: &str, limit: Duration, f: impl FnOnce() + Send + 'static) {
    const CHILD: &str = "SLIDEGATE_CONFIG_ERRORS_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let thread = std::thread::Builder::new().stack_size(THREAD_STACK).spawn(f).unwrap();
        if thread.join().is_err() {
            panic!("{name}: panicked");
        }
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = child.wait_with_output().unwrap();
    assert!(
        status.success(),
        "{name}: the child process failed ({status}) on a {} KiB stack:\n{}{}",
        THREAD_STACK >> 10,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The child ran the test (a filter matching nothing would pass too).
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"), "{name}: the child ran no test");
}

/// `depth` descriptors, each nested in the one before, in flow style.
fn nested_flow(depth: usize) -> String {
    let mut yaml = String::from("domain: d\ndescriptors: ");
    for i in 0..depth {
        yaml.push_str(&format!("[{{key: k{i}, descriptors: "));
    }
    yaml.push_str("[]");
    for _ in 0..depth {
        yaml.push_str("}]");
    }
    yaml
}

/// `depth` descriptors, each nested in the one before, in block style.
fn nested_block(depth: usize) -> String {
    let mut yaml = String::from("domain: d\ndescriptors:\n");
    for level in 0..depth {
        let indent = " ".repeat(level * 4);
        yaml.push_str(&format!("{indent}  - key: k{level}\n{indent}    descriptors:\n"));
    }
    yaml
}

#[test]
fn deeply_nested_descriptors_are_an_error() {
    isolated("deeply_nested_descriptors_are_an_error", Duration::from_secs(60), || {
        let all = errors(&nested_flow(10_000));
        assert!(all.len() < 10, "one error, not one per level: {all:#?}");
        assert_eq!(all[0].line, 2, "{}", all[0]);
    });
}

#[test]
fn deeply_nested_block_descriptors_are_an_error() {
    isolated("deeply_nested_block_descriptors_are_an_error", Duration::from_secs(60), || {
        let all = errors(&nested_block(2_000));
        assert!(all.len() < 10, "one error, not one per level: {all:#?}");
    });
}

#[test]
fn descriptors_nested_just_past_the_limit_are_an_error() {
    // 17 to 40 levels: past slidegate's 16, within or just past the YAML
    // reader's own nesting budget.
    isolated("descriptors_nested_just_past_the_limit_are_an_error", Duration::from_secs(60), || {
        for depth in [17, 20, 24, 28, 31, 32, 33, 40] {
            let all = errors(&nested_flow(depth));
            assert!(!all.is_empty() && all.len() < 10, "depth {depth}: {all:#?}");
        }
    });
}

#[test]
fn deeply_nested_metadata_is_an_error() {
    // metadata is free-form: its nesting must be bounded too.
    isolated("deeply_nested_metadata_is_an_error", Duration::from_secs(60), || {
        let depth = 10_000;
        let yaml = format!(
            "domain: d\ndescriptors:\n  - key: k\n    metadata: {}1{}\n",
            "{a: ".repeat(depth),
            "}".repeat(depth)
        );
        let all = errors(&yaml);
        assert_eq!(all[0].line, 4, "{}", all[0]);
    });
}

/// A "billion laughs" document: 9 levels of 9 aliases (9^9 leaves if
/// expanded), under `indent`.
fn laughs(indent: &str) -> String {
    let mut yaml = format!("{indent}lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let refs: Vec<String> = (0..9).map(|_| format!("*lol{}", level - 1)).collect();
        yaml.push_str(&format!("{indent}lol{level}: &lol{level} [{}]\n", refs.join(", ")));
    }
    yaml
}

#[test]
fn alias_bomb_is_an_error() {
    isolated("alias_bomb_is_an_error", Duration::from_secs(60), || {
        // At the top level, where unknown keys fail the file anyway.
        let yaml = format!("{}domain: d\ndescriptors:\n  - key: k\n    metadata: *lol9\n", laughs(""));
        assert!(!errors(&yaml).is_empty());
        // Inside metadata, which takes any shape: only the aliases are wrong.
        let yaml = format!("domain: d\ndescriptors:\n  - key: k\n    metadata:\n{}", laughs("      "));
        assert!(!errors(&yaml).is_empty());
        // Expanded where a value is read.
        let yaml = format!(
            "domain: d\ndescriptors:\n  - key: k\n    metadata:\n{}  - key: j\n    value: *lol9\n",
            laughs("      ")
        );
        assert!(!errors(&yaml).is_empty());
    });
}

#[test]
fn a_few_aliases_are_fine() {
    let config = Config::from_texts(&[(
        PathBuf::from(FILE),
        "\
domain: d
descriptors:
  - key: a
    rate_limit: &limit
      unit: second
      requests_per_unit: 5
  - key: b
    rate_limit: *limit
"
        .into(),
    )]);
    assert!(config.is_ok(), "{:?}", config.err());
}

/// A deterministic byte stream (xorshift64*).
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn random_bytes_are_an_error() {
    isolated("random_bytes_are_an_error", Duration::from_secs(120), || {
        let bytes = random_bytes(1 << 20, 0x5EED_1234_ABCD_0001);
        // From disk: not UTF-8.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("random.yaml");
        std::fs::write(&path, &bytes).unwrap();
        let ConfigErrors(all) = Config::load(&path).expect_err("random bytes");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].file, path);
        assert!(all[0].message.contains("UTF-8"), "{}", all[0]);

        // As text (lossy), through the YAML reader.
        for seed in [1u64, 2, 3] {
            let text = String::from_utf8_lossy(&random_bytes(1 << 20, seed)).into_owned();
            assert!(!errors(&text).is_empty());
        }
        // Random YAML-ish ASCII: lines, colons, dashes, anchors, brackets.
        for seed in [4u64, 5, 6] {
            let text: String = random_bytes(1 << 20, seed)
                .into_iter()
                .map(|b| match b % 100 {
                    0..=9 => '\n',
                    10..=14 => ':',
                    15..=24 => ' ',
                    25..=27 => '-',
                    28 => '&',
                    29 => '*',
                    30 => '[',
                    31 => '{',
                    32 => ']',
                    33 => '}',
                    n => char::from(b'a' + (n % 26)),
                })
                .collect();
            assert!(!errors(&text).is_empty());
        }
    });
}
