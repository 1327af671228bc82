//! Assertions on refused configuration files, shared by the tests of the
//! rules files (`config_errors.rs`) and of the gateway's file
//! (`gateway_config.rs`). Each includes it as
//! `#[path = "support/config.rs"] mod config_support;` (not through
//! `support`, which every test binary compiles) and says what it loads:
//! `FILE`, the path a test's text is loaded as, and `load(yaml)`, which
//! loads that one text.

use std::fmt::Debug;
use std::path::Path;

use slidegate_server::config::{ConfigError, ConfigErrors};

use super::{FILE, load};

/// Every error of `loaded`, which must have been refused (`input`, what
/// was loaded, for the message if it was not).
#[track_caller]
pub(crate) fn refused(loaded: Result<impl Debug, ConfigErrors>, input: &str) -> Vec<ConfigError> {
    match loaded {
        Ok(loaded) => panic!("expected the configuration to be refused:\n{input}\n---\n{loaded:#?}"),
        Err(ConfigErrors(errors)) => {
            assert!(!errors.is_empty(), "ConfigErrors holds at least one error");
            errors
        }
    }
}

/// Every error `yaml` gives (it must give one).
#[track_caller]
pub(crate) fn errors(yaml: &str) -> Vec<ConfigError> {
    refused(load(yaml), yaml)
}

/// The one error `yaml` gives.
#[track_caller]
pub(crate) fn error(yaml: &str) -> ConfigError {
    let mut all = errors(yaml);
    assert_eq!(all.len(), 1, "expected exactly one error, got {all:#?}");
    all.remove(0)
}

/// `error` lies at `line`:`column` of `FILE` and says each of `needles`.
#[track_caller]
pub(crate) fn assert_at(error: &ConfigError, line: u32, column: u32, needles: &[&str]) {
    assert_eq!(error.file, Path::new(FILE), "{error}");
    assert_eq!((error.line, error.column), (line, column), "position of: {error}");
    for needle in needles {
        assert!(error.message.contains(needle), "`{needle}` missing from: {error}");
    }
    let shown = error.to_string();
    assert!(shown.starts_with(&format!("{FILE}:{line}:{column}: ")), "{shown}");
}

/// `error` concerns `file` as a whole (no position) and says each of `needles`.
#[track_caller]
pub(crate) fn assert_whole(error: &ConfigError, file: &Path, needles: &[&str]) {
    assert_eq!(error.file, file, "{error}");
    assert_eq!((error.line, error.column), (0, 0), "no position: {error}");
    for needle in needles {
        assert!(error.message.contains(needle), "`{needle}` missing from: {error}");
    }
}
