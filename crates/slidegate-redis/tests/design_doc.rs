//! docs/design.md's tables of Lua scripts ("4. Scripts") against the files
//! of `scripts/`: every script the tables name exists, every file is in the
//! table of roles, and every entry script (what a call runs,
//! `scripts/entry/`) has its row of KEYS, ARGV and reply. `lib/`,
//! `algorithms/` and `fast/` hold the parts the entry scripts are
//! assembled from (`src/scripts.rs`), so only `entry/` needs a row.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn design() -> String {
    let path = crate_dir().join("../../docs/design.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The rows of the Markdown table whose header line starts with `header`,
/// each split into its cells.
fn table(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|line| !line.starts_with(header));
    assert!(lines.next().is_some(), "docs/design.md has no table starting {header:?}");
    lines
        .skip(1) // the |---| line
        .take_while(|line| line.starts_with('|'))
        .map(|line| line.trim().trim_matches('|').split('|').map(|cell| cell.trim().to_owned()).collect())
        .collect()
}

/// Every `dir/name.lua` written in backticks in `cell`.
fn script_paths(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.ends_with(".lua") && quoted.contains('/'))
        .map(str::to_owned)
        .collect()
}

/// The `.lua` files of `scripts/<dir>`, as `dir/name.lua`.
fn files_in(dir: &str) -> BTreeSet<String> {
    let path = crate_dir().join("scripts").join(dir);
    fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .map(|entry| entry.expect("directory entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".lua"))
        .map(|name| format!("{dir}/{name}"))
        .collect()
}

fn script_dirs() -> Vec<String> {
    let path = crate_dir().join("scripts");
    let mut dirs: Vec<String> = fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .map(|entry| entry.expect("directory entry"))
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    dirs
}

fn exists(script: &str) -> bool {
    crate_dir().join("scripts").join(script).is_file()
}

/// The script table: one row per script a call runs, naming its files.
const SCRIPT_TABLE: &str = "| script (`scripts.rs`) |";
/// The table of roles: one row per directory (continued by rows with an
/// empty first cell), its files by name.
const ROLE_TABLE: &str = "| directory | files | role |";

#[test]
fn every_script_the_script_table_names_exists() {
    let rows = table(&design(), SCRIPT_TABLE);
    assert!(!rows.is_empty(), "the script table has no rows");
    for row in &rows {
        let named = script_paths(&row[0]);
        assert!(!named.is_empty(), "a script table row names no file: {:?}", row[0]);
        for script in named {
            assert!(exists(&script), "docs/design.md's script table names {script}, which scripts/ lacks");
        }
    }
}

#[test]
fn every_entry_script_has_a_row_in_the_script_table() {
    let rows = table(&design(), SCRIPT_TABLE);
    let listed: BTreeSet<String> = rows.iter().flat_map(|row| script_paths(&row[0])).collect();
    let entries = files_in("entry");
    assert!(!entries.is_empty(), "scripts/entry/ holds no script");
    for entry in &entries {
        assert!(listed.contains(entry), "{entry} has no row in docs/design.md's script table");
    }
}

#[test]
fn the_table_of_roles_lists_every_file_and_no_other() {
    let rows = table(&design(), ROLE_TABLE);
    let mut listed = BTreeSet::new();
    let mut dir = String::new();
    for row in &rows {
        // "`lib/`", or empty: the directory of the row above.
        if !row[0].is_empty() {
            dir = row[0].trim_matches('`').trim_end_matches('/').to_owned();
        }
        for name in row[1].split('`').skip(1).step_by(2) {
            listed.insert(format!("{dir}/{name}"));
        }
    }
    let on_disk: BTreeSet<String> = script_dirs().iter().flat_map(|dir| files_in(dir)).collect();
    assert!(!on_disk.is_empty(), "scripts/ holds no script");
    let missing: Vec<_> = on_disk.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&on_disk).collect();
    assert!(missing.is_empty(), "docs/design.md's table of roles leaves out {missing:?}");
    assert!(stale.is_empty(), "docs/design.md's table of roles names files scripts/ lacks: {stale:?}");
}
