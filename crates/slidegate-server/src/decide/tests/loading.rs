//! A request's own limit; loading files and directories.

use super::readme_1_to_5::{EXAMPLE_1, EXAMPLE_2, EXAMPLE_5, MARKETING_1};
use super::semantics::TWO_KEYS;
use super::*;

// ---------------------------------------------------------------------------
// A request's own limit.

#[tokio::test]
async fn a_request_limit_override_replaces_the_configured_one() {
    let h = harness(TWO_KEYS);
    let two_per_minute = LimitOverride { requests_per_unit: 2, unit: Unit::Minute };
    let overridden =
        |entries: &[(&str, &str)]| RequestDescriptor { limit: Some(two_per_minute), ..desc(entries) };
    let b = &[("b", "o")];
    for remaining in [1, 0] {
        let status = h.one_of("two", overridden(b)).await;
        assert_eq!(status.code, Code::Ok);
        assert_eq!(limit_of(&status), Some((2, Some(Unit::Minute))));
        assert_eq!(status.remaining, remaining);
    }
    assert_eq!(h.one_of("two", overridden(b)).await.code, Code::OverLimit);
    // The configured 5/min counter is apart and untouched.
    assert_eq!(h.one("two", b).await.remaining, 4);

    // It applies even where no configured descriptor matches...
    let unmatched = &[("nothing", "configured")];
    assert_no_limit(&h.one("two", unmatched).await);
    assert_eq!(limit_of(&h.one_of("two", overridden(unmatched)).await), Some((2, Some(Unit::Minute))));
    // ...but not in an unknown domain.
    assert_no_limit(&h.one_of("unknown", overridden(unmatched)).await);

    // An override of 0 blocks.
    let blocked = RequestDescriptor {
        limit: Some(LimitOverride { requests_per_unit: 0, unit: Unit::Second }),
        ..desc(&[("a", "z")])
    };
    assert_eq!(h.one_of("two", blocked).await.code, Code::OverLimit);
}

// ---------------------------------------------------------------------------
// Loading files and directories.

fn write(path: &Path, text: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn a_directory_loads_every_rules_file() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("alpha.yaml"), EXAMPLE_1.as_bytes());
    write(&dir.path().join("nested/beta.yml"), EXAMPLE_5.as_bytes());
    // Skipped: dot files, dot directories, other extensions.
    write(&dir.path().join(".hidden.yaml"), b"domain: hidden\nnot: [valid");
    write(&dir.path().join("..2024_01_01/gamma.yaml"), b"domain: gamma\ndescriptors: []\n");
    write(&dir.path().join("README.txt"), b"not yaml at all: [");

    let config = Config::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<&str> = config.domains().map(|d| d.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["internal", "mongo_cps"]);
    assert_eq!(config.files().len(), 2);
    assert_eq!(config.domain("mongo_cps").unwrap().file(), dir.path().join("alpha.yaml"));
    assert_eq!(config.domain("internal").unwrap().file(), dir.path().join("nested/beta.yml"));
    assert_eq!(config.hash().len(), 16);

    let h = harness_of(config);
    assert_eq!(
        limit_of(&h.one("mongo_cps", &[("database", "users")]).await),
        Some((500, Some(Unit::Second)))
    );
    assert_eq!(limit_of(&h.one("internal", &[("azure", "x")]).await), Some((100, Some(Unit::Minute))));
    assert_no_limit(&h.one("gamma", &[("a", "b")]).await);

    // The same directory loaded again: the same hash.
    assert_eq!(Config::load(dir.path()).unwrap().hash(), h.decider.rules().current().hash());
}

#[tokio::test]
async fn a_single_file_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    write(&file, EXAMPLE_2.as_bytes());
    let config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.files(), std::slice::from_ref(&file));
    let h = harness_of(config);
    h.admits_exactly("messaging", MARKETING_1, 5).await;
}

#[tokio::test]
async fn a_domain_defined_twice_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.yaml");
    let second = dir.path().join("b.yaml");
    write(&first, b"domain: same\ndescriptors:\n  - key: k\n");
    write(&second, b"# the second\ndomain: same\ndescriptors:\n  - key: j\n");
    let ConfigErrors(errors) = Config::load(dir.path()).expect_err("a domain in two files");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let error = &errors[0];
    assert_eq!(error.file, second);
    assert_eq!(error.line, 2, "{error}");
    assert!(error.message.contains("same"), "{error}");
    assert!(error.message.contains(&first.display().to_string()), "names the first file: {error}");
    let shown = error.to_string();
    assert!(shown.starts_with(&format!("{}:2:", second.display())), "{shown}");
}

#[tokio::test]
async fn rules_can_be_replaced_in_flight() {
    let h = harness(TWO_KEYS);
    assert_eq!(limit_of(&h.one("two", &[("a", "x")]).await), Some((2, Some(Unit::Minute))));
    h.decider.rules().replace(load(EXAMPLE_1));
    assert_no_limit(&h.one("two", &[("a", "x")]).await);
    assert_eq!(
        limit_of(&h.one("mongo_cps", &[("database", "users")]).await),
        Some((500, Some(Unit::Second)))
    );
}

/// Limits alike (the same name, limit, window, algorithm and penalty)
/// share one rule and the strings derived from it; counters stay apart
/// all the same, each keyed by its own descriptor. An unnamed limit's rule
/// is named by its descriptor, so it is its own.
#[tokio::test]
async fn limits_alike_share_one_rule_and_keep_their_own_counters() {
    let config = load(
        "domain: d\ndescriptors:\n\
         - {key: a, rate_limit: {name: n, unit: minute, requests_per_unit: 1}}\n\
         - {key: b, rate_limit: {name: n, unit: minute, requests_per_unit: 1}}\n\
         - {key: c, rate_limit: {name: n, unit: minute, requests_per_unit: 2}}\n\
         - {key: e, rate_limit: {unit: minute, requests_per_unit: 1}}\n",
    );
    let rules: Vec<(slidegate::Rule, *const u8)> = config
        .limits()
        .into_iter()
        .map(|(_, limit)| {
            let rule = limit.rule().expect("a rule");
            (rule.clone(), rule.state_name().as_ptr())
        })
        .collect();
    assert_eq!(rules.len(), 4);
    assert_eq!(rules[0], rules[1], "a and b share one rule");
    assert_ne!(rules[0].0, rules[2].0, "c's limit is another rule");
    assert_eq!(rules[3].0.name(), Some("d.e"), "e's is named by its descriptor");
    let h = harness_of(config);
    assert_eq!(h.one("d", &[("a", "x")]).await.code, Code::Ok);
    assert_eq!(h.one("d", &[("b", "x")]).await.code, Code::Ok, "b counts apart from a");
    assert_eq!(h.one("d", &[("a", "x")]).await.code, Code::OverLimit);
}
