//! Misuse of `#[rate_limit]` fails to compile with a message at the mistake.
//! The expected messages are the checked-in `ui/*.stderr`; regenerate them
//! with `TRYBUILD=overwrite cargo test -p slidegate-macros --test ui` and
//! review the diff.

#[test]
fn misuse_is_a_clear_compile_error() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
